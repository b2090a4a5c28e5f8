"""The battery: plan, run with bounded concurrency and timeouts, fold (DESIGN "engine")."""

from .battery import Battery, BatteryOptions, OnResult, OnStart, Resume, RunStart
from .clock import Clock, SystemClock, stamp

__all__ = [
    "Battery", "BatteryOptions", "Clock", "OnResult", "OnStart", "Resume", "RunStart",
    "SystemClock", "stamp",
]

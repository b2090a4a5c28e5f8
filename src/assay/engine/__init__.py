"""The battery: plan, run with bounded concurrency and timeouts, fold (DESIGN "engine")."""

from .battery import Battery, BatteryOptions, OnStart, RunStart
from .clock import Clock, SystemClock, stamp

__all__ = [
    "Battery", "BatteryOptions", "Clock", "OnStart", "RunStart", "SystemClock", "stamp",
]

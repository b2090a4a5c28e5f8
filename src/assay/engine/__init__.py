"""The battery: plan, run with bounded concurrency and timeouts, fold (DESIGN "engine").

The names are imported on first use (PEP 562): ``engine.runs`` must be
importable without the battery and the models behind it, so that ``assay
run`` can fork the store's writer before it imports them (commands/run.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .battery import Battery, BatteryOptions, OnResult, OnStart, Resume, RunStart
    from .clock import Clock, SystemClock, stamp

_WHERE = {
    "Battery": "battery", "BatteryOptions": "battery", "OnResult": "battery",
    "OnStart": "battery", "Resume": "battery", "RunStart": "battery",
    "Clock": "clock", "SystemClock": "clock", "stamp": "clock",
}

__all__ = [
    "Battery", "BatteryOptions", "Clock", "OnResult", "OnStart", "Resume", "RunStart",
    "SystemClock", "stamp",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)

"""The injectable clock: wall time for records, a monotonic one for durations."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Where the engine reads time, so tests can hold it still."""

    def now(self) -> datetime:
        """The current wall time, timezone-aware (UTC)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""


class SystemClock:
    """The machine's clocks."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """``time.perf_counter()``."""
        return time.perf_counter()


def stamp(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, to the millisecond."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

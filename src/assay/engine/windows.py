"""Batteries by window: one run per suite, agent version and window of time.

``assay run --window 24h`` names its run after the suite id, the target's
digest (the agent version) and the start of the window it runs in, so that
several schedulers or workers sweeping the same window make one battery,
not three (SPEC §8, docs/decisions/0026-windows.md). The window's start is
the moment floored in UTC: the hour (``1h``), midnight (``24h``), Monday
midnight (``7d``, ISO weeks). The store keeps at most one run per name by a
unique index; this module only computes names, and imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.runs.trials import Holder
    from .clock import Clock

#: The window sizes ``--window`` takes.
SIZES = ("1h", "24h", "7d")


@dataclass(frozen=True)
class Window:
    """One window of time: its size (``1h``, ``24h``, ``7d``) and its start (UTC, floored)."""

    size: str
    start: datetime

    @property
    def start_stamp(self) -> str:
        """The start as stored and shown: ISO 8601 in UTC to the second, with a ``Z``."""
        return self.start.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def label(self) -> str:
        """Size and start in one word, e.g. ``24h@2025-01-06T00:00:00Z``."""
        return f"{self.size}@{self.start_stamp}"

    def name(self, suite_id: str, target_digest: str) -> str:
        """The battery's name: suite id, agent version and this window (none holds a space)."""
        return f"{suite_id} {target_digest} {self.label}"


def window_start(size: str, moment: datetime) -> datetime:
    """The start of the ``size`` window that holds ``moment`` (timezone-aware), in UTC.

    Floored, never rounded: 10:59:59.999 is in the 10:00 hour. Weeks start on
    Monday (ISO 8601), so a ``7d`` window is a calendar week in UTC, the same
    for every machine whatever its local zone.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a window is taken from a timezone-aware moment")
    utc = moment.astimezone(UTC)
    if size == "1h":
        return utc.replace(minute=0, second=0, microsecond=0)
    midnight = utc.replace(hour=0, minute=0, second=0, microsecond=0)
    if size == "24h":
        return midnight
    if size == "7d":
        return midnight - timedelta(days=utc.weekday())
    raise ValueError(f"no window size {size!r}: one of {', '.join(SIZES)}")


def window_at(size: str, moment: datetime) -> Window:
    """The ``size`` window that holds ``moment``."""
    return Window(size, window_start(size, moment))


def current_window(size: str, clock: Clock) -> Window:
    """The ``size`` window that holds the clock's now."""
    return window_at(size, clock.now())


def chosen_window(size: str, at: str | None, clock: Clock) -> Window:
    """The ``size`` window holding ``at`` (ISO 8601 with its zone), else the clock's now.

    Taken once per command, so that every suite and target of one command is
    the battery of the same window even when the command runs across its end.
    ``UsageError`` (exit 2) names what is wrong with ``at``.
    """
    from ..errors import UsageError

    if at is None:
        return current_window(size, clock)
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        raise UsageError(f"--window-at: {at!r} is not an ISO 8601 time "
                         "(e.g. 2025-01-06T10:30Z)") from None
    if moment.tzinfo is None:
        raise UsageError(f"--window-at: {at!r} has no zone: add Z for UTC (or +HH:MM)")
    return window_at(size, moment)


class WindowTaken(Exception):
    """The window already has its battery (``holder``): this run registers nothing and stops.

    Raised from the battery's ``on_start`` after the store refused the
    registration by its unique index; ``engine.runs`` turns it into the
    run's result.
    """

    def __init__(self, holder: Holder) -> None:
        super().__init__(holder.run_id)
        self.holder = holder

"""A run's pace: trials per second, and the time left until its planned trials are in.

A pure function of one reading (``store.runs.progress``) and the time since the
run started, so that the page's events and the JSON twin give the same
figures for the same reading:

- rate = done / elapsed, where elapsed runs from the run's registration
  (``started_at``) to now, or to ``finished_at`` once it is sealed;
- ETA = (planned − done) / rate, for a run that planned its trials (an
  adaptive run adds trials as it goes: it has no ETA) and once a trial is in.

The rate is over the run's whole life, not a recent window: it moves
smoothly (trials are recorded in batches), and anyone can recompute it from
the store. A resumed run's rate counts the time it stood still.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Pace:
    """Trials per second and seconds left; None where they cannot be told yet."""

    rate: float | None
    eta_s: float | None


def pace(done: int, planned: int | None, elapsed_s: float) -> Pace:
    """The pace of ``done`` trials in ``elapsed_s`` seconds towards ``planned`` (see the doc)."""
    if done <= 0 or elapsed_s <= 0:
        return Pace(None, None)
    rate = done / elapsed_s
    if planned is None:
        return Pace(rate, None)
    return Pace(rate, max(0, planned - done) / rate)


def elapsed(started_at: str, until: datetime) -> float:
    """Seconds from a stored UTC stamp (``2025-01-06T10:30:00.000Z``) to ``until``."""
    try:
        began = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (until - began).total_seconds())

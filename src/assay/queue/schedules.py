"""Scheduled batteries: a suite against a target, once per window, started by the workers.

``assay schedule add`` keeps a schedule in the store. Every worker runs
procrastinate's periodic tick (once per period across all of them); the
tick enqueues a ``window`` job for each schedule whose current window has
no battery yet (its ``queueing_lock`` keeps one waiting per window). The
window job starts the target, registers the run as the battery of that
window and enqueues its chunks; however many such jobs race, the store's
unique index on (suite, agent version, window) leaves one battery, and the
others register nothing (docs/decisions/0026-windows.md, 0050-schedules.md).
After a scheduled battery is sealed, its schedule may read drift against
the battery before it and POST the reading.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import UsageError
from ..store import schema
from .app import WINDOW_TASK, defer

if TYPE_CHECKING:
    import procrastinate

    from ..store.database import Store


@dataclass(frozen=True)
class Schedule:
    """One stored schedule."""

    id: int
    suite_id: str
    target_uri: str
    every: str
    paths: list[str]
    hidden_dir: str | None
    cwd: str
    options: dict[str, Any]
    drift: bool
    notify: str | None
    added_at: str


def add(store: Store, schedule: dict[str, Any]) -> int:
    """Keep a schedule (the ``schedules`` row's values but ``id``); its id."""
    with store.engine.begin() as connection:
        result = connection.execute(schema.schedules.insert().values(
            **{**schedule, "paths": json.dumps(schedule["paths"]),
               "options": json.dumps(schedule["options"], sort_keys=True)}))
        key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def listed(store: Store) -> list[Schedule]:
    """Every schedule, oldest first."""
    s = schema.schedules.c
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(schema.schedules).order_by(s.id)).all()
    return [_schedule(row) for row in rows]


def one(store: Store, schedule_id: int) -> Schedule | None:
    """The schedule ``schedule_id``, or None once removed."""
    s = schema.schedules.c
    with store.engine.connect() as connection:
        row = connection.execute(sa.select(schema.schedules).where(s.id == schedule_id)).first()
    return None if row is None else _schedule(row)


def remove(store: Store, schedule_id: int) -> None:
    """Forget a schedule (its batteries stay); a usage error if there is none."""
    s = schema.schedules.c
    with store.engine.begin() as connection:
        gone = connection.execute(schema.schedules.delete().where(s.id == schedule_id)).rowcount
    if not gone:
        raise UsageError(f"no schedule {schedule_id} in the store (assay schedule list)")


def _schedule(row: Any) -> Schedule:
    return Schedule(int(row.id), row.suite_id, row.target_uri, row.every,
                    list(json.loads(row.paths)), row.hidden_dir, row.cwd,
                    dict(json.loads(row.options)), bool(row.drift), row.notify, row.added_at)


def last_battery(store: Store, schedule: Schedule) -> tuple[str, str, str] | None:
    """The newest battery of the schedule's suite and target: (run id, window, status)."""
    r = schema.runs.c
    with store.engine.connect() as connection:
        row = connection.execute(
            sa.select(r.run_id, r.window_size, r.window_start, r.status)
            .where(r.suite_id == schedule.suite_id, r.target_uri == schedule.target_uri,
                   r.window_size == schedule.every)
            .order_by(r.window_start.desc()).limit(1)).first()
    if row is None:
        return None
    return row.run_id, f"{row.window_size}@{row.window_start}", row.status


def due(store: Store, moment: datetime) -> list[tuple[Schedule, str]]:
    """Each schedule whose window at ``moment`` has no battery yet, with the window's start.

    By suite, target URI and window: a battery of another agent version
    behind the same URI counts too (the window job decides by version).
    """
    from ..engine.windows import window_at

    r = schema.runs.c
    found = []
    with store.engine.connect() as connection:
        for schedule in listed(store):
            start = window_at(schedule.every, moment).start_stamp
            taken = connection.execute(sa.select(r.run_id).where(
                r.suite_id == schedule.suite_id, r.target_uri == schedule.target_uri,
                r.window_size == schedule.every, r.window_start == start).limit(1)).first()
            if taken is None:
                found.append((schedule, start))
    return found


def enqueue_due(store: Store, deferrer: procrastinate.App, moment: datetime) -> int:
    """Enqueue a window job for each schedule due at ``moment``; how many were new."""
    made = 0
    for schedule, start in due(store, moment):
        with store.engine.begin() as connection:
            made += len(defer(deferrer, connection, WINDOW_TASK,
                              [{"schedule_id": schedule.id, "start": start}],
                              queueing_lock=f"window:{schedule.id}:{start}"))
    return made


def settings_of(schedule: Schedule, start: str, workers: int) -> Any:
    """The ``RunSettings`` of the schedule's battery of the window starting at ``start``."""
    from ..engine.runs import RunSettings
    from ..engine.windows import Window
    from ..grading.adaptive import DEFAULT_MAX_TRIALS
    from ..judging.options import JudgeOptions

    chosen = schedule.options
    moment = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(UTC)
    judges = JudgeOptions(judge=chosen.get("judge"), base_url=chosen.get("judge_base_url"),
                          concurrency=workers)
    return RunSettings(
        trials=chosen.get("trials"), concurrency=workers, timeout_s=chosen.get("timeout_s"),
        base_url=chosen.get("base_url"), window=Window(schedule.every, moment), judges=judges,
        review=chosen.get("review", "both"), user_model=chosen.get("user_model"),
        hidden_dir=Path(schedule.hidden_dir) if schedule.hidden_dir else None,
        max_trials=DEFAULT_MAX_TRIALS)


def queue_of(schedule: Schedule) -> Any:
    """How the schedule's batteries are enqueued (its ``--chunk`` and ``--target-limit``)."""
    from .submit import QueueExecutor

    chosen = schedule.options
    return QueueExecutor(chunk=chosen.get("chunk"), target_limit=chosen.get("target_limit"))


def load_suite(schedule: Schedule) -> Any:
    """The schedule's suite, loaded from its paths (``UsageError`` naming what is missing)."""
    from ..suites import discover

    paths = [Path(p) for p in schedule.paths]
    found = [item for item in discover(paths, Path(schedule.hidden_dir)
                                       if schedule.hidden_dir else None)
             if item.suite.id == schedule.suite_id]
    if not found:
        raise UsageError(f"schedule {schedule.id}: no suite {schedule.suite_id} under "
                         f"{', '.join(schedule.paths)}")
    return found[0]


def read_drift(store: Store, run_id: str) -> dict[str, Any] | None:
    """The drift reading of a sealed battery against the one before it (same agent version).

    None when it is the first battery of its version. The ``assay.drift/1``
    document, as ``assay drift`` writes it.
    """
    from ..analysis.drift import drift
    from ..analysis.run_facts import load_stored

    stored = store.open_run(run_id)
    two = store.batteries(stored.suite_id, stored.target_digest, limit=2)
    if len(two) < 2 or two[0].run_id != run_id:
        return None
    cand, base = (load_stored(store, battery.run_id) for battery in two)
    document: dict[str, Any] = drift(base, cand).to_json()
    return document

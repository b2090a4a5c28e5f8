"""``assay run --executor queue``: register a battery with its chunks and jobs, then follow it.

The submitter starts the target once, as a local run does, to take the
agent version the run is registered with (workers must run that agent:
each checks). The run's row, its ``run-registered`` entry, its chunks and
their jobs are written in one transaction (``enqueue``); then the target is
closed and the command either returns (``--detach``) or follows the run in
the store until a worker seals it, and reports it as a local run does. The
submitter holds nothing the battery needs: it can die, and ``assay show RUN
--follow`` (or ``assay run --resume RUN``) picks the run up again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import HarnessFailure, UsageError

if TYPE_CHECKING:
    from ..engine.battery import RunStart
    from ..engine.runs import RunResult, RunSettings, Watcher
    from ..store.database import Store
    from ..suites import LoadedSuite

#: How often a follower reads the run's progress from the store.
POLL_S = 0.25


@dataclass(frozen=True)
class QueueExecutor:
    """``--executor queue``: each battery enqueued on the store's PostgreSQL for ``assay
    worker`` processes, then followed to its seal (``engine.runs.Executor``, SPEC §12)."""

    #: ``--detach``: return once the battery is enqueued, without following it.
    detach: bool = False
    #: ``--chunk``: trials per job (default ``chunks.DEFAULT_CHUNK``).
    chunk: int | None = None
    #: ``--target-limit``: trials in flight against the target across every worker,
    #: held in the database (``permits``).
    target_limit: int | None = None

    def refuse(self, settings: RunSettings, db: str | None, store: bool) -> None:
        """Refuse what the queue cannot do, with the reason."""
        check_queue(settings, db, store)

    def execute(self, load: Callable[[], Sequence[LoadedSuite]], targets: Sequence[str],
                settings: RunSettings, watcher: Watcher, db: str | None) -> list[RunResult]:
        """Each (suite, target) enqueued for ``assay worker`` processes; followed unless
        ``detach``."""
        from ..engine.runs import checked_plans

        url = check_queue(settings, db, store=True)
        plans = checked_plans(load, targets, settings, watcher)
        return [submit(item, uri, settings, watcher, url, self) for item, uri in plans]


def check_queue(settings: RunSettings, db: str | None, store: bool) -> str:
    """Refuse what the queue cannot do, with the reason; the store's URL."""
    from .app import needs_postgres

    if not store:
        raise UsageError("--executor queue records every trial in the store the workers share: "
                         "it cannot go with --no-store")
    if settings.agent_cache:
        raise UsageError("--executor queue: --agent-cache keeps model calls in a folder of "
                         "this machine, which workers on other machines do not share")
    if settings.otel:
        raise UsageError("--executor queue: --otel is not carried to the workers, whose "
                         "python: agents would run without it; run it locally, or give "
                         "--no-otel (the settings' otel = true asks for it too)")
    if settings.keep_workspaces is not None:
        raise UsageError("--executor queue: --keep-workspaces keeps trials' folders on the "
                         "machine that ran them, and workers run them elsewhere")
    _check_upstreams(settings)
    return needs_postgres(db, "--executor queue")


def _check_upstreams(settings: RunSettings) -> None:
    """Refuse an upstream URL with a key in it: a queued run keeps its URLs in the store.

    The URLs travel with the run (its workers forward its exec: agents' model
    calls there); the keys never do: each worker adds its own, from its
    environment.
    """
    from ..targets.wire.proxy import KEY_ENV, credential_in

    for api, url in settings.upstreams:
        found = credential_in(url)
        if found is not None:
            raise UsageError(
                f"--executor queue: --upstream-{api} carries {found}, and a queued run keeps "
                "its upstream URLs in the store for its workers: give the URL without it, and "
                f"the key in each worker's environment ({KEY_ENV[api][0]})")


def submit(item: LoadedSuite, uri: str, settings: RunSettings, watcher: Watcher,
           url: str, queue: QueueExecutor) -> RunResult:
    """Register and enqueue one battery; follow it to its seal unless ``queue.detach``."""
    from ..engine.runs import RunResult
    from ..engine.windows import WindowTaken
    from ..store.database import open_store
    from .app import ensure_schema

    result = RunResult(suite_id=item.suite.id, target_uri=uri)
    store = open_store(url)
    try:
        ensure_schema(store)
        try:
            run_id, planned = asyncio.run(enqueue_battery(store, item, uri, settings, queue,
                                                          watcher, url))
        except HarnessFailure as failure:
            result.harness_failure = str(failure)
            return result
        except WindowTaken as taken:
            result.existing = taken.holder
            return result
        result.run_id = run_id
        if queue.detach:
            result.detached = True
            return result
        return follow_to_seal(store, run_id, item.suite.id, planned, watcher, result)
    finally:
        store.close()


def follow_to_seal(store: Store, run_id: str, label: str, planned: int | None,
                   watcher: Watcher, result: RunResult) -> RunResult:
    """Follow ``run_id`` until sealed and put its report in ``result``; Ctrl-C stops following."""
    try:
        follow(store, run_id, label, planned, watcher)
    except HarnessFailure as failure:
        result.run_id = run_id
        result.harness_failure = str(failure)
        return result
    except KeyboardInterrupt:
        watcher.notice(f"stopped following run {run_id}; its battery goes on in the workers "
                       f"(assay show {run_id} --follow)")
        result.run_id = run_id
        result.detached = True
        return result
    result.report = sealed_report(store, run_id)
    result.run_id = run_id
    return result


def follow(store: Store, run_id: str, label: str, planned: int | None,
           watcher: Watcher) -> None:
    """Show the run's progress from the store until it is sealed."""
    from ..store.runs.progress import run_progress

    seen: dict[str, int] = {}
    polls = 0
    with watcher.battery(label, planned) as on_trial:
        while True:
            progress = run_progress(store, run_id)
            if progress is None:
                raise UsageError(f"no run {run_id} in the store")
            for outcome, number in progress.counts.items():
                for _ in range(number - seen.get(outcome, 0)):
                    on_trial(outcome)
                seen[outcome] = max(number, seen.get(outcome, 0))
            if progress.status != "open":
                return
            polls += 1
            if polls % FAILED_EVERY == 0:
                failed = failed_chunks(store, run_id)
                if failed:
                    raise HarnessFailure(
                        f"run {run_id}: {failed} chunk(s) failed in every worker that tried "
                        "them (the workers' output says why: another agent, or the suite's "
                        "files missing there); the run stays open")
            time.sleep(POLL_S)


#: Every how many polls a follower looks for chunks whose job failed for good.
FAILED_EVERY = 8


def failed_chunks(store: Store, run_id: str) -> int:
    """The run's chunks still to run whose job failed on every try (nobody will run them)."""
    import sqlalchemy as sa

    with store.engine.connect() as connection:
        return int(connection.scalar(sa.text(
            "SELECT count(*) FROM run_chunks c JOIN procrastinate_jobs j ON j.id = c.job_id "
            "WHERE c.run_id = :run AND c.state = 'todo' "
            "AND j.status IN ('failed', 'cancelled', 'aborted')"), {"run": run_id}) or 0)


def sealed_report(store: Store, run_id: str) -> Any:
    """A sealed run's full report, its cases read back from a spool as asked for.

    ``--json`` writes its line from the spool, which keeps the stored JSON of
    each case: the bytes the seal covers, not serialised again.
    """
    from ..engine.spool import read_report

    status, seal = store.run_status(run_id)
    if status != "sealed":
        raise UsageError(f"run {run_id} is not sealed")
    report = read_report(store.report_pieces(run_id))
    report.seal = seal
    return report


async def enqueue_battery(store: Store, item: LoadedSuite, uri: str, settings: RunSettings,
                          queue: QueueExecutor, watcher: Watcher, url: str, *,
                          cwd: str | None = None,
                          schedule: int | None = None) -> tuple[str, int | None]:
    """Start the target, take its version, register the run with its chunks and jobs.

    Its run id and planned trials. ``WindowTaken`` when ``settings.window`` has its
    battery already (nothing registered, nothing enqueued). ``cwd``: where the
    run's relative module names resolve (default: here); ``schedule``: the
    schedule that started it (its seal then reads drift).
    """
    from ..engine.battery import Battery, BatteryOptions
    from ..engine.record import prepared_parts, registration_row
    from ..engine.windows import WindowTaken
    from ..targets import make_target, target_options
    from .chunks import DEFAULT_CHUNK, cut
    from .enqueue import enqueue_run
    from .tasks import make_app

    target = make_target(uri, target_options(item.suite, item.path.parent,
                                             concurrency=settings.concurrency,
                                             base_url=settings.base_url,
                                             upstreams=settings.upstreams))
    options = BatteryOptions(concurrency=settings.concurrency, trials=settings.trials,
                             timeout_s=settings.timeout_s, seed=settings.seed,
                             adaptive=settings.adaptive, max_trials=settings.max_trials)
    battery = Battery(item, target, options)
    ids = [case.id for case in item.suite.cases]
    slots = list(battery.planned_trials())
    adaptive = battery.adaptive
    whole = {ids[index]: battery.expected(index) for index, _ in slots
             if adaptive is not None and adaptive[index]}
    fixed = [(ids[index], n) for index, n in slots if ids[index] not in whole]
    chunks = cut(fixed, whole, queue.chunk or DEFAULT_CHUNK)
    hidden = frozenset(case.id for case in item.suite.cases if case.split == "hidden")
    planned = None if adaptive is not None else len(slots)
    # Made before the target starts: a large suite does not hold the registration up.
    prepared = prepared_parts(item)
    app = make_app(url)

    def on_start(start: RunStart) -> None:
        chosen = _options(settings, queue, planned, item, target, len(chunks))
        chosen["queue"]["cwd"] = cwd or chosen["queue"]["cwd"]
        if schedule is not None:
            chosen["queue"]["schedule"] = schedule
        row, content = registration_row(
            start, item, settings.trials or item.suite.trials, chosen, settings.window,
            max_trials=settings.max_trials if settings.adaptive else None, prepared=prepared)
        try:
            holder = enqueue_run(store, app, row, content, chunks, hidden)
        finally:
            prepared[1].close()
        if holder is not None:
            raise WindowTaken(holder)
        watcher.registered(start.run_id)

    battery.on_start = on_start
    await target.start()
    try:
        start = battery.begin()
    finally:
        await target.close()
    watcher.notice(f"run {start.run_id}: {len(slots)} trial(s) queued in {len(chunks)} "
                   "chunk(s) for `assay worker`")
    return start.run_id, planned


def _options(settings: RunSettings, queue: QueueExecutor, planned: int | None,
             item: LoadedSuite, target: Any, chunks: int) -> dict[str, Any]:
    """The run's options: a local run's, and what the workers need to run it the same way."""
    chosen: dict[str, Any] = {"trials": settings.trials, "timeout_s": settings.timeout_s}
    if planned is not None:
        chosen["planned"] = planned
    if settings.adaptive:
        chosen["adaptive"] = {"max_trials": settings.max_trials}
    judges = settings.judges
    chosen["queue"] = {
        "paths": [str(item.path.resolve())],
        "hidden_dir": str(settings.hidden_dir.resolve()) if settings.hidden_dir else None,
        "cwd": str(Path.cwd()),
        "base_url": settings.base_url,
        # URLs only: each worker's proxy adds the key from its own environment.
        "upstreams": dict(settings.upstreams),
        "judge": judges.judge if judges else None,
        "judge_base_url": judges.base_url if judges else None,
        "judge_cache": judges.cache if judges else True,
        "user_model": settings.user_model,
        "review": settings.review,
        "chunks": chunks,
        "target_limit": queue.target_limit,
        "evidence": {k: getattr(v, "value", v) for k, v in dict(target.evidence).items()},
    }
    return chosen

"""What a worker does with a job: run a chunk of a queued battery, or seal the run.

A worker keeps, per run it has taken chunks of, the suite loaded from the
files the run was started from (checked against the digests it registered,
as a resume checks them), the target started once and checked against the
agent version the run registered, and its judges. A chunk is then a resume
restricted to its trials: the battery runs what the store does not hold yet,
records it through the fenced sink, and marks the chunk done; the last chunk
of a run enqueues its seal. Verdicts are the local executor's: the same
battery grades and folds them (docs/decisions/0048-queue.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .registered import (
    Refused,
    battery_options,
    load_registered,
    make_panel,
    make_users,
    queue_options,
)

if TYPE_CHECKING:
    import procrastinate
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..engine.battery import BatteryOptions
    from ..engine.runs import RunSettings
    from ..judging.panel import Panel
    from ..judging.simulated_user import UserSimulator
    from ..store.database import OpenRun, Store
    from ..suites import LoadedSuite
    from ..targets import Target
    from .chunks import Chunk
    from .permits import Permits


@dataclass
class _Run:
    """What a worker keeps of one run while it runs chunks of it."""

    stored: OpenRun
    loaded: LoadedSuite
    settings: RunSettings
    options: BatteryOptions
    target: Target
    panel: Panel | None
    users: UserSimulator | None = None
    busy: int = 0
    used: float = field(default_factory=time.monotonic)


class Work:
    """A worker process's state: the store, its runs, and the bound on trials in flight."""

    def __init__(self, store: Store, deferrer: procrastinate.App, key: Ed25519PrivateKey | None,
                 concurrency: int, *, url: str = "", idle_s: float = 300.0,
                 say: Callable[[str], None] = lambda line: None,
                 permits: Permits | None = None) -> None:
        self.store = store
        #: The store's URL (a scheduled battery's jobs are enqueued on it).
        self.url = url
        #: Where the worker's lines go (its stderr): ids, counts and reasons, never a case.
        self.say = say
        #: An app never opened: it enqueues on the connection of our own transactions.
        self.deferrer = deferrer
        self.key = key
        self.concurrency = concurrency
        self.idle_s = idle_s
        #: Trials in flight in this process, across all its chunks.
        self.gate = asyncio.Semaphore(concurrency)
        #: The one thread that writes trial batches (the ledger serialises them anyway).
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-record")
        #: The targets' permits (``--target-limit``), on a connection of this worker's.
        self.permits = permits
        self._runs: dict[str, _Run] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._suspect = asyncio.Lock()
        #: What this worker ran, for its log: chunks, trials.
        self.chunks = 0
        self.trials = 0

    async def chunk(self, job_id: int, worker_id: int | None, run_id: str, number: int) -> None:
        """Run one chunk of a run; mark it done (the last one enqueues the seal)."""
        from .chunks import decode
        from .fence import Fenced
        from .leases import ISOLATE_AT

        found = await asyncio.to_thread(_chunk_items, self.store, run_id, number)
        if found is None:
            return  # done or split already: this job is a leftover
        items, stalls = found
        try:
            if stalls >= ISOLATE_AT:
                # A trial that has stopped workers before runs alone among such trials
                # here: if it stops this one too, it is the only suspect that did (leases).
                # One still waiting its turn has not started: it is not blamed either.
                async with self._suspect:
                    await asyncio.to_thread(_started, self.store, run_id, number)
                    await self._chunk(job_id, worker_id, run_id, number, decode(items))
            else:
                await asyncio.to_thread(_started, self.store, run_id, number)
                await self._chunk(job_id, worker_id, run_id, number, decode(items))
        except Fenced as fenced:
            # Taken back while this worker was away: another ran it; nothing to retry.
            self.say(f"assay worker: chunk {number} of run {run_id}: {fenced}")
        except Refused as refused:
            self.say(f"assay worker: refused chunk {number}: {refused}")
            raise

    async def _chunk(self, job_id: int, worker_id: int | None, run_id: str, number: int,
                     chunk: Chunk) -> None:
        from ..engine.battery import Battery, Resume
        from ..engine.record import RunRecorder
        from .fence import FencedSink, complete_chunk

        run = await self._run(run_id)
        run.busy += 1
        try:
            done = await asyncio.to_thread(_recorded, self.store, run_id, list(chunk.only))
            battery = Battery(run.loaded, run.target, run.options, panel=run.panel,
                              users=run.users,
                              resume=Resume(run_id=run_id, seed=run.stored.seed or 0,
                                            started_at=run.stored.started_at, done=done),
                              only=chunk.only, gate=self._gate(run))
            battery.target_digest = run.stored.target_digest
            recorder = RunRecorder(FencedSink(self.store, self.pool, job_id, worker_id))
            recorder.reopen(run_id)
            counted = 0

            def on_trial(outcome: str) -> None:
                nonlocal counted
                counted += 1

            battery.on_result = recorder.record
            battery.on_trial = on_trial
            try:
                await battery.run_trials()
            except asyncio.CancelledError:
                battery.interrupt()  # the worker stops: the chunk is retried elsewhere
                raise
            finally:
                # What finished is recorded even when the chunk did not (a resume runs less).
                await asyncio.to_thread(recorder.close)
            await asyncio.to_thread(complete_chunk, self.store, self.deferrer, job_id,
                                    worker_id, run_id, number, dict(run.target.facets))
            self.chunks += 1
            self.trials += counted
        finally:
            run.busy -= 1
            run.used = time.monotonic()

    def _gate(self, run: _Run) -> Callable[[], AbstractAsyncContextManager[Any]]:
        """What each trial of ``run`` holds: a slot of this worker, and a target permit."""
        limit = queue_options(run.stored).get("target_limit")
        if not isinstance(limit, int) or self.permits is None:
            return lambda: self.gate
        permits, uri = self.permits, run.stored.target_uri

        @contextlib.asynccontextmanager
        async def held() -> AsyncIterator[None]:
            async with self.gate, permits.permit(uri, limit):
                yield

        return held

    async def seal(self, run_id: str) -> str | None:
        """Seal a run whose chunks are all done; its run id, or None if it was not due.

        A scheduled battery's schedule may then read drift and POST it.
        """
        from .sealing import seal_queued

        sealed = await asyncio.to_thread(seal_queued, self.store, self.key, run_id,
                                         self.concurrency)
        run = self._runs.get(run_id)
        if sealed is not None and run is not None and not run.busy:
            await self._close_run(run_id)
        if sealed is not None:
            await asyncio.to_thread(self._after_seal, run_id)
        return sealed

    def _after_seal(self, run_id: str) -> None:
        """A scheduled battery's drift reading, said and POSTed as its schedule asks."""
        from ..webhooks import post_json, where
        from .schedules import one, read_drift

        stored = self.store.open_run(run_id)
        schedule_id = queue_options(stored).get("schedule")
        schedule = one(self.store, schedule_id) if isinstance(schedule_id, int) else None
        if schedule is None or not schedule.drift:
            return
        reading = read_drift(self.store, run_id)
        if reading is None:
            self.say(f"assay worker: schedule {schedule.id}: run {run_id} is the first battery "
                     "of its agent version: no drift to read yet")
            return
        self.say(f"assay worker: schedule {schedule.id}: drift of run {run_id}: "
                 f"{reading['status']}")
        if schedule.notify:
            why = post_json(schedule.notify, reading)
            if why is not None:
                self.say(f"assay worker: could not notify {where(schedule.notify)}/…: {why}")

    async def tick(self, timestamp: int) -> None:
        """Enqueue a window job for each schedule whose current window has no battery."""
        from datetime import UTC, datetime

        from .schedules import enqueue_due

        await asyncio.to_thread(enqueue_due, self.store, self.deferrer,
                                datetime.fromtimestamp(timestamp, UTC))

    async def window(self, schedule_id: int, start: str) -> None:
        """Register and enqueue the battery of one schedule's window, unless it has one."""
        from ..engine.runs import QuietWatcher
        from ..engine.windows import WindowTaken
        from .schedules import load_suite, one, queue_of, settings_of
        from .submit import enqueue_battery

        schedule = await asyncio.to_thread(one, self.store, schedule_id)
        if schedule is None:
            return  # removed since the tick
        item = await asyncio.to_thread(load_suite, schedule)
        settings = settings_of(schedule, start, self.concurrency)
        await asyncio.to_thread(_warm, schedule.target_uri)
        try:
            run_id, planned = await enqueue_battery(
                self.store, item, schedule.target_uri, settings, queue_of(schedule),
                QuietWatcher(), self.url,
                cwd=schedule.cwd, schedule=schedule.id)
        except WindowTaken as taken:
            self.say(f"assay worker: schedule {schedule.id}: window {start} has its battery "
                     f"already ({taken.holder.run_id})")
            return
        self.say(f"assay worker: schedule {schedule.id}: run {run_id} is the battery of "
                 f"window {settings.window.label}")

    async def tidy(self) -> None:
        """Close the targets of runs this worker has not used for ``idle_s``."""
        now = time.monotonic()
        for run_id, run in list(self._runs.items()):
            if not run.busy and now - run.used > self.idle_s:
                await self._close_run(run_id)

    async def close(self) -> None:
        """Close every target and judge; wait for the writer thread."""
        for run_id in list(self._runs):
            await self._close_run(run_id)
        if self.permits is not None:
            await self.permits.close()
        self.pool.shutdown(wait=True)

    async def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is not None:
            return run
        lock = self._opening.setdefault(run_id, asyncio.Lock())
        async with lock:
            run = self._runs.get(run_id)
            if run is None:
                run = self._runs[run_id] = await self._open(run_id)
            return run

    async def _open(self, run_id: str) -> _Run:
        """Load the run's suite, start its target and check the agent is the one registered."""
        from ..targets import make_target, target_options
        from ..targets.identity import changes, identity_digest

        stored = await asyncio.to_thread(self.store.open_run, run_id)
        loaded, settings = await asyncio.to_thread(load_registered, stored, self.concurrency)
        # What is slow to import is imported off the loop: a loop held for seconds sends
        # no heartbeat, and the worker's chunks would be taken back from it.
        await asyncio.to_thread(_warm, stored.target_uri)
        panel = await asyncio.to_thread(make_panel, loaded, settings)
        users = make_users(loaded, settings)
        target = make_target(stored.target_uri, target_options(
            loaded.suite, loaded.path.parent, concurrency=self.concurrency,
            base_url=settings.base_url, upstreams=settings.upstreams))
        await target.start()
        identity = target.identity()
        if identity_digest(identity) != stored.target_digest:
            await target.close()
            if users is not None:
                await users.close()
            registered = stored.options.get("target_identity") or {}
            what = "; ".join(changes(registered, identity)) if registered else "its version"
            raise Refused(f"run {run_id}: the agent {stored.target_uri} on this worker is not "
                          f"the one the run registered ({what})")
        return _Run(stored, loaded, settings, battery_options(settings), target, panel, users)

    async def _close_run(self, run_id: str) -> None:
        run = self._runs.pop(run_id, None)
        self._opening.pop(run_id, None)
        if run is None:
            return
        try:
            await run.target.close()
        finally:
            if run.panel is not None:
                await run.panel.close()
            if run.users is not None:
                await run.users.close()


def _recorded(store: Store, run_id: str, cases: list[str]) -> dict[tuple[str, int], Any]:
    """What the store holds of these cases' trials (most chunks: nothing, said in one query)."""
    from .fence import stored_trials

    with store.engine.connect() as connection:
        if not stored_trials(connection, run_id, cases):
            return {}
    return store.load_trials(run_id, cases)


def _warm(uri: str) -> None:
    """Import the libraries a target of ``uri`` loads when it starts (in a thread)."""
    import importlib

    for prefix, module in (("openai:", "openai"), ("mcp+", "mcp")):
        if uri.startswith(prefix):
            try:
                importlib.import_module(module)
            except ImportError:
                return  # the target says so itself when it starts


def _started(store: Store, run_id: str, number: int) -> None:
    """Mark a chunk as begun here: from now on a stop of this worker is its stall too."""
    from ..store import schema

    c = schema.run_chunks.c
    with store.engine.begin() as connection:
        connection.execute(schema.run_chunks.update().where(
            c.run_id == run_id, c.chunk == number, c.state == "todo").values(started=True))


def _chunk_items(store: Store, run_id: str, number: int) -> tuple[str, int] | None:
    """A chunk's items and stalls while it is still to run (None once done or split)."""
    import sqlalchemy as sa

    from ..store import schema

    c = schema.run_chunks.c
    with store.engine.connect() as connection:
        row = connection.execute(sa.select(c["items"], c.state, c.stalls).where(
            c.run_id == run_id, c.chunk == number)).first()
    if row is None or row.state != "todo":
        return None
    return str(row.items), int(row.stalls)

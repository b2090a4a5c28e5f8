"""A worker's writes, fenced by its job: recorded only while the job is still its own.

A worker that stops past its lease (paused, swapped out, cut off) has its
chunk taken away by the lease sweeper (``leases``) and run by another
worker. When it wakes it goes on running trials and writing them: so every
write of a chunk first holds the chunk's job row (``FOR SHARE``) and goes on
only while the job is ``doing`` under this worker's id. The sweeper takes
the same row ``FOR UPDATE`` before it splits a chunk, so the two never
interleave, and a woken worker's batches are refused whole
(docs/decisions/0048-queue.md). Trials are also recorded by their identity:
a (case, trial) stored already is left out of a batch, never written twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..store import schema
from .app import SEAL_TASK, defer

if TYPE_CHECKING:
    import procrastinate

    from ..store.database import Store
    from ..store.runs.trials import Holder, TrialRecord


class Fenced(Exception):
    """The chunk's job is no longer this worker's: nothing of this write was recorded."""


_HOLD = sa.text("SELECT 1 FROM procrastinate_jobs WHERE id = :job AND status = 'doing' "
                "AND worker_id = :worker FOR SHARE")


def hold(connection: sa.Connection, job_id: int, worker_id: int | None) -> None:
    """Hold the job row for this transaction, or raise ``Fenced`` if the job is not ours."""
    if worker_id is None or connection.execute(
            _HOLD, {"job": job_id, "worker": worker_id}).first() is None:
        raise Fenced(f"job {job_id} is no longer this worker's (its lease ran out and another "
                     "worker took its trials): nothing more of it is recorded here")


def stored_trials(connection: sa.Connection, run_id: str,
                  cases: Sequence[str]) -> set[tuple[str, int]]:
    """The (case, trial) pairs of ``cases`` recorded for the run."""
    t = schema.trials.c
    found: set[tuple[str, int]] = set()
    unique = sorted(set(cases))
    for at in range(0, len(unique), 500):
        found.update((row.case_id, row.n) for row in connection.execute(
            sa.select(t.case_id, t.n).where(t.run_id == run_id,
                                            t.case_id.in_(unique[at:at + 500]))))
    return found


def write_owned(store: Store, job_id: int, worker_id: int | None, run_id: str,
                records: Sequence[TrialRecord]) -> int:
    """Write the trials of ``records`` not stored yet, fenced by the job; how many were new."""
    from ..store.runs.record import write_trials

    with store.writing(run_id) as connection:
        hold(connection, job_id, worker_id)
        stored = stored_trials(connection, run_id, [r.case_id for r in records])
        fresh = [r for r in records if (r.case_id, r.n) not in stored]
        if fresh:
            write_trials(connection, run_id, fresh, ledger=True)
    return len(fresh)


def complete_chunk(store: Store, app: procrastinate.App, job_id: int, worker_id: int | None,
                   run_id: str, chunk: int, facets: dict[str, str]) -> bool:
    """Mark the chunk done; the last one of its run enqueues the seal. True if it was last.

    The run's row is locked first, so that two chunks finishing together
    see each other's state: exactly one of them sees none left.
    """
    with store.writing(run_id) as connection:
        hold(connection, job_id, worker_id)
        return _done(connection, app, run_id, chunk, facets)


def _done(connection: sa.Connection, app: procrastinate.App, run_id: str, chunk: int,
          facets: dict[str, str] | None) -> bool:
    r, c = schema.runs.c, schema.run_chunks.c
    connection.execute(sa.select(r.run_id).where(r.run_id == run_id).with_for_update())
    connection.execute(schema.run_chunks.update()
                       .where(c.run_id == run_id, c.chunk == chunk, c.state == "todo")
                       .values(state="done",
                               facets=None if facets is None else json.dumps(facets,
                                                                             sort_keys=True)))
    return seal_when_done(connection, app, run_id)


def seal_when_done(connection: sa.Connection, app: procrastinate.App, run_id: str) -> bool:
    """Enqueue the run's seal if none of its chunks is left to run; whether none is."""
    c = schema.run_chunks.c
    left = connection.scalar(sa.select(sa.func.count()).select_from(schema.run_chunks)
                             .where(c.run_id == run_id, c.state == "todo"))
    if left:
        return False
    defer(app, connection, SEAL_TASK, [{"run_id": run_id}], lock=f"run:{run_id}",
          queueing_lock=f"seal:{run_id}")
    return True


class FencedSink:
    """A recorder's sink in a worker: each batch a fenced transaction, on a writer thread.

    ``write`` hands the batch to ``pool`` (one thread, shared by the worker's
    chunks) and returns, as the writer process does for ``assay run``; a
    failure (``Fenced`` among them) is raised by the next call and by
    ``close``, which waits for every batch.
    """

    def __init__(self, store: Store, pool: ThreadPoolExecutor, job_id: int,
                 worker_id: int | None) -> None:
        self.store = store
        self.pool = pool
        self.job_id = job_id
        self.worker_id = worker_id
        self._pending: list[Future[int]] = []

    def register(self, row: dict[str, Any], content: bytes) -> Holder | None:
        """A worker never registers a run: the submitter did."""
        raise RuntimeError("a worker records the trials of a run registered already")

    def write(self, run_id: str, records: list[TrialRecord]) -> None:
        """Hand one batch to the writer thread."""
        self._raise_failed()
        self._pending.append(self.pool.submit(write_owned, self.store, self.job_id,
                                              self.worker_id, run_id, records))

    def seal(self, run_id: str, columns: dict[str, Any], content: bytes,
             queue: Sequence[dict[str, Any]] = ()) -> tuple[int, str]:
        """A worker's chunk never seals: the seal is a job of its own (``sealing``)."""
        raise RuntimeError("a chunk does not seal its run: the seal is a job of its own")

    def close(self) -> None:
        """Wait for every batch handed over; raise the first failure."""
        pending, self._pending = self._pending, []
        failure: BaseException | None = None
        for future in pending:
            error = future.exception()
            if error is not None and failure is None:
                failure = error
        if failure is not None:
            raise failure

    def _raise_failed(self) -> None:
        kept = []
        for future in self._pending:
            if future.done():
                error = future.exception()
                if error is not None:
                    raise error
            else:
                kept.append(future)
        self._pending = kept

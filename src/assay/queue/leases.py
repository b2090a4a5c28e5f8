"""Leases: the jobs of a worker that stopped are taken back and run elsewhere, once.

A worker sends a heartbeat every lease/5 seconds. Every worker also sweeps:
a job still ``doing`` under a worker whose heartbeat is older than the
lease (dead, cut off, paused) is taken back in one transaction
(docs/decisions/0048-queue.md):

- a chunk is *split*: its job is failed, the chunk marked ``split``, and each
  of its trials not recorded yet becomes a chunk of its own, one stall more,
  so the rest run in parallel and a trial that kills its worker is isolated;
- a single trial that has now stopped three workers is not run a fourth
  time: it is recorded ``broken`` with the reason, and the run goes on. From
  its second stall on, a worker runs such a trial alone among trials that
  stalled as often (``work``), so a trial that merely shared a worker with
  the one that kills it is not blamed for it; nor is a chunk the stopped worker
  held but had not begun (``run_chunks.started``);
- any other job (a seal) is put back to ``todo`` as it is.

The job row is locked first and the work done only if it is still
``doing``: two sweepers never take the same job back twice, and the fenced
writes of a worker that wakes up afterwards find the job gone (``fence``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..store import schema
from .app import CHUNK_TASK
from .chunks import count, decode, singles
from .enqueue import add_chunks
from .fence import seal_when_done, stored_trials

if TYPE_CHECKING:
    import procrastinate

    from ..store.database import Store

#: Workers a single trial may stop (lose their lease while running it) before it is broken.
STALLS_TO_BREAK = 3
#: Stalls after which a chunk runs alone among such chunks in its worker (``work``).
ISOLATE_AT = 2
#: Times a whole adaptive case may stall before its next trial is recorded broken.
CASE_STALLS_TO_BREAK = 3

BROKEN = ("the worker running this trial stopped {stalls} times before it finished (its lease "
          "ran out each time): the trial may crash or hang whatever runs it, so it was not run "
          "again")

_JOB = sa.text("SELECT status, task_name, args FROM procrastinate_jobs WHERE id = :job "
               "FOR UPDATE")


def take_back(store: Store, deferrer: procrastinate.App, job_id: int) -> str | None:
    """Take back one stalled job (see the module doc); what was done, or None if not stalled."""
    with store.engine.begin() as connection:
        row = connection.execute(_JOB, {"job": job_id}).first()
        if row is None or row.status != "doing":
            return None  # finished meanwhile, or another sweeper took it back first
        if row.task_name != CHUNK_TASK:
            connection.execute(sa.text(
                "SELECT procrastinate_retry_job_v2(:job, now(), NULL, NULL, NULL)"),
                {"job": job_id})
            return "retried"
        connection.execute(sa.text(
            "SELECT procrastinate_finish_job_v1(:job, 'failed', false)"), {"job": job_id})
        args = row.args if isinstance(row.args, dict) else json.loads(row.args)
        return _split(connection, deferrer, str(args["run_id"]), int(args["chunk"]))


def _split(connection: sa.Connection, deferrer: procrastinate.App, run_id: str,
           number: int) -> str:
    from ..store.runs.record import write_trials
    from ..store.runs.trials import UNREPORTED_USAGE, TrialRecord

    c = schema.run_chunks.c
    # The run's row first, as a chunk's completion takes it (fence._done): one order.
    connection.execute(sa.select(schema.runs.c.run_id).where(schema.runs.c.run_id == run_id)
                       .with_for_update())
    row = connection.execute(sa.select(c["items"], c.state, c.stalls, c.started).where(
        c.run_id == run_id, c.chunk == number).with_for_update()).first()
    if row is None or row.state != "todo":
        return "finished"  # it was marked done just before its worker stopped
    chunk = decode(row.items)
    # A chunk still waiting its turn in the stopped worker took no part in the stop.
    stalls = int(row.stalls) + (1 if row.started else 0)
    pieces = singles(chunk.only, sorted(stored_trials(connection, run_id, list(chunk.only))))
    broken: list[TrialRecord] = []
    if len(pieces) == 1 and count(chunk.only) == 1:
        ((case_id, numbers),) = pieces[0]
        if numbers is not None and stalls >= STALLS_TO_BREAK:
            broken.append(TrialRecord(case_id, chunk.split(case_id), numbers[0], "broken",
                                      BROKEN.format(stalls=stalls), 0.0, UNREPORTED_USAGE,
                                      (), None))
            pieces = []
        elif numbers is None and stalls >= CASE_STALLS_TO_BREAK:
            have = [n for case, n in stored_trials(connection, run_id, [case_id])
                    if case == case_id]
            broken.append(TrialRecord(case_id, chunk.split(case_id), max(have, default=0) + 1,
                                      "broken", BROKEN.format(stalls=stalls), 0.0,
                                      UNREPORTED_USAGE, (), None))
            stalls = 0  # the case goes on from its next trial
    if broken:
        write_trials(connection, run_id, broken, ledger=True)
    connection.execute(schema.run_chunks.update()
                       .where(c.run_id == run_id, c.chunk == number).values(state="split"))
    first = int(connection.scalar(sa.select(sa.func.max(c.chunk)).where(c.run_id == run_id))
                or 0) + 1
    add_chunks(connection, deferrer, run_id, pieces, chunk.hidden, first=first, stalls=stalls)
    if not pieces:
        seal_when_done(connection, deferrer, run_id)
    return f"split into {len(pieces)}" + (f", {len(broken)} broken" if broken else "")


async def sweep(app: procrastinate.App, store: Store, deferrer: procrastinate.App,
                lease_s: float) -> list[str]:
    """Take back every job of the queue whose worker's heartbeat is older than ``lease_s``."""
    import asyncio

    from .app import QUEUE

    stalled = await app.job_manager.get_stalled_jobs(queue=QUEUE,
                                                     seconds_since_heartbeat=lease_s)
    done = []
    for job in stalled:
        assert job.id is not None
        said = await asyncio.to_thread(take_back, store, deferrer, job.id)
        if said is not None:
            done.append(f"job {job.id} ({job.task_name}): {said}")
    return done


_UNSEALED = sa.text("""
SELECT r.run_id FROM runs r
 WHERE r.status = 'open'
   AND EXISTS (SELECT 1 FROM run_chunks c WHERE c.run_id = r.run_id)
   AND NOT EXISTS (SELECT 1 FROM run_chunks c WHERE c.run_id = r.run_id AND c.state = 'todo')
   AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j
                    WHERE j.task_name = 'assay.seal' AND j.args->>'run_id' = r.run_id
                      AND j.status IN ('todo', 'doing'))
""")


def reseal(store: Store, deferrer: procrastinate.App) -> list[str]:
    """Enqueue the seal of every queued run whose chunks are all done but that has none waiting.

    Its last chunk enqueues it; this catches a seal job that failed on every
    try (a database that was away), so that such a run does not stay open.
    """
    with store.engine.begin() as connection:
        runs = [str(run_id) for run_id in connection.execute(_UNSEALED).scalars()]
        for run_id in runs:
            seal_when_done(connection, deferrer, run_id)
    return runs

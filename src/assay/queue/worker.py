"""``assay worker``: a process that runs queued batteries' chunks until it is stopped.

It opens the store (and the queue's tables), then runs procrastinate's
worker on assay's queue with the worker's ``Work`` in every job's context,
and beside it the lease sweeper (``leases``), which also re-enqueues a seal
that went missing and closes targets no run has used for a while. Ctrl-C
or SIGTERM stops claiming and lets the chunks in hand finish; ``kill -9``
loses nothing either: the sweeper of another worker takes them back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

#: How long a worker may go without a heartbeat before its jobs are taken back.
DEFAULT_LEASE_S = 15.0


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs."""

    url: str
    #: Trials in flight in this process at once, across all its chunks.
    concurrency: int = 8
    #: Chunks held at once (default: enough to keep ``concurrency`` trials busy).
    jobs: int | None = None
    lease_s: float = DEFAULT_LEASE_S
    name: str | None = None
    #: Stop once the queue is empty (tests, a one-off drain) instead of waiting for work.
    drain: bool = False
    #: How often schedules are looked at (cron, seconds as a sixth field).
    tick: str = "* * * * *"


def jobs_for(concurrency: int, jobs: int | None) -> int:
    """Chunks a worker holds: two chunks' worth of trials for its slots, at least two.

    Few enough that the chunks of a battery spread across workers; enough
    that a worker's slots do not wait for its next claim.
    """
    if jobs is not None:
        return jobs
    from .chunks import DEFAULT_CHUNK

    return max(2, math.ceil(2 * concurrency / DEFAULT_CHUNK))


def run_worker(options: WorkerOptions, say: Callable[[str], None]) -> None:
    """Run until stopped (or, with ``drain``, until the queue is empty)."""
    asyncio.run(_serve(options, say))


async def _serve(options: WorkerOptions, say: Callable[[str], None]) -> None:
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key
    from .app import QUEUE, ensure_schema
    from .tasks import make_app
    from .work import Work

    _one_line_logs(say)

    def unretrieved(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        # procrastinate's own bookkeeping of a job taken back meanwhile fails this way
        # (its job is not ``doing`` any more): one line, not a traceback.
        error = context.get("exception")
        said = type(error).__name__ if error is not None else "no exception"
        say(f"assay worker: {context.get('message', 'a task failed')} ({said})")

    asyncio.get_running_loop().set_exception_handler(unretrieved)
    key = signing_key(options.url)
    store = await asyncio.to_thread(open_store, options.url)
    try:
        await asyncio.to_thread(ensure_schema, store)
        app, deferrer = make_app(options.url, tick=options.tick), make_app(options.url)
        from .app import conninfo
        from .permits import Permits

        work = Work(store, deferrer, key, options.concurrency, url=options.url, say=say,
                    permits=Permits(conninfo(options.url)))
        name = options.name or f"{socket.gethostname()}:{os.getpid()}"
        jobs = jobs_for(options.concurrency, options.jobs)
        say(f"assay worker {name}: waiting for work on the queue ({options.concurrency} trials "
            f"at once, {jobs} chunks held, lease {options.lease_s:g} s); Ctrl-C stops it once "
            "the chunks in hand are done")
        async with app.open_async():
            sweeper = asyncio.create_task(_sweep(app, work, deferrer, options.lease_s, say))
            try:
                await app.run_worker_async(
                    queues=[QUEUE], concurrency=jobs, name=name, wait=not options.drain,
                    additional_context={"assay": work},
                    update_heartbeat_interval=options.lease_s / 5,
                    stalled_worker_timeout=options.lease_s,
                    # No shutdown_graceful_timeout: a stop waits for the chunks in hand.
                    fetch_job_polling_interval=min(1.0, options.lease_s))
            finally:
                sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeper
                await work.close()
        say(f"assay worker {name}: stopped after {work.chunks} chunk(s), "
            f"{work.trials} trial(s)")
    finally:
        store.close()


class _OneLine(logging.Handler):
    """procrastinate's warnings and errors as one line each: no traceback in a worker's log.

    An exception is named by its type only (the job's own line, said by
    ``Work``, has the reason): its text is not ours to repeat.
    """

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        said = f" ({type(error).__name__})" if error is not None else ""
        try:
            self.say(f"assay worker: {record.getMessage()}{said}")
        except Exception:  # noqa: BLE001 - a log line must never stop the worker
            self.handleError(record)


def _one_line_logs(say: Callable[[str], None]) -> None:
    logger = logging.getLogger("procrastinate")
    logger.setLevel(logging.WARNING)
    logger.addHandler(_OneLine(say))
    logger.propagate = False


async def _sweep(app: object, work: object, deferrer: object, lease_s: float,
                 say: Callable[[str], None]) -> None:
    """Every lease/5 seconds: take back stalled jobs, re-enqueue missing seals, tidy."""
    from .leases import reseal, sweep
    from .work import Work

    assert isinstance(work, Work)
    while True:
        await asyncio.sleep(lease_s / 5)
        try:
            for line in await sweep(app, work.store, deferrer, lease_s):  # type: ignore[arg-type]
                say(f"assay worker: took back {line}")
            await asyncio.to_thread(reseal, work.store, deferrer)  # type: ignore[arg-type]
            await work.tidy()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a database that blinked: the next sweep tries again
            say(f"assay worker: the lease sweep failed ({type(error).__name__}); trying again")

"""assay's jobs as procrastinate tasks: plain functions that hand over to the worker's ``Work``.

A task reads the worker's state from the job's context (``additional_context``),
so that the app can be made anywhere (a submitter only enqueues) and the
functions stay free of globals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .app import CHUNK_TASK, QUEUE, SEAL_TASK, TICK_CRON, TICK_TASK, WINDOW_TASK, bare_app

if TYPE_CHECKING:
    import procrastinate


class Work(Protocol):
    """What the tasks hand their jobs to: the worker's state (``work.Work``)."""

    async def chunk(self, job_id: int, worker_id: int | None, run_id: str, number: int) -> None:
        """Run one chunk of a queued run."""

    async def seal(self, run_id: str) -> object:
        """Fold and seal a queued run whose chunks are done."""

    async def window(self, schedule_id: int, start: str) -> None:
        """Register and enqueue one schedule's window battery."""

    async def tick(self, timestamp: int) -> None:
        """Enqueue a window job for each schedule due."""

#: A job whose function raised is tried again, this many times in all, a second apart:
#: a database that blinked, a target that would not start once. A chunk that stopped
#: its worker is the lease sweeper's (``leases``), not this.
ATTEMPTS = 4


def make_app(url: str, *, tick: str = TICK_CRON) -> procrastinate.App:
    """The procrastinate app on the store at ``url``, with assay's tasks registered
    (a job is deferred by its task's name, so even a submitter needs them)."""
    app = bare_app(url)
    register(app, tick)
    return app


def register(app: procrastinate.App, tick: str) -> None:
    """Register the chunk, seal, window and tick tasks on ``app`` (the tick every ``tick``)."""
    import procrastinate

    retry = procrastinate.RetryStrategy(max_attempts=ATTEMPTS, wait=1)
    app.task(name=CHUNK_TASK, queue=QUEUE, pass_context=True, retry=retry)(run_chunk)
    app.task(name=SEAL_TASK, queue=QUEUE, pass_context=True, retry=retry)(seal_run)
    app.task(name=WINDOW_TASK, queue=QUEUE, pass_context=True, retry=retry)(start_window)
    app.periodic(cron=tick, periodic_id=TICK_TASK)(
        app.task(name=TICK_TASK, queue=QUEUE, pass_context=True)(look_for_windows))


def _work(context: Any) -> Work:
    work: Work = context.additional_context["assay"]
    return work


async def run_chunk(context: Any, run_id: str, chunk: int) -> None:
    """``assay.chunk``: run one chunk of a queued run (``Work.chunk``)."""
    job = context.job
    await _work(context).chunk(job.id, job.worker_id, run_id, chunk)


async def seal_run(context: Any, run_id: str) -> None:
    """``assay.seal``: fold and seal a queued run whose chunks are done (``Work.seal``)."""
    await _work(context).seal(run_id)


async def start_window(context: Any, schedule_id: int, start: str) -> None:
    """``assay.window``: the battery of one schedule's window (``Work.window``)."""
    await _work(context).window(schedule_id, start)


async def look_for_windows(context: Any, timestamp: int) -> None:
    """``assay.tick`` (periodic): enqueue a window job for each schedule due now."""
    await _work(context).tick(timestamp)

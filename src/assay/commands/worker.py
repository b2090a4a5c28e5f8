"""`assay worker`: run queued batteries' trials (SPEC §12)."""

from __future__ import annotations

import click

from ..errors import AssayError
from .common import DB_OPTION, fail


@click.command()
@DB_OPTION
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="Run at most N trials at once in this worker, across the chunks it holds.")
@click.option("--name", metavar="NAME",
              help="This worker's name in its output and in the queue (default: HOST:PID).")
@click.option("--drain", is_flag=True,
              help="Stop once the queue has nothing left to run, instead of waiting for more.")
@click.option("--lease", "lease_s", type=click.FloatRange(min=0.5), hidden=True,
              help="Seconds without a heartbeat before a worker's chunks are taken back "
                   "(default 15).")
@click.option("--jobs", type=click.IntRange(min=1), hidden=True,
              help="Chunks held at once (default: enough for --concurrency).")
@click.option("--tick", default="* * * * *", hidden=True,
              help="How often schedules are looked at: a cron line (a sixth field counts "
                   "seconds).")
def worker(db: str | None, concurrency: int, name: str | None, drain: bool,
           lease_s: float | None, jobs: int | None, tick: str) -> None:
    """Run the trials of runs queued with `assay run --executor queue`.

    Claims chunks of trials from the job queue in the store's PostgreSQL
    (--db postgresql+psycopg://…), runs them against the run's agent (which
    must be the version the run registered, with its suite at the same
    paths), and records each trial once. Start as many as you like, on any
    machine that reaches the database. Ctrl-C or SIGTERM stops claiming and
    finishes the chunks in hand; a worker killed outright loses nothing: the
    others take its chunks back after the lease (15 s).
    """
    from ..queue.app import needs_postgres
    from ..queue.worker import DEFAULT_LEASE_S, WorkerOptions, run_worker

    try:
        url = needs_postgres(db, "assay worker")
        run_worker(WorkerOptions(url=url, concurrency=concurrency, jobs=jobs,
                                 lease_s=lease_s or DEFAULT_LEASE_S, name=name, drain=drain,
                                 tick=tick),
                   lambda line: click.echo(line, err=True))
    except AssayError as error:
        fail(error)

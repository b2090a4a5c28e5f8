"""A queued run registered with its chunks and their jobs, in one transaction.

What ``assay run --executor queue`` writes: the run's row and its
``run-registered`` entry (as any run), a ``run_chunks`` row per chunk, and a
job per chunk in procrastinate's table. Workers can see the jobs only once
the run is registered, and a registration that fails (a window whose battery
exists already) leaves no job behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..store import schema
from .app import CHUNK_TASK, SEAL_TASK, defer
from .chunks import Items, encode

if TYPE_CHECKING:
    import procrastinate
    import sqlalchemy as sa

    from ..store.database import Store
    from ..store.runs.trials import Holder


def enqueue_run(store: Store, app: procrastinate.App, row: dict[str, Any], content: bytes,
                chunks: list[Items], hidden: frozenset[str]) -> Holder | None:
    """Register the run (``row``, ``content``) and enqueue ``chunks``; the window's holder if taken.

    ``hidden``: the suite's hidden case ids (their chunks' entries are marked).
    """
    from ..store.runs.record import register_run

    run_id = row["run_id"]

    def also(connection: sa.Connection) -> None:
        add_chunks(connection, app, run_id, chunks, hidden, first=0, stalls=0)
        if not chunks:  # nothing to run (every case filtered out): sealed as it is
            defer(app, connection, SEAL_TASK, [{"run_id": run_id}], lock=f"run:{run_id}",
                  queueing_lock=f"seal:{run_id}")

    return register_run(store, row, content, also=also)


def add_chunks(connection: sa.Connection, app: procrastinate.App, run_id: str,
               chunks: list[Items], hidden: Iterable[str], *, first: int, stalls: int) -> None:
    """Write ``chunks`` as ``run_chunks`` rows numbered from ``first``, each with its job."""
    if not chunks:
        return
    numbers = list(range(first, first + len(chunks)))
    secret = frozenset(hidden)
    jobs = defer(app, connection, CHUNK_TASK,
                 [{"run_id": run_id, "chunk": number} for number in numbers])
    connection.execute(schema.run_chunks.insert(), [
        {"run_id": run_id, "chunk": number, "items": encode(items, secret), "state": "todo",
         "stalls": stalls, "job_id": job, "facets": None}
        for number, items, job in zip(numbers, chunks, jobs, strict=True)])

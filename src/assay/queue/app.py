"""The queue on the store's own PostgreSQL: procrastinate's app, its tasks, its schema.

assay's queue needs nothing beyond the database the store already uses
(docs/decisions/0048-queue.md). procrastinate keeps its jobs in tables of
its own; ``ensure_schema`` puts them there once, after the store is open and
at its head revision, and refuses a database whose queue tables another
procrastinate version made. Its tables stay out of the store's schema and
out of Alembic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import UsageError

if TYPE_CHECKING:
    import procrastinate

    from ..store.database import Store

#: The advisory lock under which the queue's schema is applied (one process at a time).
QUEUE_SCHEMA_KEY = 0x61737361792D7175
#: The task that runs one chunk of a queued battery, and the one that seals it.
CHUNK_TASK = "assay.chunk"
SEAL_TASK = "assay.seal"
#: The periodic tick that looks for schedules due, and the job that starts one window.
TICK_TASK = "assay.tick"
WINDOW_TASK = "assay.window"
#: How often the tick runs (cron; procrastinate defers it once per period, whatever
#: the number of workers).
TICK_CRON = "* * * * *"
#: The queue assay's jobs go to.
QUEUE = "assay"


def needs_postgres(url: str | None, what: str) -> str:
    """``url`` if it names a PostgreSQL store; else a ``UsageError`` saying ``what`` needs one."""
    backend = ""
    if url:
        try:
            backend = sa.engine.make_url(url).get_backend_name()
        except sa.exc.ArgumentError:
            backend = ""
    if backend != "postgresql":
        raise UsageError(f"{what} needs the store on PostgreSQL (--db postgresql+psycopg://…): "
                         "the queue is that database's (SQLite has no job queue)")
    assert url is not None
    return url


def conninfo(url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL (its password included)."""
    parsed = sa.engine.make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def import_procrastinate() -> Any:
    """procrastinate, or a ``UsageError`` naming the extra that brings it."""
    try:
        import procrastinate
    except ImportError:
        from ..install_hints import extra

        raise UsageError(f"the job queue: {extra('queue', 'procrastinate')}") from None
    return procrastinate


def bare_app(url: str) -> procrastinate.App:
    """The procrastinate app on the store at ``url``, no task registered yet
    (``tasks.make_app`` registers assay's).

    The connector opens a pool only when the app is opened (a worker); a
    submitter defers its jobs on its own transaction's connection and opens
    nothing here.
    """
    lib = import_procrastinate()
    app: procrastinate.App = lib.App(connector=lib.PsycopgConnector(conninfo=conninfo(url)))
    return app


def ensure_schema(store: Store) -> None:
    """Apply procrastinate's schema to the store's database once; check it on later calls.

    Under an advisory lock, so that processes starting together apply it
    once. Called after ``open_store`` (the store first: on an empty database
    it is then created at head rather than replayed revision by revision).
    A queue made by another procrastinate version is refused, naming both.
    """
    procrastinate = import_procrastinate()
    mark = f"procrastinate schema {schema_version(procrastinate)}"
    with store.engine.begin() as connection:
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(QUEUE_SCHEMA_KEY)))
        present = connection.scalar(sa.text("SELECT to_regclass('procrastinate_jobs')"))
        if present is None:
            sql = procrastinate.schema.SchemaManager.get_schema()
            raw = connection.connection.driver_connection
            assert raw is not None
            with raw.cursor() as cursor:
                cursor.execute(sql)
                cursor.execute(f"COMMENT ON TABLE procrastinate_jobs IS '{mark}'")
            return
        recorded = connection.scalar(sa.text(
            "SELECT obj_description('procrastinate_jobs'::regclass, 'pg_class')"))
    if recorded != mark:
        made = recorded if recorded else "another tool (no version mark of assay's)"
        raise UsageError(f"this database's job queue was made with {made}; this assay's is "
                         f"{mark}: use the assay that made it, or bring the queue's tables "
                         "to this version with procrastinate's migrations")


def schema_version(procrastinate: Any) -> str:
    """The newest of procrastinate's schema migrations: what its schema is at.

    Releases that change no table keep it, so upgrading procrastinate within
    the extra's range leaves a queue made before usable.
    """
    from pathlib import Path

    folder = Path(procrastinate.schema.SchemaManager.get_migrations_path())
    names = sorted(p.stem for p in folder.glob("*.sql"))
    return names[-1].partition("_")[0] if names else procrastinate.__version__


def defer(app: procrastinate.App, connection: sa.Connection, task: str,
          arguments: list[dict[str, Any]], *, lock: str | None = None,
          queueing_lock: str | None = None) -> list[int]:
    """Enqueue jobs of ``task`` inside the caller's transaction; their ids.

    The jobs exist once that transaction commits, and not at all if it rolls
    back: a run is registered with its jobs or not at all. A job whose
    ``queueing_lock`` is waiting already is not enqueued again (none is
    returned for it); the savepoint keeps the refused insert from spoiling
    the caller's transaction.
    """
    procrastinate = import_procrastinate()
    raw = connection.connection.driver_connection
    assert raw is not None
    deferrer = app.tasks[task].configure(connection=raw, lock=lock, queueing_lock=queueing_lock)
    if queueing_lock is None:
        return list(deferrer.batch_defer(*arguments))
    try:
        with raw.transaction():
            return list(deferrer.batch_defer(*arguments))
    except procrastinate.exceptions.AlreadyEnqueued:
        return []

"""Content by digest: insert what is not stored yet, one copy per digest."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import schema
from .bulk import insert_rows


def put_blobs(connection: Connection, blobs: dict[str, bytes]) -> None:
    """Insert the blobs not stored yet: one digest, one copy, whoever wrote it first."""
    if not blobs:
        return
    rows = [{"digest": d, "content": c} for d, c in blobs.items()]
    dialect = connection.dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        insert_rows(connection, sqlite_insert(schema.blobs).on_conflict_do_nothing(), rows)
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        insert_rows(connection, pg_insert(schema.blobs).on_conflict_do_nothing(), rows)
    else:
        known = known_digests(connection, list(blobs))
        missing = [row for row in rows if row["digest"] not in known]
        if missing:
            connection.execute(schema.blobs.insert(), missing)


def known_digests(connection: Connection, digests: list[str]) -> set[str]:
    """Which of ``digests`` are stored (erased ones included)."""
    known: set[str] = set()
    for start in range(0, len(digests), 500):
        chunk = digests[start:start + 500]
        query = sa.select(schema.blobs.c.digest).where(schema.blobs.c.digest.in_(chunk))
        known.update(connection.scalars(query))
    return known

"""A run's large documents kept in parts: written from a file, read back joined.

A battery of a hundred thousand cases hands the store a 67 MB report and a
30 MB suite. One ``runs.report`` value would have the store's process hold
the whole text (and the database driver a copy of it) to write it; instead
the text is read from the file the battery wrote (``records.SpilledBody``)
a mebibyte at a time, each piece a row of ``run_texts``, and ``runs.report``
(or ``runs.suite``) stays NULL. Every reader goes through ``read_text``,
which gives the column's value, or the parts joined, or None.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .. import schema
from .trials import SpilledBody

#: Characters of text per row.
PART_CHARS = 1 << 20

KINDS = ("report", "suite")


def write_parts(connection: Connection, run_id: str, kind: str,
                text: SpilledBody | str) -> None:
    """Keep ``text`` (a spilled file, or a string) as the run's ``kind``, replacing any parts."""
    table = schema.run_texts
    c = table.c
    connection.execute(table.delete().where(c.run_id == run_id, c.kind == kind))
    if isinstance(text, str):
        pieces = (text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS))
        for part, piece in enumerate(pieces):
            connection.execute(table.insert(), {"run_id": run_id, "kind": kind, "part": part,
                                                "body": piece})
        return
    with open(text.path, encoding="utf-8", newline="") as source:
        part = 0
        while piece := source.read(PART_CHARS):
            connection.execute(table.insert(), {"run_id": run_id, "kind": kind, "part": part,
                                                "body": piece})
            part += 1


def read_text(connection: Connection, run_id: str, kind: str,
              inline: str | None) -> str | None:
    """The run's ``kind`` text: ``inline`` (its ``runs`` column) if set, else its parts joined."""
    if inline is not None:
        return inline
    c = schema.run_texts.c
    parts = connection.execute(sa.select(c.body).where(c.run_id == run_id, c.kind == kind)
                               .order_by(c.part)).scalars().all()
    return "".join(parts) if parts else None


def read_pieces(connection: Connection, run_id: str, kind: str,
                inline: str | None) -> Iterator[str]:
    """The run's ``kind`` text a part at a time (``inline`` whole, if set); nothing if none."""
    if inline is not None:
        yield inline
        return
    c = schema.run_texts.c
    yield from connection.execute(
        sa.select(c.body).where(c.run_id == run_id, c.kind == kind).order_by(c.part)
        .execution_options(stream_results=True)).scalars()


def in_parts() -> sa.Select[tuple[str]]:
    """The runs that keep a document in parts (a text search must read them joined)."""
    return sa.select(schema.run_texts.c.run_id).distinct()

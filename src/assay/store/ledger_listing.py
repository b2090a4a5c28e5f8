"""The ledger as a page lists it: entries newest first, a page at a time, and the newest head.

Entries are read by index range (``index`` is the primary key and gap-free
from 0), so page 2,000 of a ledger of 100,000 entries costs what page 1
does. An entry is listed with what it seals when the store says so cheaply:
the run a ``run-sealed`` entry sealed (``runs.seal_entry``) and the queue
item a ``review`` entry decided (``review_items.entry``). Nothing here reads
an entry's content, so nothing here can hold a hidden case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from . import schema

if TYPE_CHECKING:
    from .database import Store


@dataclass(frozen=True)
class ListedEntry:
    """One ledger entry as a list shows it."""

    index: int
    kind: str
    created_at: str
    content_digest: str
    hash: str
    #: The run this ``run-sealed`` entry sealed, the item this ``review`` entry decided.
    run_id: str | None = None
    review_item: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The entry as the JSON twin gives it."""
        return {"index": self.index, "kind": self.kind, "created_at": self.created_at,
                "content_digest": self.content_digest, "hash": self.hash,
                "run_id": self.run_id, "review_item": self.review_item}


@dataclass(frozen=True)
class NewestHead:
    """The newest stored tree head, as stored (``StoredHead.parsed`` says if it is well formed)."""

    size: int
    root: str
    signature: str
    public_key: str
    created_at: str


def ledger_size(store: Store) -> int:
    """How many entries the ledger has (its highest index + 1)."""
    c = schema.ledger.c
    with store.engine.connect() as connection:
        top = connection.scalar(sa.select(sa.func.max(c.index)))
    return 0 if top is None else int(top) + 1


def entries_page(store: Store, size: int, *, limit: int, offset: int = 0) -> list[ListedEntry]:
    """Entries newest first: ``limit`` of them, skipping the newest ``offset`` of ``size``."""
    c = schema.ledger.c
    high = size - offset
    low = max(0, high - limit)
    if high <= 0:
        return []
    r, q = schema.runs.c, schema.review_items.c
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(c.index, c.kind, c.created_at, c.content_digest, c.hash)
            .where(c.index >= low, c.index < high).order_by(c.index.desc())).all()
        indexes = [int(row[0]) for row in rows]
        runs = {int(row[0]): str(row[1]) for row in connection.execute(
            sa.select(r.seal_entry, r.run_id).where(r.seal_entry.in_(indexes)))}
        items = {int(row[0]): int(row[1]) for row in connection.execute(
            sa.select(q.entry, q.id).where(q.entry.in_(indexes)))}
    return [ListedEntry(int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]),
                        runs.get(int(row[0])), items.get(int(row[0]))) for row in rows]


def newest_head(store: Store) -> NewestHead | None:
    """The stored head over the most entries, if any."""
    h = schema.ledger_heads.c
    with store.engine.connect() as connection:
        row = connection.execute(
            sa.select(h.size, h.root, h.signature, h.public_key, h.created_at)
            .order_by(h.size.desc()).limit(1)).first()
    return None if row is None else NewestHead(int(row[0]), str(row[1]), str(row[2]),
                                               str(row[3]), str(row[4]))

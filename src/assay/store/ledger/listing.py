"""The ledger as a page lists it: entries newest first, a page at a time, and the newest head.

Entries are read by index range (``index`` is the primary key and gap-free
from 0), so page 2,000 of a ledger of 100,000 entries costs what page 1
does. An entry is listed with what it sealed, as its own content says: the
run of a ``run-sealed`` entry, the queue item of a ``review`` entry. Only
those two fields are taken from the content and nothing else leaves this
module: a review entry's content also holds the case id, which for a hidden
case is the secret itself. An erased or edited content names nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .. import schema

if TYPE_CHECKING:
    from ..database import Store


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
    b = schema.blobs.c
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(c.index, c.kind, c.created_at, c.content_digest, c.hash)
            .where(c.index >= low, c.index < high).order_by(c.index.desc())).all()
        wanted = sorted({str(row[3]) for row in rows if row[1] in _NAMED})
        contents = {str(found[0]): bytes(found[1]) for found in connection.execute(
            sa.select(b.digest, b.content).where(b.digest.in_(wanted),
                                                 b.content.is_not(None)))} if wanted else {}
    listed = []
    for row in rows:
        named = _named(str(row[1]), contents.get(str(row[3])))
        run_id = named if isinstance(named, str) else None
        item = named if isinstance(named, int) else None
        listed.append(ListedEntry(int(row[0]), str(row[1]), str(row[2]), str(row[3]),
                                  str(row[4]), run_id, item))
    return listed


#: The kinds whose content names what the entry sealed, and the field that does.
_NAMED = {"run-sealed": "run_id", "review": "item"}


def _named(kind: str, content: bytes | None) -> str | int | None:
    """The run id a run-sealed entry's content names, the item a review entry's names."""
    if content is None or kind not in _NAMED:
        return None
    try:
        value = json.loads(content).get(_NAMED[kind])
    except (ValueError, AttributeError):
        return None  # edited into something else: verification says so, the list names nothing
    if kind == "review":
        return value if type(value) is int else None
    return value if isinstance(value, str) else None


def newest_head(store: Store) -> NewestHead | None:
    """The stored head over the most entries, if any."""
    h = schema.ledger_heads.c
    with store.engine.connect() as connection:
        row = connection.execute(
            sa.select(h.size, h.root, h.signature, h.public_key, h.created_at)
            .order_by(h.size.desc()).limit(1)).first()
    return None if row is None else NewestHead(int(row[0]), str(row[1]), str(row[2]),
                                               str(row[3]), str(row[4]))

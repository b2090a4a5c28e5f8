"""The annotation queue's rows (``schema.review_items``): queue, list, read and decide.

Each function is one transaction. What to queue and how an item is shown
are ``review.queue``'s to say; this module only keeps them. A decision is
taken once: the row is updated only while it has no verdict, in the
transaction that appends its ``review`` entry, so two people deciding the
same item at once leave one decision and one entry, and the other is told.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...canonical import canonical, digest_bytes
from .. import schema
from ..blobs import put_blobs
from ..ledger.entries import append_bodies, utc_stamp

if TYPE_CHECKING:
    from ..database import Store


class NoSuchItem(LookupError):
    """No queue item has this number."""


class AlreadyDecided(Exception):
    """The item has its decision already (``row``: the stored item, as it was decided)."""

    def __init__(self, row: StoredItem) -> None:
        super().__init__(f"item {row.id} was decided already")
        self.row = row


@dataclass(frozen=True)
class StoredItem:
    """One ``review_items`` row; ``note`` is the note's text (None: none, or erased)."""

    id: int
    source: str
    run_id: str | None
    suite_id: str | None
    case_id: str | None
    split: str
    n: int | None
    label: str
    outcome: str | None
    reason: str | None
    trace_digest: str | None
    added_at: str
    verdict: str | None
    note: str | None
    reviewer: str | None
    decided_at: str | None
    entry: int | None


_COLUMNS = ("source", "run_id", "suite_id", "case_id", "split", "n", "label", "outcome",
            "reason", "trace_digest", "added_at")


def queue_items(connection: Connection, items: Sequence[dict[str, Any]]) -> int:
    """Insert ``items`` (``_COLUMNS`` each) in ``connection``'s transaction; how many were new.

    A trial already queued (same run, case and trial) is left as it is: a
    resumed or re-sealed run does not queue it twice.
    """
    rows = [{name: item.get(name) for name in _COLUMNS} for item in items]
    if not rows:
        return 0
    c = schema.review_items.c
    keys = {(row["run_id"], row["case_id"], row["n"]) for row in rows if row["run_id"]}
    held: set[tuple[Any, Any, Any]] = set()
    for run_id in {key[0] for key in keys}:
        held.update(tuple(r) for r in connection.execute(
            sa.select(c.run_id, c.case_id, c.n).where(c.run_id == run_id)))
    fresh = [row for row in rows
             if not row["run_id"] or (row["run_id"], row["case_id"], row["n"]) not in held]
    if fresh:
        connection.execute(schema.review_items.insert(), fresh)
    return len(fresh)


def queue_run_items(store: Store, items: Sequence[dict[str, Any]]) -> int:
    """Queue trials of a stored run (added by hand); how many were not queued already."""
    with store.writing(str(items[0]["run_id"]) if items else "queue") as connection:
        return queue_items(connection, items)


def add_item(store: Store, item: dict[str, Any], trace: bytes | None = None) -> int:
    """Queue one item (an online sample, a proxied call, one added by hand); its number.

    ``trace``: the call's trace as JSON bytes, kept as a blob under its digest.
    """
    row = {name: item.get(name) for name in _COLUMNS}
    with store.writing(str(item.get("run_id") or "queue")) as connection:
        if trace is not None:
            trace_digest = row["trace_digest"] = digest_bytes(trace)
            put_blobs(connection, {trace_digest: trace})
        inserted = connection.execute(schema.review_items.insert().values(**row))
        key = inserted.inserted_primary_key
        return int(key[0]) if key else 0


def list_items(store: Store, *, decided: bool | None = False,
               limit: int | None = None, offset: int = 0) -> list[StoredItem]:
    """Items oldest first: open ones (``decided=False``), decided ones (True), or all (None).

    ``limit`` and ``offset`` page through a long queue in the database.
    """
    c = schema.review_items.c
    query = _decided(_select(), decided).order_by(c.added_at, c.id)
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    with store.engine.connect() as connection:
        return [_item(row) for row in connection.execute(query)]


def count_items(store: Store, *, decided: bool | None = False) -> int:
    """How many items ``list_items`` would list with no limit."""
    query = _decided(sa.select(sa.func.count()).select_from(schema.review_items), decided)
    with store.engine.connect() as connection:
        return int(connection.scalar(query) or 0)


def next_open(store: Store, after: StoredItem) -> StoredItem | None:
    """The open item that comes after ``after`` in the queue's order, else the oldest open one.

    What a reviewer working down the queue looks at next; None when no item is open.
    """
    c = schema.review_items.c
    later = sa.or_(c.added_at > after.added_at,
                   sa.and_(c.added_at == after.added_at, c.id > after.id))
    with store.engine.connect() as connection:
        for wanted in (sa.and_(later, c.id != after.id), c.id != after.id):
            row = connection.execute(_decided(_select(), False).where(wanted)
                                     .order_by(c.added_at, c.id).limit(1)).first()
            if row is not None:
                return _item(row)
    return None


def _decided(query: Any, decided: bool | None) -> Any:
    c = schema.review_items.c
    if decided is False:
        return query.where(c.verdict.is_(None))
    if decided is True:
        return query.where(c.verdict.is_not(None))
    return query


def load_item(store: Store, item_id: int) -> StoredItem:
    """One item by its number (``NoSuchItem`` if there is none)."""
    with store.engine.connect() as connection:
        row = connection.execute(_select().where(schema.review_items.c.id == item_id)).first()
    if row is None:
        raise NoSuchItem(item_id)
    return _item(row)


def decide(store: Store, item_id: int, verdict: str, note: str, reviewer: str,
           decided_at: str | None = None) -> StoredItem:
    """Take the decision on one item and seal it as a ``review`` entry; the item as decided.

    ``NoSuchItem`` or ``AlreadyDecided`` when it cannot be taken; then
    nothing is written.
    """
    when = decided_at or utc_stamp()
    note_bytes = note.encode("utf-8", "surrogatepass")
    note_digest = digest_bytes(note_bytes) if note else None
    try:
        _decide(store, item_id, verdict, note_digest, note_bytes, reviewer, when)
    except _Raced:  # decided by someone else between the read and the update
        raise AlreadyDecided(load_item(store, item_id)) from None
    return load_item(store, item_id)


def _decide(store: Store, item_id: int, verdict: str, note_digest: str | None,
            note_bytes: bytes, reviewer: str, when: str) -> None:
    c = schema.review_items.c
    with store.writing("queue") as connection:
        row = connection.execute(_select().where(c.id == item_id)).first()
        if row is None:
            raise NoSuchItem(item_id)
        if row.verdict is not None:
            raise AlreadyDecided(_item(row))
        content = {"item": item_id, "source": row.source, "run_id": row.run_id,
                   "case_id": row.case_id, "n": row.n, "verdict": verdict,
                   "reviewer": reviewer, "decided_at": when, "note": note_digest}
        [entry] = append_bodies(connection, [("review", canonical(content))])
        if note_digest is not None:
            put_blobs(connection, {note_digest: note_bytes})
        updated = connection.execute(
            schema.review_items.update().where(c.id == item_id, c.verdict.is_(None))
            .values(verdict=verdict, note_digest=note_digest, reviewer=reviewer,
                    decided_at=when, entry=entry.index))
        if updated.rowcount != 1:  # decided by someone else since the read: roll back
            raise _Raced(item_id)


class _Raced(Exception):
    """The item was decided between ``decide``'s read and its update."""


def _select() -> sa.Select[Any]:
    c, b = schema.review_items.c, schema.blobs.c
    return (sa.select(*(getattr(c, name) for name in ("id", *_COLUMNS)), c.verdict, c.reviewer,
                      c.decided_at, c.entry, b.content.label("note"))
            .select_from(schema.review_items.outerjoin(schema.blobs, b.digest == c.note_digest)))


def _item(row: Any) -> StoredItem:
    note = None if row.note is None else bytes(row.note).decode("utf-8", "surrogatepass")
    return StoredItem(
        id=int(row.id), source=row.source, run_id=row.run_id, suite_id=row.suite_id,
        case_id=row.case_id, split=row.split, n=None if row.n is None else int(row.n),
        label=row.label, outcome=row.outcome, reason=row.reason, trace_digest=row.trace_digest,
        added_at=row.added_at, verdict=row.verdict, note=note, reviewer=row.reviewer,
        decided_at=row.decided_at, entry=None if row.entry is None else int(row.entry))


@dataclass(frozen=True)
class ItemEvidence:
    """What a reviewer looks at: the trace's JSON bytes and the trial's verdicts (as rows)."""

    trace: bytes | None
    verdicts: list[dict[str, Any]]


def item_evidence(store: Store, row: StoredItem) -> ItemEvidence:
    """The trace and verdicts of a queued item: its trial's, or its own sampled trace."""
    t, v, b = schema.trials.c, schema.verdicts.c, schema.blobs.c
    with store.engine.connect() as connection:
        trace_digest = row.trace_digest
        verdicts: list[dict[str, Any]] = []
        if row.source == "run" and row.run_id and row.case_id is not None and row.n is not None:
            found = connection.execute(sa.select(t.trace_digest).where(
                t.run_id == row.run_id, t.case_id == row.case_id, t.n == row.n)).first()
            trace_digest = found.trace_digest if found is not None else None
            verdicts = [dict(r._mapping) for r in connection.execute(
                sa.select(v.position, v.assertion, v.check, v.family, v.outcome, v.evidence,
                          v.note, v.provenance, v.threshold, v.score)
                .where(v.run_id == row.run_id, v.case_id == row.case_id, v.n == row.n)
                .order_by(v.position))]
        trace = None
        if trace_digest is not None:
            got = connection.execute(
                sa.select(b.content).where(b.digest == trace_digest)).first()
            trace = None if got is None or got.content is None else bytes(got.content)
    return ItemEvidence(trace, verdicts)


def hidden_sets(store: Store, run_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """Each run's suite id and ``hidden_set`` digest (``--hidden-dir`` is checked against it)."""
    r = schema.runs.c
    if not run_ids:
        return {}
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(r.run_id, r.suite_id, r.hidden_set)
                                  .where(r.run_id.in_(sorted(set(run_ids)))))
        return {row.run_id: (row.suite_id, row.hidden_set) for row in rows}

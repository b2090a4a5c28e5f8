"""Ledger entries in the store: append them (one lock for every writer), read them back.

Hashing is :mod:`assay.store.ledger.chain`'s (docs/decisions/0012-ledger-hashing.md);
this module only keeps entries in the ``ledger`` table and their contents in
``blobs`` under their digest (docs/decisions/0014-ledger-wiring.md).

Two writers cannot fork the chain: ``index`` is the primary key, so a second
entry at the same index is refused, and on PostgreSQL each append first takes
a transaction-scoped advisory lock so writers queue instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...canonical import digest_bytes
from ...errors import HarnessFailure
from .. import schema
from ..blobs import put_blobs
from ..bulk import insert_rows
from .chain import GENESIS, KINDS, Entry, Row, entry_hash

#: The PostgreSQL advisory lock key that serializes appends ("assay-ld").
LOCK_KEY: Final = 0x61737361792D6C64


def rows_and_contents(connection: Connection) -> tuple[Sequence[Row], dict[str, bytes]]:
    """Every entry as a plain tuple, by index, and every stored content by digest.

    Read through the DBAPI cursor: SQLAlchemy's row objects would cost more
    than the hashing. Two scans beat a join on SQLite (whose join probes
    ``blobs`` once per entry); the price is that trace blobs are read too.
    """
    cursor = connection.connection.cursor()
    try:
        cursor.execute('SELECT "index", kind, content_digest, prev_hash, hash FROM ledger '
                       'ORDER BY "index"')
        rows: Sequence[Row] = cursor.fetchall()
        cursor.execute("SELECT digest, content FROM blobs WHERE content IS NOT NULL")
        # bytes from both drivers (hashlib and the slow path take any buffer),
        # or str on SQLite for content edited with SQL's text functions.
        contents: dict[str, bytes] = {digest: content if type(content) is bytes
                                      else schema.as_bytes(content)
                                      for digest, content in cursor.fetchall()}
    finally:
        cursor.close()
    return rows, contents


def entry_hashes(connection: Connection, start: int = 0) -> list[str]:
    """The stored ``hash`` of every entry from ``start`` on, by index: a Merkle tree's leaves.

    The whole ledger through the DBAPI cursor, like :func:`rows_and_contents`
    (100,000 entries as objects would cost more than hashing them).
    """
    if start:
        c = schema.ledger.c
        return [str(h) for h in connection.scalars(
            sa.select(c.hash).where(c.index >= start).order_by(c.index))]
    cursor = connection.connection.cursor()
    try:
        cursor.execute('SELECT hash FROM ledger ORDER BY "index"')
        return [str(row[0]) for row in cursor.fetchall()]
    finally:
        cursor.close()


def utc_stamp(moment: datetime | None = None) -> str:
    """``moment`` (default: now) in UTC, ISO 8601 to the microsecond with a ``Z``.

    The store's bookkeeping times (entries, heads, erasures); not hashed.
    """
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def append_bodies(connection: Connection, items: Sequence[tuple[str, bytes]]) -> list[Entry]:
    """Append entries whose contents are already canonical bytes, in ``connection``'s transaction.

    The contents go to ``blobs`` under their digest; on PostgreSQL a
    transaction-scoped advisory lock makes concurrent writers queue.
    """
    if not items:
        return []
    c = schema.ledger.c
    if connection.dialect.name == "postgresql":
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(LOCK_KEY)))
    last = connection.execute(sa.select(c.index, c.hash).order_by(c.index.desc()).limit(1)).first()
    index, prev = (int(last[0]) + 1, str(last[1])) if last else (0, GENESIS)
    created = utc_stamp()
    entries: list[Entry] = []
    blobs: dict[str, bytes] = {}
    rows: list[dict[str, Any]] = []
    for kind, body in items:
        if kind not in KINDS:
            raise ValueError(f"unknown ledger entry kind {kind!r}")
        content_digest = digest_bytes(body)
        blobs.setdefault(content_digest, body)
        entry = Entry(index, kind, content_digest, prev, entry_hash(index, kind, content_digest,
                                                                     prev))
        entries.append(entry)
        rows.append({"index": index, "kind": kind, "content_digest": content_digest,
                     "prev_hash": prev, "hash": entry.hash, "created_at": created})
        index, prev = index + 1, entry.hash
    put_blobs(connection, blobs)
    insert_rows(connection, schema.ledger.insert(), rows)
    return entries



class LedgerError(HarnessFailure):
    """The ledger could not be written (exit 3); never quotes content."""

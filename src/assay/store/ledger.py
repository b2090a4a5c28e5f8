"""The ledger in the store: append entries, read them back, verify the chain.

Hashing is :mod:`assay.store.chain`'s (docs/decisions/0012-ledger-hashing.md);
this module only keeps entries in the ``ledger`` table and their contents in
``blobs`` under their digest (docs/decisions/0014-ledger-wiring.md).

Two writers cannot fork the chain: ``index`` is the primary key, so a second
entry at the same index is refused, and on PostgreSQL each append first takes
a transaction-scoped advisory lock so writers queue instead of failing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..canonical import canonical
from ..errors import HarnessFailure
from . import schema
from .blobs import put_blobs
from .chain import GENESIS, KINDS, Entry, Kind, VerifyResult, entry_hash, verify

#: The PostgreSQL advisory lock key that serializes appends ("assay-ld").
_LOCK_KEY: Final = 0x61737361792D6C64


class LedgerError(HarnessFailure):
    """The ledger could not be written (exit 3); never quotes content."""


class Ledger:
    """The store's ledger: append-only entries, contents by digest."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def append(self, kind: Kind, content: Any) -> Entry:
        """Record one entry (in its own transaction) and return it."""
        return self.append_many([(kind, content)])[-1]

    def append_many(self, items: Sequence[tuple[Kind, Any]]) -> list[Entry]:
        """Record entries in order, in one transaction, after the current last entry."""
        c = schema.ledger.c
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            with self.engine.begin() as connection:
                if connection.dialect.name == "postgresql":
                    connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_LOCK_KEY)))
                last = connection.execute(
                    sa.select(c.index, c.hash).order_by(c.index.desc()).limit(1)).first()
                index, prev = (int(last[0]) + 1, str(last[1])) if last else (0, GENESIS)
                entries: list[Entry] = []
                blobs: dict[str, bytes] = {}
                for kind, content in items:
                    if kind not in KINDS:
                        raise ValueError(f"unknown ledger entry kind {kind!r}")
                    body = canonical(content)
                    digest = "sha256:" + hashlib.sha256(body).hexdigest()
                    blobs.setdefault(digest, body)
                    entry = Entry(index, kind, digest, prev, entry_hash(index, kind, digest, prev))
                    entries.append(entry)
                    index, prev = index + 1, entry.hash
                put_blobs(connection, blobs)
                connection.execute(schema.ledger.insert(), [
                    {"index": e.index, "kind": e.kind, "content_digest": e.content_digest,
                     "prev_hash": e.prev_hash, "hash": e.hash, "created_at": created}
                    for e in entries])
        except sa.exc.SQLAlchemyError as error:
            raise LedgerError(f"cannot append to the ledger ({type(error).__name__})") from None
        return entries

    def entries(self) -> list[Entry]:
        """Every entry, by index."""
        c = schema.ledger.c
        query = sa.select(c.index, c.kind, c.content_digest, c.prev_hash, c.hash).order_by(c.index)
        with self.engine.connect() as connection:
            return [Entry(int(r[0]), r.kind, r.content_digest, r.prev_hash, r.hash)
                    for r in connection.execute(query)]

    def verify(self) -> tuple[VerifyResult, int]:
        """Verify the chain, and each content still stored; returns the result and the count."""
        entries = self.entries()
        b, c = schema.blobs.c, schema.ledger.c
        query = (sa.select(b.digest, b.content)
                 .join(schema.ledger, c.content_digest == b.digest)
                 .where(b.content.is_not(None)))
        with self.engine.connect() as connection:
            contents = {r.digest: bytes(r.content) for r in connection.execute(query)}
        return verify(entries, contents), len(entries)

"""The ledger in the store: append entries, read them back, verify the chain.

Hashing is :mod:`assay.store.ledger.chain`'s (docs/decisions/0012-ledger-hashing.md);
this module only keeps entries in the ``ledger`` table and their contents in
``blobs`` under their digest (docs/decisions/0014-ledger-wiring.md).

Two writers cannot fork the chain: ``index`` is the primary key, so a second
entry at the same index is refused, and on PostgreSQL each append first takes
a transaction-scoped advisory lock so writers queue instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final

import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy.engine import Connection, Engine

from ...canonical import canonical, digest_bytes
from ...errors import HarnessFailure
from .. import schema
from ..blobs import put_blobs
from ..bulk import insert_rows
from .chain import GENESIS, KINDS, Entry, Kind, Row, TreeHead, VerifyResult, entry_hash, walk

#: The PostgreSQL advisory lock key that serializes appends ("assay-ld").
LOCK_KEY: Final = 0x61737361792D6C64


def _rows_and_contents(connection: Connection) -> tuple[Sequence[Row], dict[str, bytes]]:
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

    The whole ledger through the DBAPI cursor, like :func:`_rows_and_contents`
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


class Ledger:
    """The store's ledger: append-only entries, contents by digest."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def append(self, kind: Kind, content: Any) -> Entry:
        """Record one entry (in its own transaction) and return it."""
        return self.append_many([(kind, content)])[-1]

    def append_many(self, items: Sequence[tuple[Kind, Any]]) -> list[Entry]:
        """Record entries in order, in one transaction, after the current last entry."""
        bodies = [(kind, canonical(content)) for kind, content in items]
        try:
            with self.engine.begin() as connection:
                return append_bodies(connection, bodies)
        except sa.exc.SQLAlchemyError as error:
            raise LedgerError(f"cannot append to the ledger ({type(error).__name__})") from None

    def entries(self) -> list[Entry]:
        """Every entry, by index."""
        c = schema.ledger.c
        query = sa.select(c.index, c.kind, c.content_digest, c.prev_hash, c.hash).order_by(c.index)
        with self.engine.connect() as connection:
            return [Entry(int(r[0]), r.kind, r.content_digest, r.prev_hash, r.hash)
                    for r in connection.execute(query)]

    def content(self, content_digest: str) -> bytes | None:
        """The stored content bytes under ``content_digest`` (None: erased or never stored)."""
        b = schema.blobs.c
        with self.engine.connect() as connection:
            found = connection.scalar(sa.select(b.content).where(b.digest == content_digest))
        return None if found is None else bytes(found)

    def record_head(self, key: Ed25519PrivateKey) -> tuple[TreeHead, bytes]:
        """Sign and store a head over every entry, in its own transaction (heads.record_head).

        Returns the head and the raw public key it is stored under: when a
        head of that size was already stored, that one is returned, and it
        may have been signed by another key (``verify`` then says so).
        """
        from .heads import record_head, stored_head

        try:
            with self.engine.begin() as connection:
                head = record_head(connection, key)
                row = stored_head(connection, head.size)
        except sa.exc.SQLAlchemyError as error:
            raise LedgerError(f"cannot store a tree head ({type(error).__name__})") from None
        parsed = row.parsed() if row is not None else None
        if parsed is None:
            raise LedgerError(f"the stored head of {head.size} entries is malformed "
                              "(run `assay ledger verify`)")
        return parsed

    def verify(self, public_key: Ed25519PublicKey | None = None,
               published: tuple[TreeHead, bytes] | None = None) -> tuple[VerifyResult, int]:
        """Verify the chain, each content still stored, and every stored head, in one pass.

        Every stored head must be signed (under its own public key), all by
        ONE key — ``public_key`` when given (the store's local key), else the
        first head's — and the ledger's first ``size`` entries must have its
        root. Entries dropped below the newest head's size are
        named as missing. ``published`` (a head and its raw public key, e.g.
        from ``assay ledger head``) is checked the same way: it catches a
        rewrite that also replaced the stored heads. Returns the result (its
        ``heads`` counts the stored heads checked) and the number of entries.
        """
        from .heads import raw_public_key, signature_holds, stored_heads

        # Heads first: both only grow, so every head read is covered by the rows read after.
        with self.engine.connect() as connection:
            stored = stored_heads(connection)
            rows, contents = _rows_and_contents(connection)
        count = len(rows)
        wanted_key = raw_public_key(public_key) if public_key is not None else None
        heads: list[tuple[str, TreeHead, bytes]] = []
        for row in stored:
            parsed = row.parsed()
            if parsed is None:
                return VerifyResult(False, None, f"head {row.size}: malformed (edited)"), count
            heads.append((f"head {row.size}", *parsed))
        if published is not None:
            heads.append(("the published head", *published))
        for name, head, raw in heads:
            if not signature_holds(head, raw):
                return VerifyResult(False, None, f"{name}: its signature does not hold "
                                                 "(edited)"), count
            if wanted_key is None:
                wanted_key = raw
            elif raw != wanted_key:
                whose = "the local key" if public_key is not None else "one key"
                return VerifyResult(False, None, f"{name}: not signed by {whose} "
                                                 "(re-signed)"), count
        roots: dict[int, bytes] = {}
        for name, head, _ in heads:
            if roots.setdefault(head.size, head.root) != head.root:
                return VerifyResult(False, None, f"{name}: another root than a head of "
                                                 "the same size (forked)"), count
        result = walk(rows, contents, roots)[0]
        result = replace(result, heads=len(stored))
        if result.ok and heads:
            newest = max(head.size for _, head, _ in heads)
            if count < newest:
                covers = ("the published head" if published is not None
                          and published[0].size == newest else "the newest head")
                reason = f"entry {count}: missing ({covers} covers {newest} entries)"
                return replace(result, ok=False, first_bad=count, reason=reason), count
        return result, count

"""The ledger as one object over the store (``Store.ledger``): its entries read, a head
signed over them, the whole verified — chain, contents and every stored head.

Above ``entries`` (appending and reading rows) and ``heads`` (signed tree heads),
which it puts together; hashing is ``chain``'s (docs/decisions/0014-ledger-wiring.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy.engine import Engine

from ...canonical import canonical
from .. import schema
from .chain import Entry, Kind, TreeHead, VerifyResult, walk
from .entries import LedgerError, append_bodies, rows_and_contents
from .heads import raw_public_key, record_head, signature_holds, stored_head, stored_heads


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
        # Heads first: both only grow, so every head read is covered by the rows read after.
        with self.engine.connect() as connection:
            stored = stored_heads(connection)
            rows, contents = rows_and_contents(connection)
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

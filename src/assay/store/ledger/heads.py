"""Signed tree heads kept in the store, and the published head a user keeps outside it.

A head signs the Merkle root of the ledger's first ``size`` entries
(``chain.head_message``) with the store's Ed25519 key (:mod:`assay.store.ledger.keys`,
never in the database). The ``ledger_heads`` row also keeps the head's
compact range (``frontier``, :func:`merkle.extend_frontier`), so the next
head hashes only the entries appended since, not the whole ledger: a run can
sign a head in its own transaction at a cost that does not grow with the
ledger (docs/decisions/0014-ledger-wiring.md).

Stored heads catch a ledger whose tail was dropped or rewritten by someone
without the key. Someone who can also write the heads table can drop them
all, so ``assay ledger head`` prints a head to publish elsewhere, and
``assay ledger verify --head FILE`` checks the ledger against it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy.engine import Connection

from ...errors import HarnessFailure
from .. import schema
from . import merkle
from .chain import TreeHead, head_message, verify_head
from .entries import LOCK_KEY, utc_stamp  # the appenders' lock: a head reads a tail no one extends
from .receipts import b64, hex32

#: The published head's format (``assay ledger head``).
SCHEMA: Final = "assay.head/1"


class HeadError(HarnessFailure):
    """A head could not be signed over the stored ledger (exit 3); never quotes content."""


@dataclass(frozen=True, slots=True)
class StoredHead:
    """One ``ledger_heads`` row as stored (text), checked by :meth:`parsed`."""

    size: int
    root: str
    signature: str
    public_key: str
    frontier: str

    def parsed(self) -> tuple[TreeHead, bytes] | None:
        """The head and its raw 32-byte public key, or None when a field is malformed."""
        try:
            return TreeHead(self.size, hex32(self.root), b64(self.signature)), \
                _raw_key(self.public_key)
        except (ValueError, TypeError, binascii.Error):
            return None

    def frontier_hashes(self) -> list[bytes] | None:
        """The stored frontier, or None when it is malformed or not this head's root.

        The frontier is not signed; it is trusted only when it folds to the
        signed root (a collision would be needed to fake one).
        """
        try:
            nodes = [hex32(node) for node in json.loads(self.frontier)]
            root = hex32(self.root)
        except (ValueError, TypeError, binascii.Error):
            return None
        if len(nodes) != self.size.bit_count() or merkle.frontier_root(nodes) != root:
            return None
        return nodes


def _raw_key(value: Any) -> bytes:
    raw = b64(value)
    Ed25519PublicKey.from_public_bytes(raw)  # 32 bytes, or ValueError
    return raw


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of a key's public half (what heads and receipts carry)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def signature_holds(head: TreeHead, raw_key: bytes) -> bool:
    """Whether ``head`` is signed by the holder of the raw public key (never raises)."""
    try:
        return verify_head(head, Ed25519PublicKey.from_public_bytes(raw_key))
    except ValueError:
        return False


def stored_heads(connection: Connection) -> list[StoredHead]:
    """Every stored head, smallest first (as stored: :meth:`StoredHead.parsed` checks them)."""
    h = schema.ledger_heads.c
    query = sa.select(h.size, h.root, h.signature, h.public_key, h.frontier).order_by(h.size)
    return [StoredHead(int(r[0]), r[1], r[2], r[3], r[4]) for r in connection.execute(query)]


@dataclass(frozen=True, slots=True)
class Frontier:
    """The compact range of the ledger's first ``size`` entries, as one writer last read it.

    The writer process keeps one as it writes a run's batches
    (``frontier_of``), so that the head signed at the seal hashes only the
    entries written since its last batch instead of the whole run. It holds
    hashes of committed entries read from the ledger itself, like a stored
    head's frontier, and it is only ever extended by entries read after it.
    ``last`` is the stored hash of entry ``size - 1`` ("" for none): a range
    whose last entry is no longer what it was (a tail dropped or rewritten
    since) is not extended, and the head is folded as if there were none.
    """

    size: int
    nodes: tuple[bytes, ...]
    last: str = ""


def frontier_of(connection: Connection, known: Frontier | None = None) -> Frontier:
    """The compact range over every entry stored now, hashing only those after ``known``.

    Starts from ``known`` or from the newest stored head whose frontier holds,
    whichever covers more, and reads the entries after it (in the caller's
    transaction). Raises ``HeadError`` where the ledger does not hold (an
    index missing, a hash malformed).
    """
    size, frontier, _, last = _fold(connection, known)
    return Frontier(size, tuple(frontier), last)


def _newest_head(connection: Connection) -> StoredHead | None:
    h = schema.ledger_heads.c
    newest = connection.execute(
        sa.select(h.size, h.root, h.signature, h.public_key, h.frontier)
        .order_by(h.size.desc()).limit(1)).first()
    return None if newest is None else \
        StoredHead(int(newest[0]), newest[1], newest[2], newest[3], newest[4])


#: Ledger entries read and folded into the frontier at once (``_fold``).
_FOLD_ROWS = 4096


def _fold(connection: Connection, known: Frontier | None
          ) -> tuple[int, list[bytes], StoredHead | None, str]:
    """(size, frontier) over the whole stored ledger, the newest stored head, the last hash."""
    c = schema.ledger.c
    newest = _newest_head(connection)
    size, frontier = 0, []
    if newest is not None:
        nodes = newest.frontier_hashes()
        if nodes is not None:
            size, frontier = newest.size, nodes
    if known is not None and known.size > size and _hash_at(connection, known.size) == known.last:
        size, frontier = known.size, list(known.nodes)
    # Read and folded a few thousand entries at a time: a queued run's seal signs the
    # first head after every entry its workers appended (one per trial).
    rows = connection.execute(sa.select(c.index, c.hash).where(c.index >= size)
                              .order_by(c.index).execution_options(stream_results=True))
    start, seen, last_hash = size, 0, None
    for batch in rows.partitions(_FOLD_ROWS):
        leaves: list[bytes] = []
        for index, entry_hash in batch:
            try:
                leaf = bytes.fromhex(entry_hash.removeprefix("sha256:"))
            except (AttributeError, ValueError):
                leaf = b""
            if int(index) != start + seen or len(leaf) != merkle.HASH_SIZE \
                    or not entry_hash.startswith("sha256:"):
                raise HeadError(f"cannot sign a tree head: the ledger does not hold at entry "
                                f"{start + seen} (run `assay ledger verify`)")
            leaves.append(leaf)
            seen += 1
            last_hash = entry_hash
        frontier = merkle.extend_frontier(frontier, start + seen - len(leaves), leaves)
    new_size = start + seen
    last = str(last_hash) if last_hash is not None else _hash_at(connection, new_size)
    return new_size, frontier, newest, last


def _hash_at(connection: Connection, size: int) -> str:
    """The stored hash of entry ``size - 1`` ("" when size is 0 or the entry is missing)."""
    if size <= 0:
        return ""
    c = schema.ledger.c
    found = connection.scalar(sa.select(c.hash).where(c.index == size - 1))
    return "" if found is None else str(found)


def record_head(connection: Connection, key: Ed25519PrivateKey,
                known: Frontier | None = None) -> TreeHead:
    """Sign and store a head over the whole ledger, in the caller's transaction.

    Reads the newest stored head and its frontier (or starts from ``known``,
    a ``frontier_of`` this process read earlier, when it covers more), hashes
    only the entries after it, signs ``chain.head_message(size, root)`` and
    inserts the row. When a head of that size is already stored (nothing
    appended since, or a concurrent writer signed the same size first), that
    head is returned. A stored frontier that does not fold to its head's
    root is not extended: the tree is then rebuilt from all entries
    (``assay ledger verify`` names what was edited). On PostgreSQL the
    appenders' advisory lock is taken, so no entry lands between reading the
    tail and signing it.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(LOCK_KEY)))
    new_size, frontier, newest, _ = _fold(connection, known)
    if newest is not None and new_size == newest.size:
        existing = _head_at(connection, new_size)
        if existing is not None:
            return existing
    root = merkle.frontier_root(frontier)
    head = TreeHead(new_size, root, key.sign(head_message(new_size, root)))
    row = {
        "size": new_size, "root": root.hex(),
        "signature": base64.b64encode(head.signature).decode("ascii"),
        "public_key": base64.b64encode(raw_public_key(key)).decode("ascii"),
        "frontier": json.dumps([node.hex() for node in frontier], separators=(",", ":")),
        "created_at": utc_stamp(),
    }
    dialect = connection.dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        connection.execute(sqlite_insert(schema.ledger_heads).on_conflict_do_nothing(), row)
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        connection.execute(pg_insert(schema.ledger_heads).on_conflict_do_nothing(), row)
    elif _head_at(connection, new_size) is None:
        connection.execute(schema.ledger_heads.insert(), row)
    stored_head = _head_at(connection, new_size)
    return stored_head if stored_head is not None else head


def stored_head(connection: Connection, size: int) -> StoredHead | None:
    """The stored head of ``size`` entries, if any (as stored)."""
    h = schema.ledger_heads.c
    row = connection.execute(sa.select(h.size, h.root, h.signature, h.public_key, h.frontier)
                             .where(h.size == size)).first()
    return None if row is None else StoredHead(int(row[0]), row[1], row[2], row[3], row[4])


def _head_at(connection: Connection, size: int) -> TreeHead | None:
    row = stored_head(connection, size)
    parsed = row.parsed() if row is not None else None
    return parsed[0] if parsed is not None else None


def published(head: TreeHead, raw_key: bytes) -> dict[str, Any]:
    """The ``assay.head/1`` JSON of a head: what a user publishes to pin the ledger."""
    from .receipts import fingerprint

    return {"schema": SCHEMA, "size": head.size, "root": head.root.hex(),
            "signature": base64.b64encode(head.signature).decode("ascii"),
            "public_key": base64.b64encode(raw_key).decode("ascii"),
            "fingerprint": fingerprint(raw_key)}


def read_published(data: Any) -> tuple[TreeHead, bytes]:
    """The head and raw public key of an ``assay.head/1`` value; ``ValueError`` if malformed.

    Whether its signature holds is the verifier's check, not this one's.
    """
    try:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"not an {SCHEMA} head")
        size = data["size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("size is not a count")
        return TreeHead(size, hex32(data["root"]), b64(data["signature"])), \
            _raw_key(data["public_key"])
    except (KeyError, TypeError, binascii.Error) as error:
        raise ValueError(f"not an {SCHEMA} head") from error

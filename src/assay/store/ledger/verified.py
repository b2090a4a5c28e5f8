"""How much of the ledger is known to hold: a verified prefix, extended as entries arrive.

``Ledger.verify`` reads and hashes every entry and every stored content:
about half a second for 100,000 entries. A page that says whether the ledger
holds cannot pay that on each view, so a :class:`Verified` remembers what one
whole verification established — the first ``size`` entries hold, the last of
them has the hash ``last``, their Merkle tree, the key the heads are signed
by — and :func:`verify_new` checks only the last of them again and what came
after: that entry still has its hash and holds, the entries appended since
(chain, hashes, contents, as ``chain.walk`` checks them), and every head
signed since (signature, signer, its root read off the extended tree).

The tree (``merkle.levels`` of the verified entries' hashes: about 15 MB for
100,000 entries) is kept because it also proves any sealed run's inclusion
without hashing the ledger again (``run_receipts.issue(tree=…)``). It only
grows: ``verify_new`` extends it in place, so successive :class:`Verified`
share it, and a reader takes only the prefix its sizes name.

Anything the short path finds wrong is handed to a whole ``Ledger.verify``,
so a broken ledger is always reported in the words of ``assay ledger
verify``, first bad entry named. What the short path cannot see is an edit
to an entry it verified earlier (other than the last): that is what running
:func:`verify_all` again is for, and why a :class:`Verified` says when the
whole ledger was last read (``full_at``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .. import schema
from . import merkle
from .chain import GENESIS, Row, TreeHead, VerifyResult, walk
from .entries import entry_hashes, utc_stamp

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..database import Store

#: Contents are read for at most this many digests per query.
_CHUNK = 500


@dataclass(frozen=True)
class Verified:
    """What the last check found, and the prefix a later check may start from.

    ``result`` is ``Ledger.verify``'s (or the short path's, which only ever
    says "holds"); ``entries`` how many entries the ledger had; ``erased``
    how many of them have their content erased; ``heads`` how many stored
    heads there were. ``tree`` is None when no later check may start from
    this one (the ledger did not hold, or moved while it was read).
    """

    result: VerifyResult
    entries: int
    erased: int
    heads: int
    #: When the whole ledger was last verified, and when the newest entry was.
    full_at: str
    checked_at: str
    last: str = ""
    #: The ``prev_hash`` of that last entry (what it links to).
    before_last: str = GENESIS
    #: ``merkle.levels`` of at least the first ``entries`` entries (shared, append-only).
    tree: list[list[bytes]] | None = None
    #: The raw public key every head is signed by (None: no head yet).
    key: bytes | None = None

    @property
    def ok(self) -> bool:
        """Whether the ledger held when checked."""
        return self.result.ok


def verify_all(store: Store, public_key: Ed25519PublicKey | None = None) -> Verified:
    """Verify the whole ledger (``Ledger.verify``) and remember its prefix for ``verify_new``."""
    from .heads import raw_public_key

    when = utc_stamp()
    result, count = store.ledger.verify(public_key)
    erased = len(result.absent)
    if not result.ok:
        return Verified(result, count, erased, result.heads, when, when)
    with store.engine.connect() as connection:
        prefix = _prefix(connection, count)
        first_key = _first_head_key(connection)
    if prefix is None:  # the ledger moved under the check: the next one reads it all again
        return Verified(result, count, erased, result.heads, when, when)
    tree, last, before_last = prefix
    key = raw_public_key(public_key) if public_key is not None else first_key
    return Verified(result, count, erased, result.heads, when, when, last, before_last,
                    tree, key)


def verify_all_sent(pipe: Any, url: str, raw_key: bytes | None) -> None:
    """``verify_all`` of the store at ``url``, sent on ``pipe``: a process's whole work.

    The workbench runs the whole check in a process of its own, so that
    hashing 100,000 entries does not hold the server's interpreter lock
    while it answers pages. Sends ``("ok", Verified)``, or ``("error",
    TYPE)`` naming only the exception's type (its message may quote a row).
    Ignores Ctrl-C: the server decides when it stops.
    """
    import signal

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..database import open_store

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        store = open_store(url)
        try:
            key = None if raw_key is None else Ed25519PublicKey.from_public_bytes(raw_key)
            answer: tuple[str, Any] = ("ok", verify_all(store, key))
        finally:
            store.close()
    except Exception as error:
        answer = ("error", type(error).__name__)
    pipe.send(answer)
    pipe.close()


def verify_new(store: Store, known: Verified,
               public_key: Ed25519PublicKey | None = None) -> Verified:
    """``known`` extended over the entries and heads stored since; a whole check if need be.

    A ``known`` that did not hold is returned as it is: a broken ledger stays
    broken until someone verifies it whole again (``verify_all``).
    """
    from .heads import raw_public_key, signature_holds

    if not known.ok:
        return known
    if known.tree is None or len(known.tree[0]) != known.entries:
        return verify_all(store, public_key)
    wanted = raw_public_key(public_key) if public_key is not None else known.key
    if wanted is not None and known.key is not None and wanted != known.key:
        return verify_all(store, public_key)  # the local key is not the one that signed
    when = utc_stamp()
    with store.engine.connect() as connection:
        # Heads first: both only grow, so every head read is covered by the rows read after.
        heads = _heads_since(connection, known.entries)
        head_count = int(connection.scalar(
            sa.select(sa.func.count()).select_from(schema.ledger_heads)) or 0)
        # From the last entry verified: an edit of it shows at once.
        start = max(0, known.entries - 1)
        rows = _rows_from(connection, start)
        contents = _contents(connection, {row[2] for row in rows})
    if known.entries and (not rows or rows[0][4] != known.last):
        return verify_all(store, public_key)  # the tail was rewritten or dropped
    result, _ = walk(rows, contents, start=start, prev=known.before_last)
    if not result.ok:
        return verify_all(store, public_key)
    count = start + len(rows)
    new_erased = sum(1 for position in result.absent if position >= known.entries)
    key = wanted
    for _, parsed in heads:
        if parsed is None or parsed[0].size > count:
            return verify_all(store, public_key)
        head, raw = parsed
        if not signature_holds(head, raw) or (key is not None and raw != key):
            return verify_all(store, public_key)
        key = raw
    # Every new entry holds: the tree grows by them (in place: it only ever grows).
    tree = known.tree
    appended = rows[1:] if known.entries else rows  # rows[0]: the last entry verified before
    merkle.extend_levels(tree, [bytes.fromhex(row[4][7:]) for row in appended])
    for _, parsed in heads:
        assert parsed is not None
        if merkle.range_hash(tree, 0, parsed[0].size) != parsed[0].root:
            return verify_all(store, public_key)
    last, before_last = (rows[-1][4], rows[-1][3]) if rows else (known.last, known.before_last)
    return Verified(VerifyResult(True, absent=(), heads=head_count), count,
                    known.erased + new_erased, head_count, known.full_at, when,
                    last, before_last, tree, key)


def _prefix(connection: Connection, count: int
            ) -> tuple[list[list[bytes]], str, str] | None:
    """The Merkle levels of the first ``count`` entries, the last one's hash and ``prev_hash``.

    None when the entries read are not the ``count`` verified (the ledger
    moved in between).
    """
    hashes = entry_hashes(connection)[:count]
    if len(hashes) != count:
        return None
    try:
        tree = merkle.levels([bytes.fromhex(h[7:]) for h in hashes])
    except ValueError:
        return None
    c = schema.ledger.c
    tail = connection.execute(sa.select(c.prev_hash, c.hash)
                              .where(c.index == count - 1)).first() if count else None
    if count and tail is None:
        return None
    last, before_last = (str(tail[1]), str(tail[0])) if tail is not None else ("", GENESIS)
    return tree, last, before_last


def _first_head_key(connection: Connection) -> bytes | None:
    """The raw public key of the smallest stored head (the one ``Ledger.verify`` pins)."""
    from .heads import stored_heads

    for head in stored_heads(connection):
        parsed = head.parsed()
        return None if parsed is None else parsed[1]
    return None


def _heads_since(connection: Connection, size: int
                 ) -> list[tuple[int, tuple[TreeHead, bytes] | None]]:
    """Heads of ``size`` entries or more, smallest first, parsed (None: malformed)."""
    from .heads import StoredHead

    h = schema.ledger_heads.c
    query = (sa.select(h.size, h.root, h.signature, h.public_key, h.frontier)
             .where(h.size >= size).order_by(h.size))
    return [(int(r[0]), StoredHead(int(r[0]), r[1], r[2], r[3], r[4]).parsed())
            for r in connection.execute(query)]


def _rows_from(connection: Connection, start: int) -> list[Row]:
    c = schema.ledger.c
    query = (sa.select(c.index, c.kind, c.content_digest, c.prev_hash, c.hash)
             .where(c.index >= start).order_by(c.index))
    return [(int(r[0]), r[1], r[2], r[3], r[4]) for r in connection.execute(query)]


def _contents(connection: Connection, digests: set[str]) -> dict[str, bytes]:
    b = schema.blobs.c
    wanted = sorted(digests)
    found: dict[str, bytes] = {}
    for at in range(0, len(wanted), _CHUNK):
        query = sa.select(b.digest, b.content).where(
            b.digest.in_(wanted[at:at + _CHUNK]), b.content.is_not(None))
        found.update((row[0], bytes(row[1])) for row in connection.execute(query))
    return found


"""The ledger as a hash chain of entries, grouped into a Merkle tree with a signed head.

An entry holds what was decided, not what was said: its content lives in the
store under its digest and may be erased; the entry keeps only the digest.

Byte formats (docs/decisions/0012-ledger-hashing.md):

- ``content_digest`` = ``assay.canonical.digest(content)``: ``"sha256:"`` and
  the lowercase hex SHA-256 of the content's RFC 8785 (JCS) bytes.
- ``hash`` = ``assay.canonical.digest({"content_digest": …, "index": …,
  "kind": …, "prev_hash": …})``, i.e. ``"sha256:"`` + hex SHA-256 of the JCS
  bytes ``{"content_digest":"sha256:…","index":0,"kind":"gate","prev_hash":"sha256:…"}``.
- ``prev_hash`` is the previous entry's ``hash``; the first entry's is
  :data:`GENESIS` (``"sha256:"`` and 64 zeros).
- Merkle leaf of an entry = the 32 raw bytes of its ``hash``.
- A tree head signs, with Ed25519, the UTF-8 bytes
  ``"assay-ledger\\n<size>\\n<base64 root>\\n"`` (the body of a C2SP checkpoint).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.canonical import canonical, digest

from . import merkle

Kind = Literal[
    "run-registered", "trial-verdict", "run-sealed", "gate", "judge-opinion", "review", "erasure",
    "agent",  # the registry: publish, start, stop (docs/decisions/0027-registry.md)
]
KINDS: Final[tuple[str, ...]] = get_args(Kind)
GENESIS: Final = "sha256:" + "0" * 64
ORIGIN: Final = "assay-ledger"
_KIND_SET: Final = frozenset(KINDS)
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
_SAFE_INT: Final = 2**53 - 1


@dataclass(frozen=True, slots=True)
class Entry:
    """One ledger entry; ``hash`` covers the other four fields (see the module doc)."""

    index: int
    kind: str
    content_digest: str
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What :func:`verify` found.

    ``first_bad`` is the position (in the sequence given) of the first entry
    that does not hold, ``None`` when all hold (or when only a head's root
    differs, which cannot name one entry). ``absent`` lists the positions
    whose content was not given (erased): they do not break verification.
    ``heads`` is how many stored tree heads were checked (``Ledger.verify``).
    """

    ok: bool
    first_bad: int | None = None
    reason: str = ""
    absent: tuple[int, ...] = ()
    heads: int = 0


@dataclass(frozen=True, slots=True)
class TreeHead:
    """A signed tree head: the Merkle root of the first ``size`` entries."""

    size: int
    root: bytes
    signature: bytes


def entry_hash(index: int, kind: str, content_digest: str, prev_hash: str) -> str:
    """The ``hash`` of an entry with these fields.

    Verification hashes every entry, so the usual case skips the general JCS
    encoder: a safe non-negative int, a known kind and two well-formed digests
    contain nothing JCS escapes or reorders, so one format string gives the
    exact JCS bytes (a property test holds the two paths equal). Anything
    else goes through :func:`assay.canonical.digest`.
    """
    if (type(index) is int and 0 <= index <= _SAFE_INT and kind in _KIND_SET
            and _DIGEST.fullmatch(content_digest) and _DIGEST.fullmatch(prev_hash)):
        return "sha256:" + hashlib.sha256(
            _entry_bytes(index, kind, content_digest, prev_hash)).hexdigest()
    return digest(
        {"content_digest": content_digest, "index": index, "kind": kind, "prev_hash": prev_hash}
    )


def _entry_bytes(index: int, kind: str, content_digest: str, prev_hash: str) -> bytes:
    """The JCS bytes of an entry's four fields, for values :func:`entry_hash` checked."""
    return (f'{{"content_digest":"{content_digest}","index":{index},'
            f'"kind":"{kind}","prev_hash":"{prev_hash}"}}').encode("ascii")


def append(entries: Sequence[Entry], kind: Kind, content: Any) -> Entry:
    """The entry that records ``content`` after ``entries`` (``entries`` is not changed)."""
    if kind not in KINDS:
        raise ValueError(f"unknown ledger entry kind {kind!r}; known: {', '.join(KINDS)}")
    index = len(entries)
    prev = entries[-1].hash if entries else GENESIS
    content_digest = digest(content)
    return Entry(index, kind, content_digest, prev, entry_hash(index, kind, content_digest, prev))


def content_matches(content_digest: str, content: Any) -> bool:
    """Whether stored content has this digest: canonical JSON bytes, or a JSON value."""
    if isinstance(content, bytes):
        return "sha256:" + hashlib.sha256(content).hexdigest() == content_digest
    return digest(content) == content_digest


#: One entry as :func:`walk` reads it: index, kind, content_digest, prev_hash, hash.
Row = tuple[int, str, str, str, str]


def _slow_fault(position: int, row: Row, content: bytes | None, expected_prev: str
                ) -> str | None:
    """Why an entry the fast path did not accept does not hold, or None if it does.

    The general path: any field may be malformed (a tampered row). Names the
    check that failed, never a value it read.
    """
    index, kind, content_digest, prev_hash, stored = row
    if index != position:
        return f"has index {index}, expected {position} (deleted, inserted or moved)"
    if prev_hash != expected_prev:
        return "prev_hash is not the previous entry's hash"
    if kind not in _KIND_SET:
        return "unknown kind"
    try:
        recomputed = entry_hash(index, kind, content_digest, prev_hash)
    except (TypeError, ValueError):
        recomputed = None
    if recomputed != stored:
        return "hash does not match its fields (edited)"
    if content is not None and not content_matches(content_digest, bytes(content)):
        return "content does not match its digest (edited)"
    return None


def walk(rows: Sequence[Row], contents: Mapping[str, bytes],
         roots: Mapping[int, bytes] | None = None, *, start: int = 0,
         prev: str = GENESIS) -> tuple[VerifyResult, int]:
    """Verify entries in one pass: chain, hashes, contents, and Merkle roots at sizes.

    ``contents`` maps a content digest to its stored bytes; a digest it lacks
    is erased content, which does not break the chain. ``roots`` maps a size
    to the root the first ``size`` entries must have (the stored heads').
    Returns the result and how many rows were read.

    ``start`` and ``prev``: ``rows`` are the entries from index ``start`` on,
    the first linking to ``prev`` (a prefix verified earlier; positions in
    the result are indexes in the whole ledger). Roots need the whole
    ledger: they are refused with a ``start``.

    Hot loop (≥ 200,000 entries/s, docs/performance.md), so the work is done
    where CPython does it fastest: the loop checks links, contents and entry
    hashes with no per-entry objects; the tree is hashed afterwards level by
    level in comprehensions, from the hashes the loop checked, and every
    head's root is read off its levels (its compact range), so any number of
    heads costs one tree.

    A root that does not match is reported unless the entry right after the
    head's last fails too: an entry forged in before the head's end displaces
    one that no longer links, and that entry (as 0012 says) is the one named.
    """
    sha256 = hashlib.sha256
    fullmatch = _DIGEST.fullmatch
    kinds = _KIND_SET
    content_of = contents.get
    if start and roots:
        raise ValueError("walk: roots are checked over the whole ledger, not from a start")
    absent: list[int] = []
    expected_prev = prev
    position = start
    fault: str | None = None
    for row in rows:
        index, kind, content_digest, prev_hash, stored = row
        content = content_of(content_digest)
        # The fast path takes an entry only if every check holds; the content
        # check (or, content erased, the pattern) also shows the digest is
        # well formed, which makes the format string exact JCS (an index that
        # equals the position but is no int formats otherwise: no match).
        if (index == position and prev_hash == expected_prev and kind in kinds
                and (fullmatch(content_digest) if content is None
                     else "sha256:" + sha256(content).hexdigest() == content_digest)
                and "sha256:" + sha256(
                    f'{{"content_digest":"{content_digest}","index":{index},'
                    f'"kind":"{kind}","prev_hash":"{prev_hash}"}}'.encode()).hexdigest()
                == stored):
            if content is None:
                absent.append(position)
            expected_prev = stored
            position += 1
            continue
        fault = _slow_fault(position, row, content, expected_prev)
        if fault is not None:
            break
        if content is None:  # a well-formed entry the fast path does not take
            absent.append(position)
        expected_prev = stored
        position += 1
    read = position - start + (fault is not None)
    roots = roots or {}
    # A head whose entries do not all hold, or whose next entry fails, yields to the chain.
    sizes = [size for size in sorted(roots)
             if size < position or (fault is None and size == position)]
    if sizes:
        fromhex = bytes.fromhex
        tree = merkle.levels([fromhex(row[4][7:]) for row in rows[:sizes[-1]]])
        for size in sizes:
            if merkle.range_hash(tree, 0, size) != roots[size]:
                reason = (f"the first {size} entries do not have the root of head {size} "
                          "(rewritten)")
                return VerifyResult(False, None, reason, tuple(absent)), read
    if fault is not None:
        return VerifyResult(False, position, f"entry {position}: {fault}", tuple(absent)), read
    return VerifyResult(True, absent=tuple(absent)), read


def verify(
    entries: Sequence[Entry],
    contents_by_digest: Mapping[str, Any] | None = None,
    head: TreeHead | None = None,
) -> VerifyResult:
    """Check the chain; name the first entry that does not hold.

    With ``contents_by_digest``, each entry's content, when present, must
    have the entry's digest; absent content (erased) is allowed. With
    ``head``, the ledger must hold at least ``head.size`` entries whose Merkle
    root is ``head.root`` (this catches a dropped last entry or a rewritten
    chain). The head's signature is :func:`verify_head`'s job.
    """
    contents = {key: value if isinstance(value, bytes) else canonical(value)
                for key, value in (contents_by_digest or {}).items()}
    rows = [(e.index, e.kind, e.content_digest, e.prev_hash, e.hash) for e in entries]
    roots = {head.size: head.root} if head is not None else None
    result, _ = walk(rows, contents, roots)
    if result.ok and head is not None and len(entries) < head.size:
        reason = f"entry {len(entries)}: missing (the head covers {head.size} entries)"
        return VerifyResult(False, len(entries), reason, result.absent)
    return result


def leaves(entries: Sequence[Entry]) -> list[bytes]:
    """The Merkle leaves of ``entries``: the raw bytes of each entry's hash."""
    return [bytes.fromhex(entry.hash.removeprefix("sha256:")) for entry in entries]


def head_message(size: int, root: bytes) -> bytes:
    """The bytes a tree head signs."""
    return f"{ORIGIN}\n{size}\n{base64.b64encode(root).decode('ascii')}\n".encode()


def sign_head(entries: Sequence[Entry], private_key: Ed25519PrivateKey) -> TreeHead:
    """Sign the Merkle root of ``entries`` (the caller verifies the chain first)."""
    root = merkle.root(leaves(entries))
    return TreeHead(len(entries), root, private_key.sign(head_message(len(entries), root)))


def verify_head(head: TreeHead, public_key: Ed25519PublicKey) -> bool:
    """Whether ``head`` was signed by the key's owner."""
    try:
        public_key.verify(head.signature, head_message(head.size, head.root))
    except InvalidSignature:
        return False
    return True

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.canonical import digest

from . import merkle

Kind = Literal[
    "run-registered", "trial-verdict", "run-sealed", "gate", "judge-opinion", "review", "erasure"
]
KINDS: Final[tuple[str, ...]] = get_args(Kind)
GENESIS: Final = "sha256:" + "0" * 64
ORIGIN: Final = "assay-ledger"
_ABSENT: Final = object()


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
    """

    ok: bool
    first_bad: int | None = None
    reason: str = ""
    absent: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TreeHead:
    """A signed tree head: the Merkle root of the first ``size`` entries."""

    size: int
    root: bytes
    signature: bytes


def entry_hash(index: int, kind: str, content_digest: str, prev_hash: str) -> str:
    """The ``hash`` of an entry with these fields."""
    return digest(
        {"content_digest": content_digest, "index": index, "kind": kind, "prev_hash": prev_hash}
    )


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


def _fault(position: int, entry: Entry, expected_prev: str) -> str | None:
    if entry.index != position:
        return f"has index {entry.index}, expected {position} (deleted, inserted or moved)"
    if entry.prev_hash != expected_prev:
        return "prev_hash is not the previous entry's hash"
    if entry.kind not in KINDS:
        return f"unknown kind {entry.kind!r}"
    if entry_hash(entry.index, entry.kind, entry.content_digest, entry.prev_hash) != entry.hash:
        return "hash does not match its fields (edited)"
    return None


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
    expected_prev = GENESIS
    absent: list[int] = []
    for position, entry in enumerate(entries):
        fault = _fault(position, entry, expected_prev)
        if fault is None and contents_by_digest is not None:
            content = contents_by_digest.get(entry.content_digest, _ABSENT)
            if content is _ABSENT:
                absent.append(position)
            elif not content_matches(entry.content_digest, content):
                fault = "content does not match its digest (edited)"
        if fault is not None:
            return VerifyResult(False, position, f"entry {position}: {fault}", tuple(absent))
        expected_prev = entry.hash
    if head is not None:
        if len(entries) < head.size:
            reason = f"entry {len(entries)}: missing (the head covers {head.size} entries)"
            return VerifyResult(False, len(entries), reason, tuple(absent))
        if merkle.root(leaves(entries[: head.size])) != head.root:
            reason = f"the first {head.size} entries do not have the head's root (rewritten)"
            return VerifyResult(False, None, reason, tuple(absent))
    return VerifyResult(True, absent=tuple(absent))


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

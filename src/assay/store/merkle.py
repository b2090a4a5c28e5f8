"""An RFC 6962 / RFC 9162 Merkle tree over leaf byte strings: hashes and proofs.

Pure functions on lists of bytes, no I/O. Hashing is SHA-256 with a
domain-separation byte (RFC 6962 §2.1):

- leaf hash  = SHA-256(0x00 || leaf)
- node hash  = SHA-256(0x01 || left || right)
- MTH({})    = SHA-256("")
- MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n])) for the largest power of two k < n

Proofs are lists of 32-byte node hashes in the order of RFC 6962 §2.1.1
(PATH, an audit path) and §2.1.2 (PROOF, a consistency proof); they are
checked with the algorithms of RFC 9162 §2.1.3.2 and §2.1.4.2. A verifier
returns ``False`` for anything that does not hold, never raises on bad input.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(leaf: bytes) -> bytes:
    """SHA-256(0x00 || leaf)."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n ≥ 2): k < n ≤ 2k."""
    return 1 << ((n - 1).bit_length() - 1)


def _mth(hashes: Sequence[bytes], lo: int, hi: int) -> bytes:
    if hi - lo == 1:
        return hashes[lo]
    mid = lo + _split(hi - lo)
    return node_hash(_mth(hashes, lo, mid), _mth(hashes, mid, hi))


def root(leaves: Sequence[bytes]) -> bytes:
    """The Merkle tree hash MTH of ``leaves`` (RFC 6962 §2.1)."""
    if not leaves:
        return EMPTY_ROOT
    return _mth([leaf_hash(leaf) for leaf in leaves], 0, len(leaves))


def _path(hashes: Sequence[bytes], m: int, lo: int, hi: int) -> list[bytes]:
    if hi - lo == 1:
        return []
    mid = lo + _split(hi - lo)
    if m < mid:
        return [*_path(hashes, m, lo, mid), _mth(hashes, mid, hi)]
    return [*_path(hashes, m, mid, hi), _mth(hashes, lo, mid)]


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path PATH(index, D[n]) of leaf ``index`` (RFC 6962 §2.1.1)."""
    if not 0 <= index < len(leaves):
        raise ValueError(f"leaf {index} is not in a tree of {len(leaves)}")
    return _path([leaf_hash(leaf) for leaf in leaves], index, 0, len(leaves))


def _subproof(hashes: Sequence[bytes], m: int, lo: int, hi: int, whole: bool) -> list[bytes]:
    n = hi - lo
    if m == n:
        return [] if whole else [_mth(hashes, lo, hi)]
    k = _split(n)
    if m <= k:
        return [*_subproof(hashes, m, lo, lo + k, whole), _mth(hashes, lo + k, hi)]
    return [*_subproof(hashes, m - k, lo + k, hi, False), _mth(hashes, lo, lo + k)]


def consistency_proof(leaves: Sequence[bytes], old_size: int) -> list[bytes]:
    """PROOF(old_size, D[n]): the tree of ``old_size`` leaves is a prefix (§2.1.2).

    Empty when ``old_size`` is 0 or n (nothing to prove).
    """
    n = len(leaves)
    if not 0 <= old_size <= n:
        raise ValueError(f"size {old_size} is not a prefix of a tree of {n}")
    if old_size in (0, n):
        return []
    return _subproof([leaf_hash(leaf) for leaf in leaves], old_size, 0, n, True)


def _well_formed(*hashes: bytes) -> bool:
    return all(isinstance(h, bytes) and len(h) == HASH_SIZE for h in hashes)


def verify_inclusion(
    leaf_digest: bytes, index: int, size: int, proof: Sequence[bytes], root_hash: bytes
) -> bool:
    """Whether ``proof`` shows the leaf hash ``leaf_digest`` at ``index`` of a tree.

    RFC 9162 §2.1.3.2; ``leaf_digest`` is ``leaf_hash(leaf)``.
    """
    if not 0 <= index < size or not _well_formed(leaf_digest, root_hash, *proof):
        return False
    fn, sn, r = index, size - 1, leaf_digest
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and hmac.compare_digest(r, root_hash)


def verify_consistency(
    old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes
) -> bool:
    """Whether ``proof`` shows the tree (old_size, old_root) is a prefix of (new_size, new_root).

    RFC 9162 §2.1.4.2. Equal sizes need an empty proof and equal roots; a
    tree of size 0 is a prefix of every tree (an empty proof).
    """
    if not 0 <= old_size <= new_size or not _well_formed(old_root, new_root, *proof):
        return False
    if old_size == new_size:
        return not proof and hmac.compare_digest(old_root, new_root)
    if old_size == 0:
        return not proof
    if not proof:
        return False
    nodes = list(proof)
    if old_size & (old_size - 1) == 0:  # an exact power of two: the old root is a node
        nodes.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = nodes[0]
    for c in nodes[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and hmac.compare_digest(fr, old_root) and hmac.compare_digest(sr, new_root)

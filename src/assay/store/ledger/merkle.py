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


def levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """The complete (perfect, aligned) subtree hashes of the tree, level by level.

    Level-wise comprehensions are the fastest way CPython has to hash a whole
    tree; every prefix's root and every audit path can then be read off it.
    """
    sha256 = hashlib.sha256
    level = [sha256(b"\x00" + leaf).digest() for leaf in leaves]
    levels = [level]
    while len(level) > 1:
        level = [sha256(b"\x01" + level[i] + level[i + 1]).digest()
                 for i in range(0, len(level) - 1, 2)]
        levels.append(level)
    return levels


def extend_levels(tree: list[list[bytes]], leaves: Sequence[bytes]) -> None:
    """Append ``leaves`` to ``tree`` (:func:`levels`' result) in place, hashing only what is new.

    Afterwards ``tree`` equals ``levels`` of all the leaves: each level gains
    the complete subtrees the new leaves close, nothing else is hashed again.
    """
    sha256 = hashlib.sha256
    if not tree:
        tree.append([])
    tree[0].extend(sha256(b"\x00" + leaf).digest() for leaf in leaves)
    height = 0
    while len(tree[height]) > 1:
        if height + 1 == len(tree):
            tree.append([])
        below, above = tree[height], tree[height + 1]
        above.extend(sha256(b"\x01" + below[i] + below[i + 1]).digest()
                     for i in range(2 * len(above), len(below) - 1, 2))
        height += 1


def range_hash(tree: list[list[bytes]], start: int, end: int) -> bytes:
    """MTH of leaves [start, end) where ``start`` is aligned to a power of two > end - start.

    ``tree`` is :func:`levels`' result. Such a range (a prefix ``[0, size)``
    is one) is a run of complete subtrees, largest first: its frontier.
    """
    nodes = []
    for height in range((end - start).bit_length() - 1, -1, -1):
        if (end - start) >> height & 1:
            nodes.append(tree[height][start >> height])
            start += 1 << height
    return frontier_root(nodes)


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path PATH(index, D[n]) of leaf ``index`` (RFC 6962 §2.1.1).

    Computed from the tree's complete subtrees, hashed level by level once
    (a receipt's proof over a large ledger is built in one pass, not by
    recursion): at each height the sibling is a complete subtree, the hash
    of the partial range at the tree's right edge, or absent (the node is
    promoted); the tests hold it to the RFC's recursive definition.
    """
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf {index} is not in a tree of {n}")
    return audit_path(levels(leaves), index, n)


def audit_path(tree: list[list[bytes]], index: int, n: int) -> list[bytes]:
    """PATH(index, D[n]) read off ``tree``, the :func:`levels` of ``n`` or more leaves.

    The first ``n`` leaves' complete subtrees are the same whatever follows
    them, so a tree kept and extended (:func:`extend_levels`) proves any
    prefix without hashing it again.
    """
    if not 0 <= index < n or not tree or len(tree[0]) < n:
        raise ValueError(f"leaf {index} is not in a tree of {n} held here")
    path = []
    for height in range(len(tree)):
        sibling = (index >> height) ^ 1
        start = sibling << height
        if start >= n:
            continue  # no right sibling at this height: the node is promoted
        end = min(start + (1 << height), n)
        if end - start == 1 << height:
            path.append(tree[height][sibling])
        else:
            path.append(range_hash(tree, start, end))
    return path


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


# Compact ranges ("frontiers"): a tree of size n is the concatenation of the
# perfect subtrees given by the set bits of n, largest (leftmost) first. Keeping
# their hashes lets a signer extend the tree by k leaves with O(k) hashing and a
# verifier compute the root at every checkpoint in one pass, instead of
# recomputing MTH from all leaves each time.


def extend_frontier(frontier: list[bytes], size: int, leaves: Sequence[bytes]) -> list[bytes]:
    """The frontier of the tree of ``size`` leaves (``frontier``) after appending ``leaves``.

    ``frontier`` holds one subtree hash per set bit of ``size``, largest
    first; it is not changed. A frontier that cannot be one of ``size``
    leaves raises ``ValueError`` (a stored frontier that was edited).
    """
    if size < 0 or len(frontier) != size.bit_count() or not _well_formed(*frontier):
        raise ValueError(f"not the frontier of a tree of {size} leaves")
    stack = list(frontier)
    sha256 = hashlib.sha256
    for leaf in leaves:
        node = sha256(b"\x00" + leaf).digest()
        merges = size
        while merges & 1:  # each trailing 1 bit closes a perfect subtree
            node = sha256(b"\x01" + stack.pop() + node).digest()
            merges >>= 1
        stack.append(node)
        size += 1
    return stack


def frontier_root(frontier: Sequence[bytes]) -> bytes:
    """The Merkle tree hash of the tree whose frontier this is (:data:`EMPTY_ROOT` if empty).

    RFC 6962 splits at the largest power of two, so MTH is the subtrees folded
    from the right: node(P1, node(P2, … node(Pk-1, Pk))).
    """
    if not frontier:
        return EMPTY_ROOT
    node = frontier[-1]
    for left in reversed(frontier[:-1]):
        node = node_hash(left, node)
    return node

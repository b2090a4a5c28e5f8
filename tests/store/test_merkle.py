"""The Merkle tree against the Certificate Transparency reference vectors, and properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.store.ledger import merkle
from assay.store.ledger.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

# Reference vectors, written here by value. Source: transparency-dev/merkle (formerly
# google/trillian's merkle package, from the certificate-transparency C++ tests),
# files testonly/constants.go (LeafInputs, NodeHashes, RootHashes) and
# proof/verify_test.go (inclusionProofs, consistencyProofs; leaf numbers there are
# 1-based, here 0-based).
LEAVES = [
    bytes.fromhex(h)
    for h in [
        "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]  # fmt: skip
ROOTS = {  # tree size -> root
    0: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
LEAF_HASHES = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
    "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
]
INCLUSION = [  # (leaf index, tree size, audit path)
    (0, 1, []),
    (0, 8, [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ]),
    (5, 8, [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ]),
]  # fmt: skip
CONSISTENCY = [  # (old size, new size, proof)
    (1, 1, []),
    (1, 8, [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ]),
    (6, 8, [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]),
    (2, 5, [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ]),
    (6, 7, [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]),
]  # fmt: skip


def _hx(hashes: list[str]) -> list[bytes]:
    return [bytes.fromhex(h) for h in hashes]


def _flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def test_empty_tree_is_the_hash_of_nothing() -> None:
    assert root([]) == EMPTY_ROOT == hashlib.sha256(b"").digest() == bytes.fromhex(ROOTS[0])


@pytest.mark.parametrize("size", range(9))
def test_roots_match_the_reference(size: int) -> None:
    assert root(LEAVES[:size]).hex() == ROOTS[size]


def test_leaf_hashes_match_the_reference() -> None:
    assert [leaf_hash(leaf).hex() for leaf in LEAVES] == LEAF_HASHES


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION)
def test_inclusion_proofs_match_the_reference(index: int, size: int, path: list[str]) -> None:
    assert inclusion_proof(LEAVES[:size], index) == _hx(path)
    r = bytes.fromhex(ROOTS[size])
    assert verify_inclusion(leaf_hash(LEAVES[index]), index, size, _hx(path), r)
    # The reference's corruptions: wrong index, size, leaf, root, extra or missing nodes.
    lh, proof = leaf_hash(LEAVES[index]), _hx(path)
    some = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")
    bad = [
        (lh, index - 1, size, proof, r), (lh, index + 1, size, proof, r),
        (lh, index ^ 2, size, proof, r), (lh, index, size * 2, proof, r),
        (lh, index, size // 2, proof, r), (leaf_hash(b"WrongLeaf"), index, size, proof, r),
        (lh, index, size, proof, EMPTY_ROOT), (lh, index, size, proof, some),
        (lh, index, size, [*proof, b""], r), (lh, index, size, [*proof, r], r),
        (lh, index, size, [b"", *proof], r), (lh, index, size, [r, *proof], r),
    ]  # fmt: skip
    if proof:
        bad.append((lh, index, size, proof[:-1], r))
    if len(proof) > 1:
        bad.append((lh, index, size, [proof[0], some, *proof[1:]], r))
    for args in bad:
        assert not verify_inclusion(*args), args


@pytest.mark.parametrize(("old", "new", "path"), CONSISTENCY)
def test_consistency_proofs_match_the_reference(old: int, new: int, path: list[str]) -> None:
    assert consistency_proof(LEAVES[:new], old) == _hx(path)
    r1, r2, proof = bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new]), _hx(path)
    assert verify_consistency(old, new, proof, r1, r2)
    if not proof:
        return
    bad = [
        (old - 1, new, proof, r1, r2), (old + 1, new, proof, r1, r2),
        (old ^ 2, new, proof, r1, r2), (old, new * 2, proof, r1, r2),
        (old, new // 2, proof, r1, r2), (old, new, proof, EMPTY_ROOT, r2),
        (old, new, proof, r1, EMPTY_ROOT), (old, new, proof, r2, r1), (old, new, [], r1, r2),
        (old, new, [*proof, b""], r1, r2), (old, new, [*proof, r1], r1, r2),
        (old, new, [*proof, r2], r1, r2), (old, new, [b"", *proof], r1, r2),
        (old, new, [r1, *proof], r1, r2), (old, new, [r2, *proof], r1, r2),
        (old, new, [proof[0], *proof], r1, r2), (old, new, proof[:-1], r1, r2),
    ]  # fmt: skip
    for args in bad:
        assert not verify_consistency(*args), args


def test_trivial_and_impossible_consistency() -> None:
    r1, r2 = bytes.fromhex(ROOTS[1]), bytes.fromhex(ROOTS[2])
    assert verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    assert verify_consistency(0, 2, [], EMPTY_ROOT, r2)
    assert not verify_consistency(1, 1, [], r1, r2)
    assert not verify_consistency(2, 1, [], r2, r1)
    assert not verify_consistency(1, 1, [EMPTY_ROOT], r1, r1)
    assert not verify_consistency(0, 1, [EMPTY_ROOT], EMPTY_ROOT, r1)


def test_bad_arguments_raise_for_provers_and_fail_for_verifiers() -> None:
    with pytest.raises(ValueError):
        inclusion_proof(LEAVES, 8)
    with pytest.raises(ValueError):
        consistency_proof(LEAVES, 9)
    assert not verify_inclusion(leaf_hash(b""), 0, 0, [], EMPTY_ROOT)
    assert not verify_inclusion(b"short", 0, 1, [], b"short")


trees = st.lists(st.binary(max_size=12), min_size=1, max_size=70)


@settings(max_examples=150, deadline=None)
@given(trees, st.data())
def test_every_inclusion_proof_verifies_and_any_flipped_bit_fails(
    leaves: list[bytes], data: st.DataObject
) -> None:
    n = len(leaves)
    r = root(leaves)
    index = data.draw(st.integers(0, n - 1))
    proof = inclusion_proof(leaves, index)
    assert verify_inclusion(leaf_hash(leaves[index]), index, n, proof, r)
    # Flip one bit of the leaf, of one proof node or of the root.
    target = data.draw(st.sampled_from(["leaf", "root", "node"] if proof else ["leaf", "root"]))
    leaf = leaves[index] or b"\x00"  # an empty leaf has no bit: use a one-byte leaf instead
    if target == "leaf":
        bit = data.draw(st.integers(0, len(leaf) * 8 - 1))
        if leaves[index]:
            assert not verify_inclusion(leaf_hash(_flip(leaf, bit)), index, n, proof, r)
        else:
            assert not verify_inclusion(leaf_hash(leaf), index, n, proof, r)
    elif target == "root":
        bit = data.draw(st.integers(0, 255))
        assert not verify_inclusion(leaf_hash(leaves[index]), index, n, proof, _flip(r, bit))
    else:
        k = data.draw(st.integers(0, len(proof) - 1))
        bit = data.draw(st.integers(0, 255))
        bad = [*proof[:k], _flip(proof[k], bit), *proof[k + 1 :]]
        assert not verify_inclusion(leaf_hash(leaves[index]), index, n, bad, r)


@settings(max_examples=150, deadline=None)
@given(trees, st.data())
def test_consistency_proofs_verify_and_fail_when_tampered(
    leaves: list[bytes], data: st.DataObject
) -> None:
    n = len(leaves)
    old = data.draw(st.integers(0, n))
    proof = consistency_proof(leaves, old)
    r1, r2 = root(leaves[:old]), root(leaves)
    assert verify_consistency(old, n, proof, r1, r2)
    if old in (0, n):
        return
    assert not verify_consistency(old, n, proof, _flip(r1, data.draw(st.integers(0, 255))), r2)
    assert not verify_consistency(old, n, proof, r1, _flip(r2, data.draw(st.integers(0, 255))))
    k = data.draw(st.integers(0, len(proof) - 1))
    bad = [*proof[:k], _flip(proof[k], data.draw(st.integers(0, 255))), *proof[k + 1 :]]
    assert not verify_consistency(old, n, bad, r1, r2)
    other = data.draw(st.integers(1, n).filter(lambda m: m != old))
    assert not verify_consistency(other, n, proof, r1, r2)


# Compact ranges (frontiers): extending one leaf at a time, or in any chunks, gives MTH.

_LEAVES = [bytes([i % 256, i // 256]) * 3 for i in range(130)]


def test_a_frontier_has_the_root_of_every_size() -> None:
    frontier: list[bytes] = []
    assert merkle.frontier_root(frontier) == merkle.EMPTY_ROOT
    for size, leaf in enumerate(_LEAVES):
        frontier = merkle.extend_frontier(frontier, size, [leaf])
        assert len(frontier) == (size + 1).bit_count()
        assert merkle.frontier_root(frontier) == merkle.root(_LEAVES[: size + 1]), size + 1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=8), max_size=80), st.data())
def test_extending_in_chunks_gives_the_root_of_all(leaves: list[bytes],
                                                   data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(leaves)), max_size=5)))
    frontier: list[bytes] = []
    start = 0
    for cut in [*cuts, len(leaves)]:
        before = list(frontier)
        extended = merkle.extend_frontier(frontier, start, leaves[start:cut])
        assert frontier == before  # the input is not changed in place
        assert merkle.frontier_root(extended) == merkle.root(leaves[:cut])
        frontier, start = extended, cut
    assert merkle.frontier_root(frontier) == merkle.root(leaves)


def test_a_frontier_that_cannot_be_of_its_size_is_refused() -> None:
    three = merkle.extend_frontier([], 0, _LEAVES[:3])
    given_in = list(three)
    merkle.extend_frontier(three, 3, _LEAVES[3:5])
    assert three == given_in  # not changed in place
    for frontier, size in ((three, 4), (three[:1], 3), ([b"short"] * 2, 3), ([], -1)):
        with pytest.raises(ValueError):
            merkle.extend_frontier(frontier, size, [b"x"])


def _recursive_path(hashes: list[bytes], m: int, lo: int, hi: int) -> list[bytes]:
    """PATH(m, D[lo:hi]) exactly as RFC 6962 §2.1.1 defines it (the reference)."""
    if hi - lo == 1:
        return []
    k = 1 << ((hi - lo - 1).bit_length() - 1)
    mid = lo + k
    if m < mid:
        return [*_recursive_path(hashes, m, lo, mid), merkle.root(_LEAVES[mid:hi])]
    return [*_recursive_path(hashes, m, mid, hi), merkle.root(_LEAVES[lo:mid])]


def test_inclusion_proofs_are_the_rfc_definition_for_every_leaf_of_every_size() -> None:
    for size in range(1, 70):
        for index in range(size):
            assert merkle.inclusion_proof(_LEAVES[:size], index) == \
                _recursive_path([], index, 0, size), (index, size)

"""The ledger chain: every kind of tampering is caught and names the first bad entry."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.canonical import canonical, digest
from assay.store import (
    GENESIS,
    KINDS,
    Entry,
    TreeHead,
    append,
    head_message,
    leaves,
    sign_head,
    verify,
    verify_head,
)
from assay.store.ledger import merkle
from assay.store.ledger.chain import _entry_bytes, entry_hash, walk

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def build(items: list[tuple[Any, Any]]) -> tuple[list[Entry], dict[str, bytes]]:
    """A ledger and its content store (canonical JSON bytes by digest)."""
    entries: list[Entry] = []
    contents: dict[str, bytes] = {}
    for kind, content in items:
        entry = append(entries, kind, content)
        entries.append(entry)
        contents[entry.content_digest] = canonical(content)
    return entries, contents


def sample() -> tuple[list[Entry], dict[str, bytes]]:
    """One entry of every kind, each with its own content."""
    return build(
        [(kind, {"kind": kind, "n": i, "text": f"said {i}"}) for i, kind in enumerate(KINDS)]
    )


def _edit_hex(value: str) -> str:
    """``value`` with its last hex digit changed (one byte of the text)."""
    return value[:-1] + ("0" if value[-1] != "0" else "1")


def forged(entries: list[Entry], at: int, content: Any = "forged") -> Entry:
    """A well-formed entry claiming position ``at``, linked to the entry before it."""
    return append(entries[:at], "gate", content)


def test_entry_hash_is_the_digest_of_its_four_fields() -> None:
    entries, _ = sample()
    first = entries[0]
    assert first.index == 0 and first.prev_hash == GENESIS == "sha256:" + "0" * 64
    expected = (
        b'{"content_digest":"' + first.content_digest.encode() + b'","index":0,'
        b'"kind":"run-registered","prev_hash":"sha256:' + b"0" * 64 + b'"}'
    )
    assert first.hash == "sha256:" + hashlib.sha256(expected).hexdigest()
    assert all(e.prev_hash == p.hash for p, e in zip(entries, entries[1:], strict=False))


def test_an_untouched_ledger_verifies_with_and_without_contents() -> None:
    entries, contents = sample()
    assert verify(entries).ok
    assert verify(entries, contents).ok
    assert verify(entries, contents, sign_head(entries, KEY)).ok
    assert verify([]).ok


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ledger entry kind"):
        append([], "verdict", {})  # type: ignore[arg-type]


@pytest.mark.parametrize("position", range(len(KINDS)))
def test_editing_one_byte_of_content_is_caught(position: int) -> None:
    entries, contents = sample()
    key = entries[position].content_digest
    raw = bytearray(contents[key])
    raw[raw.index(b"said")] ^= 1  # "said" -> "raid"
    contents[key] = bytes(raw)
    result = verify(entries, contents)
    assert not result.ok and result.first_bad == position, result
    assert "content" in result.reason


@pytest.mark.parametrize("field", ["hash", "content_digest", "prev_hash"])
@pytest.mark.parametrize("position", range(len(KINDS)))
def test_editing_one_byte_of_an_entry_is_caught(position: int, field: str) -> None:
    entries, contents = sample()
    entry = entries[position]
    entries[position] = dataclasses.replace(entry, **{field: _edit_hex(getattr(entry, field))})
    result = verify(entries, contents)
    assert not result.ok and result.first_bad == position, result


@pytest.mark.parametrize("position", range(len(KINDS)))
def test_editing_the_kind_or_index_is_caught(position: int) -> None:
    entries, _ = sample()
    other = KINDS[(position + 1) % len(KINDS)]
    for change in ({"kind": other}, {"kind": "nonsense"}, {"index": position + 1}):
        tampered = list(entries)
        tampered[position] = dataclasses.replace(entries[position], **change)  # type: ignore[arg-type]
        assert verify(tampered).first_bad == position


@pytest.mark.parametrize("position", range(len(KINDS)))
def test_deleting_an_entry_is_caught(position: int) -> None:
    entries, contents = sample()
    head = sign_head(entries, KEY)
    del entries[position]
    result = verify(entries, contents, head)
    assert not result.ok and result.first_bad == position, result


@pytest.mark.parametrize("position", range(len(KINDS) - 1))
def test_reordering_entries_is_caught(position: int) -> None:
    entries, contents = sample()
    entries[position], entries[position + 1] = entries[position + 1], entries[position]
    result = verify(entries, contents)
    assert not result.ok and result.first_bad == position, result
    entries, _ = sample()
    entries[position], entries[-1] = entries[-1], entries[position]
    assert verify(entries).first_bad == position


@pytest.mark.parametrize("position", range(len(KINDS)))
def test_inserting_an_entry_is_caught(position: int) -> None:
    entries, contents = sample()
    # A copy of another entry slipped in: it does not hold where it stands.
    copied = list(entries)
    copied.insert(position, entries[(position + 3) % len(entries)])
    assert verify(copied, contents).first_bad == position
    # A well-formed forgery holds itself, but the entry it displaced no longer does.
    forgery = list(entries)
    forgery.insert(position, forged(entries, position))
    result = verify(forgery, contents)
    assert not result.ok and result.first_bad == position + 1, result
    assert "index" in result.reason


def test_a_rewritten_chain_is_caught_by_the_signed_head() -> None:
    entries, contents = sample()
    head = sign_head(entries, KEY)
    rewritten = entries[:3]
    for kind, content in [("gate", "other"), ("review", "other"), ("run-sealed", "x")]:
        rewritten.append(append(rewritten, kind, content))
    while len(rewritten) < head.size:  # as long as the ledger the head signed, one per kind
        rewritten.append(append(rewritten, "erasure", f"y{len(rewritten)}"))
    assert len(rewritten) >= head.size and verify(rewritten).ok
    result = verify(rewritten, None, head)
    assert not result.ok and result.first_bad is None and "rewritten" in result.reason


def test_appending_after_a_head_still_verifies_against_it() -> None:
    entries, contents = sample()
    head = sign_head(entries, KEY)
    entries.append(append(entries, "review", {"ok": True}))
    assert verify(entries, None, head).ok
    later = sign_head(entries, KEY)
    proof = merkle.consistency_proof(leaves(entries), head.size)
    assert merkle.verify_consistency(head.size, later.size, proof, head.root, later.root)


def test_erased_content_keeps_the_ledger_verifiable() -> None:
    entries, contents = sample()
    erased = entries[1].content_digest
    del contents[erased]
    entries.append(append(entries, "erasure", {"digest": erased, "subject": "s-1"}))
    contents[entries[-1].content_digest] = canonical({"digest": erased, "subject": "s-1"})
    result = verify(entries, contents, sign_head(entries, KEY))
    assert result.ok and result.absent == (1,)


def test_content_may_be_given_as_a_json_value() -> None:
    entries, _ = sample()
    values = {digest(v): v for v in ({"kind": k, "n": i, "text": f"said {i}"}
                                     for i, k in enumerate(KINDS))}  # fmt: skip
    assert verify(entries, values).ok
    values[entries[2].content_digest] = {"kind": "run-sealed", "n": 2, "text": "said 3"}
    assert verify(entries, values).first_bad == 2


def test_signed_heads_verify_and_fail_when_any_bit_flips() -> None:
    entries, _ = sample()
    head = sign_head(entries, KEY)
    public = KEY.public_key()
    assert head.size == len(entries) and head.root == merkle.root(leaves(entries))
    assert head_message(head.size, head.root).startswith(f"assay-ledger\n{len(KINDS)}\n".encode())
    assert verify_head(head, public)
    assert not verify_head(dataclasses.replace(head, size=head.size - 1), public)
    assert not verify_head(head, Ed25519PrivateKey.generate().public_key())
    for field in ("root", "signature"):
        value: bytes = getattr(head, field)
        for bit in range(0, len(value) * 8, 37):
            flipped = bytearray(value)
            flipped[bit // 8] ^= 1 << (bit % 8)
            assert not verify_head(dataclasses.replace(head, **{field: bytes(flipped)}), public)


def test_every_entry_has_an_inclusion_proof_against_the_head() -> None:
    entries, _ = sample()
    head = sign_head(entries, KEY)
    tree = leaves(entries)
    for i, leaf in enumerate(tree):
        proof = merkle.inclusion_proof(tree, i)
        assert merkle.verify_inclusion(merkle.leaf_hash(leaf), i, head.size, proof, head.root)


# Property: a random ledger, one random tampering, caught at the predicted entry.

contents_st = st.one_of(
    st.text(min_size=1, max_size=10),
    st.dictionaries(
        st.sampled_from(["case", "verdict", "n"]), st.integers(0, 99) | st.text(max_size=5)
    ),
)
ledgers = st.lists(st.tuples(st.sampled_from(KINDS), contents_st), min_size=1, max_size=25)


def _tamper(
    data: st.DataObject, entries: list[Entry], contents: dict[str, bytes]
) -> tuple[str, int]:
    """Tamper in place; return what was done and the position verify must name."""
    n = len(entries)
    op = data.draw(st.sampled_from(["content", "field", "delete", "swap", "insert", "forge"]))
    i = data.draw(st.integers(0, n - 1))
    if op == "content":
        key = entries[i].content_digest
        raw = bytearray(contents[key])
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
        contents[key] = bytes(raw)
        # Another entry with the same content shares the store key: the first one is named.
        return op, next(p for p, e in enumerate(entries) if e.content_digest == key)
    if op == "field":
        name = data.draw(st.sampled_from(["hash", "content_digest", "prev_hash"]))
        entries[i] = dataclasses.replace(entries[i], **{name: _edit_hex(getattr(entries[i], name))})
        return op, i
    if op == "delete":
        del entries[i]
        return op, i
    if op == "swap":
        j = data.draw(st.integers(0, n - 1).filter(lambda j: j != i)) if n > 1 else i
        if j == i:
            del entries[i]
            return "delete", i
        entries[i], entries[j] = entries[j], entries[i]
        return op, min(i, j)
    if op == "insert":
        k = data.draw(st.integers(0, n - 1))
        entries.insert(i, entries[k])
        return op, i + 1 if k == i else i
    entries.insert(i, forged(entries, i, data.draw(contents_st)))
    return op, i + 1


@settings(max_examples=300, deadline=None)
@given(ledgers, st.data())
def test_any_single_tampering_is_caught_at_the_first_bad_entry(
    items: list[tuple[Any, Any]], data: st.DataObject
) -> None:
    entries, contents = build(items)
    head: TreeHead = sign_head(entries, KEY)
    assert verify(entries, contents, head).ok
    op, expected = _tamper(data, entries, contents)
    result = verify(entries, contents, head)
    assert not result.ok, op
    assert result.first_bad == expected, (op, result)


@settings(max_examples=100, deadline=None)
@given(ledgers, st.data())
def test_erasing_any_contents_keeps_verify_green(
    items: list[tuple[Any, Any]], data: st.DataObject
) -> None:
    entries, contents = build(items)
    erased = data.draw(st.sets(st.sampled_from(sorted(contents))))
    kept = {k: v for k, v in contents.items() if k not in erased}
    result = verify(entries, kept, sign_head(entries, KEY))
    assert result.ok
    assert {entries[p].content_digest for p in result.absent} == erased


# entry_hash's format-string fast path gives exactly the canonical (JCS) bytes.

_hex64 = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h)
_odd_text = st.one_of(_hex64, st.text(max_size=80), _hex64.map(str.upper),
                      _hex64.map(lambda h: h + '"'), _hex64.map(lambda h: h[:-1] + "\\"))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.integers(0, 2**53 - 1), st.integers(-5, 5), st.booleans()),
       st.one_of(st.sampled_from(KINDS), st.text(max_size=20)), _odd_text, _odd_text)
def test_the_fast_entry_hash_is_the_canonical_one(index: int, kind: str, content_digest: str,
                                                  prev_hash: str) -> None:
    fields = {"content_digest": content_digest, "index": index, "kind": kind,
              "prev_hash": prev_hash}
    try:
        expected = digest(fields)
    except ValueError:  # e.g. a lone surrogate, which JCS cannot write
        return
    assert entry_hash(index, kind, content_digest, prev_hash) == expected
    fast = (type(index) is int and index >= 0 and kind in KINDS
            and all(re.fullmatch("sha256:[0-9a-f]{64}", d) for d in (content_digest, prev_hash)))
    if fast:
        assert _entry_bytes(index, kind, content_digest, prev_hash) == canonical(fields)


def test_verify_takes_the_slow_path_for_odd_but_valid_fields() -> None:
    """An entry whose fields the fast path does not take still verifies when it holds."""
    odd = Entry(0, "gate", "sha256:" + "A" * 64, GENESIS,
                entry_hash(0, "gate", "sha256:" + "A" * 64, GENESIS))
    assert verify([odd], {}).ok and verify([odd], {}).absent == (0,)
    assert verify([dataclasses.replace(odd, hash=_edit_hex(odd.hash))], {}).first_bad == 0


def test_one_pass_checks_the_root_of_every_head() -> None:
    entries, contents = sample()
    rows = [(e.index, e.kind, e.content_digest, e.prev_hash, e.hash) for e in entries]
    roots = {n: merkle.root(leaves(entries[:n])) for n in range(len(entries) + 1)}
    assert walk(rows, contents, roots) == (verify(entries, contents), len(entries))
    bad = {**roots, 4: roots[3]}
    result, _ = walk(rows, contents, bad)
    assert not result.ok and result.first_bad is None
    assert result.reason == "the first 4 entries do not have the root of head 4 (rewritten)"

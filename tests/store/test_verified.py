"""A verified prefix of the ledger, extended over what is new (the workbench's ledger page).

``verify_new`` must agree with a whole ``Ledger.verify`` on everything it
reads — new entries, new heads, the last entry it verified before — and
hand anything wrong to it, so the reason is the command's. On SQLite and
on a real PostgreSQL.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.ledger import merkle
from assay.store.ledger.chain import head_message, leaves
from assay.store.ledger.heads import record_head
from assay.store.ledger.verified import Verified, verify_all, verify_new

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def add(store: Store, n: int, *, head: Ed25519PrivateKey | None = KEY) -> None:
    start = len(store.ledger.entries())
    store.ledger.append_many([("review", {"n": start + i}) for i in range(n)])
    if head is not None:
        with store.engine.begin() as connection:
            record_head(connection, head)


def edit(store: Store, index: int, **values: str) -> None:
    with store.engine.begin() as connection:
        connection.execute(schema.ledger.update().where(schema.ledger.c.index == index)
                           .values(**values))


def whole(store: Store) -> tuple[bool, int | None, str, int]:
    result, count = store.ledger.verify(KEY.public_key())
    return result.ok, result.first_bad, result.reason, count


def test_new_entries_and_heads_extend_the_prefix_as_a_whole_check_would(store: Store) -> None:
    add(store, 120)
    first = verify_all(store, KEY.public_key())
    assert first.ok and first.entries == 120 and first.heads == 1
    assert first.tree is not None and first.key is not None
    add(store, 37)
    add(store, 5, head=None)
    later = verify_new(store, first, KEY.public_key())
    assert later.ok and later.entries == 162 and later.heads == 2
    assert later.full_at == first.full_at and later.checked_at >= first.checked_at
    assert whole(store) == (True, None, "", 162)
    # The tree kept is the whole ledger's, as if hashed afresh.
    assert later.tree == merkle.levels(leaves(store.ledger.entries()))
    # Nothing new: nothing changes but the time.
    again = verify_new(store, later, KEY.public_key())
    assert (again.ok, again.entries, again.tree) == (True, 162, later.tree)


def test_a_new_entry_that_does_not_hold_is_named_as_the_command_names_it(
        store: Store) -> None:
    add(store, 40)
    known = verify_all(store, KEY.public_key())
    add(store, 10)
    edit(store, 44, kind="gate")
    found = verify_new(store, known, KEY.public_key())
    assert not found.ok and found.result.first_bad == 44
    assert (False, 44, found.result.reason, 50) == whole(store)
    assert found.full_at > known.full_at  # handed to a whole check
    assert verify_new(store, found, KEY.public_key()) is found  # broken stays broken


def test_the_last_verified_entry_is_read_again(store: Store) -> None:
    add(store, 30)
    known = verify_all(store, KEY.public_key())
    edit(store, 29, kind="gate")
    found = verify_new(store, known, KEY.public_key())
    assert not found.ok and found.result.first_bad == 29


def test_an_older_edit_waits_for_the_whole_check(store: Store) -> None:
    add(store, 30)
    known = verify_all(store, KEY.public_key())
    edit(store, 3, kind="gate")
    assert verify_new(store, known, KEY.public_key()).ok  # the short path reads from 29 on
    again = verify_all(store, KEY.public_key())
    assert not again.ok and again.result.first_bad == 3


def test_a_new_head_by_another_key_is_refused(store: Store) -> None:
    add(store, 20)
    known = verify_all(store, KEY.public_key())
    add(store, 4, head=OTHER)
    found = verify_new(store, known, KEY.public_key())
    assert not found.ok and "not signed by the local key" in found.result.reason


def test_a_new_head_over_another_root_is_refused(store: Store) -> None:
    add(store, 20)
    known = verify_all(store, KEY.public_key())
    add(store, 3)  # then the new head is re-signed over a root that is not the entries'
    wrong = merkle.root([b"\x00" * 32] * 23)
    with store.engine.begin() as connection:
        connection.execute(schema.ledger_heads.update().where(schema.ledger_heads.c.size == 23)
                           .values(root=wrong.hex(), signature=base64.b64encode(
                               KEY.sign(head_message(23, wrong))).decode("ascii")))
    found = verify_new(store, known, KEY.public_key())
    assert not found.ok and "head 23" in found.result.reason
    assert found.result.reason == store.ledger.verify(KEY.public_key())[0].reason


def test_a_dropped_tail_is_read_whole_again(store: Store) -> None:
    add(store, 25, head=None)
    known = verify_all(store, None)
    with store.engine.begin() as connection:
        connection.execute(schema.ledger.delete().where(schema.ledger.c.index >= 20))
    store.ledger.append_many([("review", {"n": "again"})])  # links to entry 19: it holds
    found = verify_new(store, known, None)
    assert found.ok and found.entries == 21 and found.full_at > known.full_at


def test_an_empty_ledger_verifies_and_extends(store: Store) -> None:
    known = verify_all(store, None)
    assert known.ok and known.entries == 0 and known.tree == [[]]
    add(store, 3)
    later = verify_new(store, known, None)
    assert later.ok and later.entries == 3 and later.heads == 1
    assert isinstance(later, Verified)


def test_contents_are_checked_for_new_entries(store: Store) -> None:
    add(store, 10)
    known = verify_all(store, KEY.public_key())
    add(store, 2)
    newest = store.ledger.entries()[-1]
    with store.engine.begin() as connection:
        connection.execute(schema.blobs.update()
                           .where(schema.blobs.c.digest == newest.content_digest)
                           .values(content=b'{"n":"edited"}'))
    found = verify_new(store, known, KEY.public_key())
    assert not found.ok and found.result.first_bad == 11
    assert "content does not match" in found.result.reason
    # Erased content is no fault, and is counted.
    with store.engine.begin() as connection:
        connection.execute(schema.blobs.update()
                           .where(schema.blobs.c.digest == newest.content_digest)
                           .values(content=None))
    assert verify_all(store, KEY.public_key()).erased == 1


@pytest.mark.parametrize("sizes", [(0, 1), (1, 1), (5, 3), (8, 8), (13, 50), (64, 1), (100, 157)])
def test_a_tree_extended_in_place_is_the_tree_of_all_its_leaves(sizes: tuple[int, int]) -> None:
    first, more = sizes
    all_leaves = [bytes([i % 256, i // 256]) * 16 for i in range(first + more)]
    tree = merkle.levels(all_leaves[:first])
    merkle.extend_levels(tree, all_leaves[first:first + more // 2])
    merkle.extend_levels(tree, all_leaves[first + more // 2:])
    assert tree == merkle.levels(all_leaves)
    # Any prefix's proof is read off the longer tree as off its own.
    for size in {1, first or 1, first + more}:
        for index in {0, size // 2, size - 1}:
            assert merkle.audit_path(tree, index, size) == \
                merkle.inclusion_proof(all_leaves[:size], index)
    with pytest.raises(ValueError):
        merkle.audit_path(tree, 0, first + more + 1)


def test_the_whole_check_in_a_process_of_its_own_sends_what_it_found(
        store: Store, db_url: str) -> None:
    import multiprocessing

    from assay.store.ledger.heads import raw_public_key
    from assay.store.ledger.verified import verify_all_sent

    add(store, 30)
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=verify_all_sent,
                              args=(sending, db_url, raw_public_key(KEY)), daemon=True)
    process.start()
    sending.close()
    kind, found = receiving.recv()
    process.join(timeout=60)
    assert kind == "ok" and found.ok and found.entries == 30
    assert found.tree == verify_all(store, KEY.public_key()).tree
    # A store that cannot be opened: the error's type, never its message.
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=verify_all_sent,
                              args=(sending, "nosuchdialect://x", None), daemon=True)
    process.start()
    sending.close()
    kind, error = receiving.recv()
    process.join(timeout=60)
    assert kind == "error" and isinstance(error, str) and "://" not in error

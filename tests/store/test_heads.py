"""Signed tree heads in the store: recorded incrementally, checked by verify, published.

The same tests on SQLite and on a real PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assay.cli import main
from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.ledger import merkle
from assay.store.ledger.chain import head_message, leaves
from assay.store.ledger.heads import (
    SCHEMA,
    Frontier,
    StoredHead,
    frontier_of,
    published,
    raw_public_key,
    read_published,
    record_head,
    stored_heads,
)

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def add(store: Store, n: int) -> None:
    start = len(store.ledger.entries())
    store.ledger.append_many([("review", {"n": start + i}) for i in range(n)])


def record(store: Store, key: Ed25519PrivateKey = KEY) -> int:
    with store.engine.begin() as connection:
        return record_head(connection, key).size


def heads(store: Store) -> list[StoredHead]:
    with store.engine.connect() as connection:
        return stored_heads(connection)


def change(store: Store, statement: sa.Executable) -> None:
    with store.engine.begin() as connection:
        connection.execute(statement)


def test_heads_extend_the_stored_frontier_and_sign_the_root(store: Store) -> None:
    for n in (1, 4, 3, 9):  # sizes 1, 5, 8, 17
        add(store, n)
        record(store)
    entries = store.ledger.entries()
    found = heads(store)
    assert [h.size for h in found] == [1, 5, 8, 17]
    for row in found:
        head, raw = row.parsed()  # type: ignore[misc]
        assert raw == raw_public_key(KEY)
        assert head.root == merkle.root(leaves(entries[: row.size]))
        KEY.public_key().verify(head.signature, head_message(head.size, head.root))
        assert row.frontier_hashes() == merkle.extend_frontier([], 0, leaves(entries[:row.size]))
    result, count = store.ledger.verify(KEY.public_key())
    assert result.ok and count == 17 and result.heads == 4, result.reason


def test_nothing_new_returns_the_stored_head(store: Store) -> None:
    add(store, 3)
    with store.engine.begin() as connection:
        first = record_head(connection, KEY)
    with store.engine.begin() as connection:
        again = record_head(connection, OTHER)  # same size: the stored head, not a new one
    assert again == first and len(heads(store)) == 1


def test_a_followed_frontier_gives_the_head_of_the_whole_ledger(store: Store) -> None:
    # The writer follows the ledger batch by batch (frontier_of) while others
    # append too, and signs at the seal from what it followed.
    add(store, 3)
    record(store)  # a stored head at 3
    known = None
    for n in (4, 1, 6):
        add(store, n)
        with store.engine.begin() as connection:
            known = frontier_of(connection, known)
        add(store, 2)  # another process's entries, after what was followed
    assert known is not None and known.size == 3 + 4 + 2 + 1 + 2 + 6
    entries = store.ledger.entries()
    assert list(known.nodes) == merkle.extend_frontier([], 0, leaves(entries[:known.size]))
    add(store, 1)
    with store.engine.begin() as connection:
        head = record_head(connection, KEY, known)
    entries = store.ledger.entries()
    assert head.size == len(entries) == 21
    assert head.root == merkle.root(leaves(entries))
    result, count = store.ledger.verify(KEY.public_key())
    assert result.ok and count == 21 and result.heads == 2, result.reason


def test_a_followed_frontier_is_what_the_head_extends(store: Store) -> None:
    # What the writer followed is used, not read again: a frontier that does
    # not match the entries gives a head the ledger's verification refuses.
    add(store, 4)
    bogus = Frontier(4, (b"\x01" * 32,), store.ledger.entries()[3].hash)
    add(store, 1)
    with store.engine.begin() as connection:
        head = record_head(connection, KEY, bogus)
    assert head.size == 5 and head.root != merkle.root(leaves(store.ledger.entries()))
    assert not store.ledger.verify(KEY.public_key())[0].ok
    # One that covers less than the newest stored head is not used.
    with store.engine.begin() as connection:
        later = record_head(connection, KEY, Frontier(0, ()))
    assert later == head


def test_a_followed_frontier_whose_tail_changed_is_not_extended(store: Store) -> None:
    # Entries dropped or rewritten since the writer read them: the head is
    # folded from the stored ledger as it is, not from the stale range.
    add(store, 6)
    with store.engine.begin() as connection:
        known = frontier_of(connection)
    assert known.size == 6 and known.last == store.ledger.entries()[5].hash
    change(store, schema.ledger.delete().where(schema.ledger.c.index >= 4))
    store.ledger.append_many([("review", {"other": i}) for i in range(3)])  # 4..6 again
    assert store.ledger.entries()[5].hash != known.last
    with store.engine.begin() as connection:
        head = record_head(connection, KEY, known)
    entries = store.ledger.entries()
    assert head.size == 7 and head.root == merkle.root(leaves(entries))


def test_an_empty_ledger_has_a_head_of_the_empty_tree(store: Store) -> None:
    with store.engine.begin() as connection:
        head = record_head(connection, KEY)
    assert (head.size, head.root) == (0, merkle.EMPTY_ROOT)
    assert store.ledger.verify()[0].ok


def test_an_edited_frontier_is_not_extended(store: Store) -> None:
    add(store, 3)
    record(store)
    change(store, schema.ledger_heads.update().values(frontier=json.dumps(["00" * 32] * 2)))
    add(store, 2)
    record(store)
    entries = store.ledger.entries()
    newest = heads(store)[-1].parsed()
    assert newest is not None and newest[0].root == merkle.root(leaves(entries))


def test_a_head_signed_by_another_key_or_edited_fails(store: Store) -> None:
    add(store, 3)
    record(store)
    add(store, 2)
    record(store, OTHER)
    result, _ = store.ledger.verify()
    assert not result.ok and result.reason == "head 5: not signed by one key (re-signed)"
    result, _ = store.ledger.verify(OTHER.public_key())
    assert result.reason == "head 3: not signed by the local key (re-signed)"
    h = schema.ledger_heads.c
    change(store, schema.ledger_heads.delete().where(h.size == 5))
    root = heads(store)[0].root
    change(store, schema.ledger_heads.update().where(h.size == 3)
           .values(root=root[:-1] + ("0" if root[-1] != "0" else "1")))
    result, _ = store.ledger.verify()
    assert result.reason == "head 3: its signature does not hold (edited)"
    change(store, schema.ledger_heads.update().where(h.size == 3).values(signature="!"))
    assert store.ledger.verify()[0].reason == "head 3: malformed (edited)"


def test_a_rewritten_tail_is_caught_by_the_head(store: Store) -> None:
    add(store, 6)
    record(store)
    entries = store.ledger.entries()
    # Rewrite entry 4 on: a chain that holds by itself, without the key.
    change(store, schema.ledger.delete().where(schema.ledger.c.index >= 4))
    store.ledger.append_many([("review", {"rewritten": i}) for i in range(2)])
    assert store.ledger.entries()[3] == entries[3]
    result, _ = store.ledger.verify(KEY.public_key())
    assert not result.ok and result.first_bad is None
    assert result.reason == "the first 6 entries do not have the root of head 6 (rewritten)"


def test_a_truncated_ledger_names_the_first_missing_entry(store: Store) -> None:
    add(store, 6)
    record(store)
    change(store, schema.ledger.delete().where(schema.ledger.c.index >= 4))
    result, count = store.ledger.verify()
    assert (result.ok, result.first_bad, count) == (False, 4, 4)
    assert result.reason == "entry 4: missing (the newest head covers 6 entries)"


def test_the_published_head_format_round_trips() -> None:
    from assay.store.ledger.chain import sign_head

    head = sign_head([], KEY)
    data = published(head, raw_public_key(KEY))
    assert data["schema"] == SCHEMA and data["fingerprint"].startswith("sha256:")
    assert read_published(json.loads(json.dumps(data))) == (head, raw_public_key(KEY))
    for bad in (None, {}, {**data, "schema": "x"}, {**data, "size": -1}, {**data, "size": True},
                {**data, "root": "00"}, {**data, "public_key": "AAAA"}, {**data, "signature": 1}):
        with pytest.raises(ValueError):
            read_published(bad)


def _cli(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, list(args))
    return done.exit_code, done.output


def test_a_published_head_catches_a_rewrite_that_replaced_the_stored_heads(
        store: Store, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_LEDGER_KEY", str(tmp_path / "keys" / "ledger.key"))
    add(store, 5)
    code, out = _cli("ledger", "head", "--db", db_url, "--out", str(tmp_path / "head.json"))
    assert code == 0 and out == f"head: {tmp_path / 'head.json'} (5 entries)\n", out
    head = json.loads((tmp_path / "head.json").read_text())
    assert head["size"] == 5 and set(head) == {"schema", "size", "root", "signature",
                                               "public_key", "fingerprint"}
    assert _cli("ledger", "verify", "--db", db_url, "--head", str(tmp_path / "head.json")) \
        == (0, "ledger: 5 entries verify, 1 head, and the published head\n")

    # Someone with write access but without the key: rewrite from entry 2, drop the
    # stored heads, sign new ones with their own key.
    change(store, schema.ledger.delete().where(schema.ledger.c.index >= 2))
    change(store, schema.ledger_heads.delete())
    store.ledger.append_many([("review", {"forged": i}) for i in range(3)])
    record(store, OTHER)
    monkeypatch.setenv("ASSAY_LEDGER_KEY", str(tmp_path / "no-such-key"))  # no local key
    assert _cli("ledger", "verify", "--db", db_url)[0] == 0  # holds by itself
    assert not (tmp_path / "no-such-key").exists()  # verify does not create a key
    code, out = _cli("ledger", "verify", "--db", db_url, "--head", str(tmp_path / "head.json"))
    assert code == 1 and out == "ledger: the published head: not signed by one key (re-signed)\n"

    # Without new heads, the published head's root names the rewrite; a shorter
    # ledger than it is truncated.
    change(store, schema.ledger_heads.delete())
    code, out = _cli("ledger", "verify", "--db", db_url, "--head", str(tmp_path / "head.json"))
    assert code == 1 and out == ("ledger: the first 5 entries do not have the root of head 5 "
                                 "(rewritten)\n"), out
    change(store, schema.ledger.delete().where(schema.ledger.c.index >= 3))
    code, out = _cli("ledger", "verify", "--db", db_url, "--head", str(tmp_path / "head.json"))
    assert code == 1 and out == \
        "ledger: entry 3: missing (the published head covers 5 entries)\n", out

    (tmp_path / "bad.json").write_text("{}")
    assert _cli("ledger", "verify", "--db", db_url, "--head", str(tmp_path / "bad.json"))[0] == 2


def test_verify_with_the_local_key_file(store: Store, db_url: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_LEDGER_KEY", str(tmp_path / "ledger.key"))
    add(store, 2)
    assert _cli("ledger", "head", "--db", db_url)[0] == 0
    add(store, 1)
    record(store, OTHER)  # a head signed with a key that is not the store's
    code, out = _cli("ledger", "verify", "--db", db_url)
    assert code == 1 and out == "ledger: head 3: not signed by the local key (re-signed)\n"


def test_no_head_is_signed_over_a_gap_or_a_malformed_hash(store: Store) -> None:
    from assay.store.ledger.heads import HeadError

    add(store, 4)
    record(store)
    add(store, 3)
    change(store, schema.ledger.update().where(schema.ledger.c.index == 5)
           .values(hash="sha256:" + "zz" * 32))
    with pytest.raises(HeadError, match="entry 5"):
        record(store)
    change(store, schema.ledger.delete().where(schema.ledger.c.index == 5))
    with pytest.raises(HeadError, match="entry 5"):
        record(store)
    assert [h.size for h in heads(store)] == [4]


def test_a_ledger_that_does_not_hold_still_takes_a_run_s_batches(store: Store) -> None:
    # The writer follows the ledger after each batch; where it cannot (an entry
    # missing), the batch is written all the same and the seal is what refuses.
    from assay.store.ledger.heads import HeadError
    from assay.store.runs.record import register_run, seal_run, write_batch
    from assay.store.runs.trials import TrialRecord

    add(store, 4)
    change(store, schema.ledger.delete().where(schema.ledger.c.index == 2))
    row = {"run_id": "r1", "suite_id": "s/x@1", "suite_digest": "sha256:a", "hidden_set": None,
           "hidden_source": None, "target_uri": "python:a:b", "target_digest": "sha256:b",
           "target_facets": {}, "seed": 1, "started_at": "2025-01-01T00:00:00Z",
           "trials_per_case": 1, "pass_mark": 1.0, "status": "open", "suite": "{}",
           "options": "{}"}
    register_run(store, row, b'{"run_id":"r1"}')
    record = TrialRecord("c1", "public", 1, "pass", None, 0.1, "{}", (), b'{"output":1}')
    assert write_batch(store, "r1", [record], follow=True) is None
    with store.engine.connect() as connection:
        trials = connection.execute(sa.select(schema.trials.c.case_id)).all()
    assert [t[0] for t in trials] == ["c1"]
    with pytest.raises(HeadError, match="entry 2"):
        seal_run(store, KEY, "r1", {"finished_at": "2025-01-01T00:00:01Z"}, b'{"run_id":"r1"}')

"""The ledger in the store: append, verify, and every tamper caught by `assay ledger verify`.

The same tests on SQLite and on a real PostgreSQL; tampering is done with
SQL directly on the database, as someone with write access would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from assay.cli import main
from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.ledger.book import Ledger
from assay.store.ledger.chain import GENESIS, entry_hash


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    for n in range(6):
        opened.ledger.append("trial-verdict", {"run_id": "r", "case_id": f"c{n}", "n": 1})
    yield opened
    opened.close()


def verify(db_url: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, ["ledger", "verify", "--db", db_url])
    return done.exit_code, done.output


def change(store: Store, *statements: sa.Executable) -> None:
    with store.engine.begin() as connection:
        for statement in statements:
            connection.execute(statement)


def ledger_row(index: int) -> sa.Update:
    return schema.ledger.update().where(schema.ledger.c.index == index)


def test_entries_chain_from_genesis_and_verify(store: Store, db_url: str) -> None:
    entries = store.ledger.entries()
    assert [e.index for e in entries] == list(range(6))
    assert entries[0].prev_hash == GENESIS
    assert all(b.prev_hash == a.hash for a, b in zip(entries, entries[1:], strict=False))
    assert verify(db_url) == (0, "ledger: 6 entries verify, 0 heads\n")


def test_an_edited_content_byte_names_its_entry(store: Store, db_url: str) -> None:
    target = store.ledger.entries()[3]
    b = schema.blobs.c
    with store.engine.connect() as connection:
        content = bytearray(connection.scalar(
            sa.select(b.content).where(b.digest == target.content_digest)))
    content[5] ^= 0x01
    change(store, schema.blobs.update().where(b.digest == target.content_digest)
           .values(content=bytes(content)))
    code, out = verify(db_url)
    assert code == 1 and out.startswith("ledger: entry 3: content does not match"), out


def test_an_edited_hash_names_its_entry(store: Store, db_url: str) -> None:
    change(store, ledger_row(2).values(hash="sha256:" + "f" * 64))
    code, out = verify(db_url)
    assert code == 1 and out.startswith("ledger: entry 2: hash does not match"), out


def test_a_deleted_entry_is_named(store: Store, db_url: str) -> None:
    change(store, schema.ledger.delete().where(schema.ledger.c.index == 2))
    code, out = verify(db_url)
    assert code == 1 and out.startswith("ledger: entry 2: has index 3"), out


def test_two_swapped_entries_are_caught(store: Store, db_url: str) -> None:
    change(store, ledger_row(3).values(index=-1), ledger_row(4).values(index=3),
           ledger_row(-1).values(index=4))
    code, out = verify(db_url)
    assert code == 1 and out.startswith("ledger: entry 3: prev_hash"), out


def test_an_inserted_forged_entry_names_the_entry_it_displaced(store: Store,
                                                               db_url: str) -> None:
    entries = store.ledger.entries()
    # Make room at index 2, then forge a well-formed entry there.
    change(store, *(ledger_row(i).values(index=i + 1) for i in reversed(range(2, 6))))
    digest = entries[0].content_digest
    forged = {"index": 2, "kind": "trial-verdict", "content_digest": digest,
              "prev_hash": entries[1].hash, "created_at": "2026-01-01T00:00:00Z",
              "hash": entry_hash(2, "trial-verdict", digest, entries[1].hash)}
    change(store, schema.ledger.insert().values(forged))
    code, out = verify(db_url)
    # The forged entry holds by itself; the one it displaced does not.
    assert code == 1 and out.startswith("ledger: entry 3: prev_hash"), out


def test_erased_content_still_verifies(store: Store, db_url: str) -> None:
    target = store.ledger.entries()[4]
    change(store, schema.blobs.update().where(schema.blobs.c.digest == target.content_digest)
           .values(content=None))
    assert verify(db_url) == (0, "ledger: 6 entries verify (1 with content erased), 0 heads\n")


def test_an_empty_ledger_verifies(db_url: str) -> None:
    open_store(db_url).close()
    assert verify(db_url) == (0, "ledger: 0 entries verify, 0 heads\n")


@pytest.mark.real
def test_concurrent_writers_do_not_fork_the_chain(postgres_url: str) -> None:
    stores = [open_store(postgres_url) for _ in range(4)]

    def write(ledger: Ledger, who: int) -> None:
        for n in range(25):
            ledger.append("review", {"who": who, "n": n})

    threads = [threading.Thread(target=write, args=(s.ledger, i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result, count = stores[0].ledger.verify()
    assert result.ok and count == 100, result.reason
    for s in stores:
        s.close()

"""Every tamper with every kind of entry is caught by verify, which names the entry.

A ledger of two entries of each kind, with a signed head over all of them,
in the real store (SQLite and PostgreSQL). For each kind, the first entry of
that kind is tampered with through SQL, as someone with write access to the
database would: one byte of its content, one character of its hash or of its
prev_hash, deleted, swapped with its neighbour, a forged well-formed entry
inserted before it, and the tail cut from it. ``Ledger.verify`` must fail and
name the entry; the CLI is checked for one kind per tamper. The database is
restored between kinds, so each (tamper, database) builds one store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assay.canonical import canonical
from assay.cli import main
from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.ledger.chain import GENESIS, KINDS, Entry, entry_hash

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
ROUNDS = 2
SIZE = ROUNDS * len(KINDS)
TAMPERS = ("content", "hash", "prev_hash", "delete", "reorder", "insert", "truncate")


@dataclass
class Ledger:
    """The store under test, its entries, and a snapshot to restore between kinds."""

    store: Store
    url: str
    entries: list[Entry]
    rows: dict[str, list[dict[str, Any]]]


def _snapshot(store: Store) -> dict[str, list[dict[str, Any]]]:
    with store.engine.connect() as connection:
        return {table.name: [dict(r._mapping) for r in connection.execute(sa.select(table))]
                for table in (schema.ledger, schema.blobs)}


def _restore(ledger: Ledger) -> None:
    with ledger.store.engine.begin() as connection:
        for table in (schema.ledger, schema.blobs):
            connection.execute(table.delete())
            connection.execute(table.insert(), ledger.rows[table.name])


@pytest.fixture
def ledger(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    key_file = tmp_path / "ledger.key"
    key_file.write_bytes(KEY.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    monkeypatch.setenv("ASSAY_LEDGER_KEY", str(key_file))  # verify checks the local key too
    store = open_store(db_url)
    store.ledger.append_many([(kind, {"kind": kind, "round": r, "said": f"{kind} said {r}"})
                              for r in range(ROUNDS) for kind in KINDS])
    store.ledger.record_head(KEY)
    built = Ledger(store, db_url, store.ledger.entries(), _snapshot(store))
    assert store.ledger.verify(KEY.public_key())[0].ok
    yield built
    store.close()


def _run(ledger: Ledger, *statements: sa.Executable) -> None:
    with ledger.store.engine.begin() as connection:
        for statement in statements:
            connection.execute(statement)


def _row(index: int) -> sa.Update:
    return schema.ledger.update().where(schema.ledger.c.index == index)


def _one_char(value: str) -> str:
    return value[:-1] + ("0" if value[-1] != "0" else "1")


def _tamper(ledger: Ledger, how: str, p: int) -> tuple[int, str]:
    """Tamper with entry ``p``; return the entry verify must name and its reason."""
    entry = ledger.entries[p]
    prev_link = "prev_hash is not the previous entry's hash"
    if how == "content":
        b = schema.blobs.c
        with ledger.store.engine.connect() as connection:
            content = bytearray(connection.scalar(
                sa.select(b.content).where(b.digest == entry.content_digest)))
        content[len(content) // 2] ^= 0x01
        _run(ledger, schema.blobs.update().where(b.digest == entry.content_digest)
             .values(content=bytes(content)))
        return p, "content does not match its digest (edited)"
    if how == "hash":
        _run(ledger, _row(p).values(hash=_one_char(entry.hash)))
        return p, "hash does not match its fields (edited)"
    if how == "prev_hash":
        _run(ledger, _row(p).values(prev_hash=_one_char(entry.prev_hash)))
        return p, prev_link
    if how == "delete":
        _run(ledger, schema.ledger.delete().where(schema.ledger.c.index == p))
        return p, f"has index {p + 1}, expected {p} (deleted, inserted or moved)"
    if how == "reorder":  # swap with the next entry
        _run(ledger, _row(p).values(index=-1), _row(p + 1).values(index=p),
             _row(-1).values(index=p + 1))
        return p, prev_link
    if how == "insert":  # a forged, well-formed entry of the same kind before it
        _run(ledger, *(_row(i).values(index=i + 1) for i in reversed(range(p, SIZE))))
        body = canonical({"kind": entry.kind, "forged": True})
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        prev = ledger.entries[p - 1].hash if p else GENESIS
        _run(ledger, schema.blobs.insert().values(digest=digest, content=body),
             schema.ledger.insert().values(
                 index=p, kind=entry.kind, content_digest=digest, prev_hash=prev,
                 hash=entry_hash(p, entry.kind, digest, prev),
                 created_at="2026-01-01T00:00:00Z"))
        # The forged entry holds by itself; the entry it displaced does not (0012).
        return p + 1, prev_link
    assert how == "truncate"
    _run(ledger, schema.ledger.delete().where(schema.ledger.c.index >= p))
    return p, f"missing (the newest head covers {SIZE} entries)"


@pytest.mark.parametrize("how", TAMPERS)
def test_every_tamper_of_every_kind_names_the_entry(ledger: Ledger, how: str) -> None:
    cli_kind = KINDS[TAMPERS.index(how) % len(KINDS)]
    for p, kind in enumerate(KINDS):
        assert ledger.entries[p].kind == kind
        named, why = _tamper(ledger, how, p)
        result, _ = ledger.store.ledger.verify(KEY.public_key())
        assert not result.ok, (how, kind)
        assert (result.first_bad, result.reason) == (named, f"entry {named}: {why}"), (how, kind)
        if kind == cli_kind:
            done = CliRunner().invoke(main, ["ledger", "verify", "--db", ledger.url])
            assert (done.exit_code, done.output) == (1, f"ledger: entry {named}: {why}\n")
        _restore(ledger)
        assert ledger.store.ledger.verify(KEY.public_key())[0].ok  # the restore is exact


def test_erased_content_of_every_kind_still_verifies(ledger: Ledger) -> None:
    digests = [e.content_digest for e in ledger.entries[: len(KINDS)]]
    _run(ledger, schema.blobs.update().where(schema.blobs.c.digest.in_(digests))
         .values(content=None))
    result, count = ledger.store.ledger.verify(KEY.public_key())
    assert result.ok and count == SIZE and result.absent == tuple(range(len(KINDS)))
    done = CliRunner().invoke(main, ["ledger", "verify", "--db", ledger.url])
    assert (done.exit_code, done.output) == (
        0, f"ledger: {SIZE} entries verify ({len(KINDS)} with content erased), 1 head\n")

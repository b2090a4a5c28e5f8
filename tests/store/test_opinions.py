"""Judge opinions in the ledger: entries after the others, raw answers as blobs by digest.

The same tests on SQLite and on a real PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from assay.canonical import digest
from assay.cli import main
from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.ledger.opinions import raw_blob, seal_opinions


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    opened.ledger.append("trial-verdict", {"run_id": "r", "case_id": "c", "n": 1})
    yield opened
    opened.close()


def verify(db_url: str) -> int:
    return CliRunner().invoke(main, ["ledger", "verify", "--db", db_url]).exit_code


def test_opinions_are_appended_with_their_raw_answers(store: Store, db_url: str) -> None:
    said, body = raw_blob("B\nthe second one quotes SECRET-1")
    assert said == digest("B\nthe second one quotes SECRET-1")
    assert json.loads(body) == "B\nthe second one quotes SECRET-1"
    contents = [{"opinion": "pairwise", "n": n, "raw_digest": said} for n in (1, 2)]
    entries = seal_opinions(store, contents, {said: body})
    assert [(e.index, e.kind) for e in entries] == [(1, "judge-opinion"), (2, "judge-opinion")]
    assert [json.loads(store.ledger.content(e.content_digest) or b"") for e in entries] == contents
    assert store.ledger.content(said) == body  # one blob for the answer both entries name
    assert b"SECRET-1" not in (store.ledger.content(entries[0].content_digest) or b"")
    assert verify(db_url) == 0


def test_a_raw_answer_erased_leaves_the_ledger_verifiable(store: Store, db_url: str) -> None:
    said, body = raw_blob("A\nquotes a person")
    seal_opinions(store, [{"opinion": "pairwise", "raw_digest": said}], {said: body})
    with store.engine.begin() as connection:
        connection.execute(sa.update(schema.blobs).where(schema.blobs.c.digest == said)
                           .values(content=None))
    assert store.ledger.content(said) is None
    assert verify(db_url) == 0


def test_nothing_to_seal_appends_nothing(store: Store) -> None:
    assert seal_opinions(store, [], {}) == []
    assert len(store.ledger.entries()) == 1

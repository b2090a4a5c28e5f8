"""Runs as a list shows them (``store/runs/listing.py``), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.runs.listing import RunFilter, list_runs, listed_run
from assay.store.runs.record import save_run

from .test_database import a_report
from .test_fresh_store import alembic_upgrade


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def test_a_sealed_run_keeps_its_listing_with_counts_cost_and_evidence(store: Store) -> None:
    report = a_report()
    save_run(store, report)
    row = listed_run(store, "run-1")
    assert row is not None
    shown = row.as_json()
    assert shown["evidence"] == report.evidence
    assert shown["cost"]["usd"] == pytest.approx(report.cost.usd)
    assert shown["cost"]["tokens"] == report.cost.input_tokens + report.cost.output_tokens
    assert shown["counts"]["public"] == {"total": 2, "passed": 1, "failed": 1,
                                         "inconclusive": 0, "broken": 0}
    assert shown["counts"]["hidden"]["total"] == 1
    assert (shown["scores"]["public"], shown["scores"]["hidden"]) == (
        report.scores.public, report.scores.hidden)
    assert shown["target"]["model"] == "m"
    assert "SECRET" not in json.dumps(shown)  # counts only, never a case


def test_runs_are_listed_newest_first_filtered_and_paged_in_the_database(store: Store) -> None:
    for day in range(1, 8):
        save_run(store, a_report(f"run-{day}", f"2026-01-0{day}T00:00:00Z"))
    page, total = list_runs(store, RunFilter(), limit=3, offset=0)
    assert total == 7 and [r.run_id for r in page] == ["run-7", "run-6", "run-5"]
    page, _ = list_runs(store, RunFilter(), limit=3, offset=6)
    assert [r.run_id for r in page] == ["run-1"]
    assert list_runs(store, RunFilter(suite="other/s@1"))[1] == 0
    assert list_runs(store, RunFilter(target="agent:ru"))[1] == 7
    assert list_runs(store, RunFilter(target="%"))[1] == 0  # a LIKE wildcard is a character
    assert list_runs(store, RunFilter(version="cc"))[1] == 7
    assert list_runs(store, RunFilter(version="sha256:cd"))[1] == 0
    assert list_runs(store, RunFilter(status="open"))[1] == 0
    passed = a_report().scores.passed
    assert list_runs(store, RunFilter(result="passed"))[1] == (7 if passed else 0)
    assert list_runs(store, RunFilter(result="not-passed"))[1] == (0 if passed else 7)


def test_revision_0008_fills_the_listing_of_runs_sealed_before_it(db_url: str) -> None:
    alembic_upgrade(db_url, "0007")
    report = a_report()
    engine = sa.create_engine(db_url)
    body = report.model_copy(update={"seal": None}).model_dump_json(by_alias=True)
    columns = {c.name for c in schema.runs.columns} - {"listing"}
    row = {"run_id": "old-1", "suite_id": "demo/s@1", "suite_digest": "sha256:aa",
           "target_uri": "python:agent:run", "target_digest": "sha256:cc",
           "target_facets": "{}", "started_at": "2026-01-01T00:00:00Z",
           "trials_per_case": 2, "pass_mark": 0.8, "status": "sealed", "report": body}
    old_runs = sa.table("runs", *(sa.column(name) for name in columns))
    with engine.begin() as connection:
        connection.execute(old_runs.insert().values(**row))
        connection.execute(old_runs.insert().values(
            **{**row, "run_id": "open-1", "status": "open", "report": None}))
    engine.dispose()
    store = open_store(db_url)
    try:
        old = listed_run(store, "old-1")
        assert old is not None and old.listing["counts"]["public"]["passed"] == 1
        assert old.listing["evidence"] == report.evidence
        still_open = listed_run(store, "open-1")
        assert still_open is not None and still_open.listing == {}
    finally:
        store.close()

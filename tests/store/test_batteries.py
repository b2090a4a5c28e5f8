"""store.batteries: each agent version's newest two batteries, in one query, on either store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assay.model import Report
from assay.store.database import Store, open_store
from assay.store.runs.batteries import newest_pairs
from assay.store.runs.record import save_run

from .test_database import a_report


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def battery(store: Store, run_id: str, day: int, digest: str, *, suite: str = "demo/s@1",
            uri: str = "python:agent:run", interrupted: bool = False) -> None:
    report = a_report(run_id, f"2026-01-{day:02d}T00:00:00Z")
    report = report.model_copy(update={
        "suite": report.suite.model_copy(update={"id": suite}),
        "target": report.target.model_copy(update={"digest": digest, "uri": uri}),
        "interrupted": interrupted})
    assert isinstance(report, Report)
    save_run(store, report)


def test_each_version_gives_its_newest_two_whole_batteries_newest_version_first(
        store: Store) -> None:
    battery(store, "a1", 1, "sha256:aa11")
    battery(store, "a2", 3, "sha256:aa11")
    battery(store, "a3", 5, "sha256:aa11")
    battery(store, "b1", 2, "sha256:bb22", uri="python:other:run")
    battery(store, "b3", 4, "sha256:bb22", uri="python:other:run")
    battery(store, "b2", 6, "sha256:bb22", uri="python:other:run", interrupted=True)
    battery(store, "c1", 7, "sha256:cc33")  # one battery: nothing to compare
    battery(store, "x1", 8, "sha256:aa11", suite="demo/other@1")
    battery(store, "x2", 9, "sha256:aa11", suite="demo/other@1")

    pairs = newest_pairs(store, "demo/s@1")
    assert [(p.target_digest, p.base, p.cand) for p in pairs] == [
        ("sha256:aa11", "a2", "a3"), ("sha256:bb22", "b1", "b3")]
    assert pairs[1].target_uri == "python:other:run"
    # What `assay drift` reads for each version, newest first.
    for pair in pairs:
        newest = store.batteries("demo/s@1", pair.target_digest, limit=2)
        assert [run.run_id for run in newest] == [pair.cand, pair.base]

    assert [p.cand for p in newest_pairs(store, "demo/s@1", version="bb")] == ["b3"]
    assert [p.cand for p in newest_pairs(store, "demo/s@1", version="sha256:aa")] == ["a3"]
    assert [p.cand for p in newest_pairs(store, "demo/s@1", target="other")] == ["b3"]
    assert newest_pairs(store, "demo/s@1", version="%") == []  # a pattern is text
    assert newest_pairs(store, "demo/none@1") == []

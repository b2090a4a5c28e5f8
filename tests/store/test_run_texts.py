"""A large report and suite are kept in parts, read back whole by every reader.

A battery hands the store its report and suite as files; above
``documents.INLINE_BYTES`` the store keeps them a part at a time in
``run_texts`` and ``runs.report`` / ``runs.suite`` stay NULL. Here the limit
is 0 and a part is 700 characters, so a small run goes the way a run of a
hundred thousand cases does, on both backends.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.engine.runs import RunSettings, run_suites
from assay.model.result import report_json
from assay.store import schema
from assay.store.database import open_store
from assay.store.erasure import erase
from assay.store.revision import HEAD_REVISION
from assay.store.runs import documents
from assay.store.runs import texts as run_texts
from assay.store.runs.sqlite_reports import report_documents
from assay.suites import load_suite_file

CANARY = "CANARY-PARTS-19c4"

AGENT = """
def agent(input):
    return {"echo": input}
"""


def suite_text(n: int) -> str:
    cases = "".join(f"  - {{id: c{i}, input: i{i}, expect: [{{path: $.echo, equals: i{i}}}]}}\n"
                    for i in range(n))
    return (f"suite: parts/big@1\ntarget: python:parts_agent:agent\ncases:\n{cases}"
            f"  - {{id: secret, input: '{CANARY}', expect: [{{path: $.echo, equals: x}}]}}\n")


@pytest.fixture
def parted(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A run of 40 cases stored with every document in parts: the URL and the run id."""
    monkeypatch.setattr(documents, "INLINE_BYTES", 0)
    monkeypatch.setattr(run_texts, "PART_CHARS", 700)
    (tmp_path / "parts_agent.py").write_text(AGENT)
    path = tmp_path / "big.suite.yaml"
    path.write_text(suite_text(40))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        [result] = run_suites(lambda: [load_suite_file(path)], [], RunSettings(), db=db_url)
    finally:
        sys.modules.pop("parts_agent", None)
    assert result.report is not None and result.report.seal is not None
    return db_url, result.report.run_id


def test_a_run_in_parts_reads_back_as_the_report_it_sealed(parted: tuple[str, str]) -> None:
    url, run_id = parted
    store = open_store(url)
    try:
        r, x = schema.runs.c, schema.run_texts.c
        with store.engine.connect() as connection:
            row = connection.execute(sa.select(r.report, r.suite, r.report_digest)
                                     .where(r.run_id == run_id)).one()
            kinds = connection.execute(sa.select(x.kind, sa.func.count()).where(
                x.run_id == run_id).group_by(x.kind)).all()
        assert row.report is None and row.suite is None
        counts = dict(kinds)  # type: ignore[arg-type]
        assert counts["report"] > 5 and counts["suite"] > 2
        status, body, seal = store.report_document(run_id)
        assert status == "sealed" and body is not None and seal is not None
        # The joined parts are the bytes the seal covers, and the report the store loads.
        assert "sha256:" + hashlib.sha256(body.encode()).hexdigest() == row.report_digest
        loaded = store.load_report(run_id)
        assert b"".join(report_json(loaded.model_copy(update={"seal": None}))).decode() == body
        assert len(loaded.cases) == 41 and loaded.seal == seal
        replay = store.load_replay(run_id)
        assert replay.report == body and replay.suite is not None
        assert json.loads(replay.suite)["suite"]["suite"] == "parts/big@1"
    finally:
        store.close()
    if url.startswith("sqlite"):  # the quick path reads the parts too
        quick = report_documents(url, [run_id], HEAD_REVISION)
        assert quick is not None and quick[run_id] == (status, body, seal)


def test_erasing_a_case_reaches_into_the_parts(parted: tuple[str, str]) -> None:
    url, run_id = parted
    store = open_store(url)
    try:
        x = schema.run_texts.c
        assert erase(store, "secret", run_id) is not None
        with store.engine.connect() as connection:
            parts = connection.execute(sa.select(x.kind, x.body)
                                       .where(x.run_id == run_id)).all()
        assert {kind for kind, _ in parts} == {"report", "suite"}
        assert not any(CANARY in body for _, body in parts)
        _, body, _ = store.report_document(run_id)
        assert body is not None and "secret" in body  # the id stays, its content goes
    finally:
        store.close()

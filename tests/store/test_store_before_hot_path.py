"""A store written before issue 32 (the hot path) verifies, replays and re-encodes to its bytes.

``data/before_hot_path/project`` holds a run made by the real ``assay run``
of the tree before the per-trial path moved off pydantic (``make.py`` beside
it says what it covers and how it was made): its SQLite store, its ``--json``
report and a receipt, committed as they were written. With today's code its
ledger and receipt verify, its trials replay clean, its report gives back
the bytes its seal hashed, and what today's code writes for each stored
trial (trace, usage, verdict rows) is byte for byte what the old code wrote:
the guard that a faster encoder writes what pydantic wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from assay.canonical import digest_bytes
from assay.grading import redact
from assay.model import CaseResult, Report, Trace
from assay.model.compact import trace_json, usage_json
from assay.reports.json_report import report_line
from assay.store.database import open_store
from assay.store.runs.documents import report_body
from assay.store.runs.trials import VERDICT_COLUMNS, trial_record

from ..forked import run_assay

DATA = Path(__file__).parent / "data" / "before_hot_path" / "project"
#: The store, relative to the project folder.
STORE = "sqlite:///store/assay.db"
RUN_ID = json.loads((DATA / "report.json").read_text(encoding="utf-8"))["run_id"]
#: Every case of the suite with a trace (``raises`` broke before it had one), by trials.
TRACED = {"echo": 2, "tools": 1, "text": 1, "floats": 1, "bigint": 1, "fails": 1,
          "refuses": 1, "hangs": 1, "workspace": 1, "judged": 1, "turns": 1, "simulated": 1,
          "secret-one": 1}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """This test's copy of the committed project (the committed files stay as they are)."""
    root = tmp_path / "project"
    shutil.copytree(DATA, root)
    return root


def assay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_assay(list(args), cwd=root, env=dict(os.environ), timeout=120)


def rows(root: Path, sql: str) -> list[sqlite3.Row]:
    connection = sqlite3.connect(root / "store" / "assay.db")
    connection.row_factory = sqlite3.Row
    try:
        return list(connection.execute(sql))
    finally:
        connection.close()


def test_its_ledger_and_its_receipt_verify(project: Path) -> None:
    checked = assay(project, "ledger", "verify", "--db", STORE)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Registered, a verdict per trial (15), sealed, and the head signed over all 18.
    assert checked.stdout.startswith("ledger: 18 entries verify"), checked.stdout
    receipt = assay(project, "receipt", "verify", "receipt.json")
    assert receipt.returncode == 0, receipt.stdout + receipt.stderr
    assert receipt.stdout.startswith("receipt verifies")
    sealed = json.loads((project / "receipt.json").read_text())["content"]
    [row] = rows(project, "SELECT report_digest FROM runs")
    assert sealed["run_id"] == RUN_ID and sealed["report_digest"] == row["report_digest"]


def test_it_replays_clean(project: Path) -> None:
    done = assay(project, "replay", RUN_ID, "--db", STORE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == (
        "replay: 26 verdicts re-graded, 14 cases recomputed, 16 ledger entries compared, "
        "all match")
    assert "SECRET" not in done.stdout + done.stderr


def test_the_stored_report_gives_back_the_bytes_its_seal_hashed(project: Path) -> None:
    [row] = rows(project, "SELECT report, report_digest, seal_entry, seal_hash FROM runs")
    body = row["report"].encode("utf-8")
    stored = Report.model_validate_json(body)
    assert report_body(stored) == body
    assert digest_bytes(report_body(stored)) == row["report_digest"]
    # The --json file is that report redacted (holdouts) and sealed, on one line.
    sealed = stored.model_copy(update={"seal": {"entry": row["seal_entry"],
                                                "hash": row["seal_hash"]}})
    text = (project / "report.json").read_text(encoding="utf-8")
    assert report_line(redact(sealed)) + "\n" == text
    assert "SECRET" not in text and "holdout-1" in text
    # ... and read back, the file's report gives back its own bytes.
    assert report_line(Report.model_validate_json(text)) + "\n" == text


def _stored_trials(root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    trials = {(r["case_id"], r["n"]): {"usage": r["usage"], "trace": r["content"]}
              for r in rows(root, "SELECT t.case_id, t.n, t.usage, b.content FROM trials t "
                                  "LEFT JOIN blobs b ON b.digest = t.trace_digest")}
    columns = ", ".join(f'"{name}"' for name in VERDICT_COLUMNS)
    for r in rows(root, f"SELECT case_id, n, {columns} FROM verdicts "
                        "ORDER BY case_id, n, position"):
        trials[r["case_id"], r["n"]].setdefault("verdicts", []).append(
            tuple(r[name] for name in VERDICT_COLUMNS))
    return trials


def test_what_is_written_of_each_stored_trial_is_what_was_written(project: Path) -> None:
    stored = _stored_trials(project)
    assert sum(1 for s in stored.values() if s["trace"] is not None) == sum(TRACED.values())
    store = open_store(STORE.replace("///", f"///{project}/"))
    try:
        report = store.load_report(RUN_ID)
    finally:
        store.close()
    seen = 0
    for case in report.cases:
        assert isinstance(case, CaseResult)  # the full report: every case whole
        for trial in case.trials:
            was = stored[case.id, trial.n]
            record = trial_record(case.id, case.split, trial)
            assert record.usage == was["usage"], (case.id, trial.n)
            assert list(record.verdicts) == was.get("verdicts", []), (case.id, trial.n)
            if was["trace"] is None:
                assert record.trace is None and case.id == "raises"
                continue
            assert record.trace == bytes(was["trace"]), (case.id, trial.n)
            # The blob read on its own, as a Trace, is written back to the same bytes by
            # pydantic and by the encoder a new run uses.
            trace = Trace.model_validate_json(was["trace"])
            assert trace.model_dump_json(fallback=repr).encode() == bytes(was["trace"])
            assert trace_json(trace) == bytes(was["trace"]), (case.id, trial.n)
            if trace.usage.tokens is not None or trace.usage.cost_usd is not None:
                assert usage_json(trace.usage) == was["usage"]
            seen += 1
    assert seen == sum(TRACED.values())

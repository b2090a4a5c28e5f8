"""`assay run` with a store: registered before any trial, a verdict per trial, sealed.

Through the real CLI in a subprocess, on SQLite and on a real PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from assay.canonical import digest
from assay.grading import redact
from assay.store import schema
from assay.store.database import open_store
from assay.store.runs.documents import report_digest, summary

CANARY = "CANARY-9e47"

AGENT = """
def agent(input):
    return {"echo": str(input)}
"""

SUITE = """
suite: ledger/canary@1
target: python:echo_agent:agent
trials: 2
pass_mark: 0.9
hidden: hidden/
cases:
  - id: public-one
    input: PUBLIC-MARK
    expect: [{path: $.echo, equals: PUBLIC-MARK}]
"""

HIDDEN = f"""
- id: {CANARY}-id-pass
  input: {CANARY}-input-pass
  expect: [{{path: $.echo, contains: pass}}]
- id: {CANARY}-id-fail
  input: {CANARY}-input-fail
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
"""


def assay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay", *args], capture_output=True,
                          text=True, cwd=root, timeout=120)


def project(root: Path) -> Path:
    (root / "evals" / "hidden").mkdir(parents=True)
    (root / "evals" / "echo_agent.py").write_text(AGENT)
    (root / "evals" / "ledger.suite.yaml").write_text(SUITE)
    (root / "evals" / "hidden" / "cases.yaml").write_text(HIDDEN)
    return root


def content(url: str, content_digest: str) -> dict[str, object]:
    store = open_store(url)
    with store.engine.connect() as connection:
        body = connection.scalar(sa.select(schema.blobs.c.content)
                                 .where(schema.blobs.c.digest == content_digest))
    store.close()
    loaded: dict[str, object] = json.loads(body)
    return loaded


def test_a_stored_run_is_registered_judged_and_sealed(db_url: str, tmp_path: Path) -> None:
    root = project(tmp_path)
    done = assay(root, "run", "evals", "--json", "r.json", "--db", db_url, "--seed", "11")
    assert done.returncode == 1, done.stderr  # one hidden case fails
    report = json.loads((root / "r.json").read_text())

    store = open_store(db_url)
    entries = store.ledger.entries()
    full = store.load_report(report["run_id"])
    store.close()
    # 3 cases × 2 trials: registered, 6 verdicts, sealed, in that order.
    assert [e.kind for e in entries] == ["run-registered"] + ["trial-verdict"] * 6 + ["run-sealed"]
    sealed = entries[-1]
    assert report["seal"] == {"entry": sealed.index, "hash": sealed.hash}
    assert full.seal == report["seal"]

    registered = content(db_url, entries[0].content_digest)
    assert registered["run_id"] == report["run_id"] and registered["seed"] == 11
    assert registered["suite"] == {"id": "ledger/canary@1", "digest": report["suite"]["digest"]}
    assert registered["hidden_set"] == report["suite"]["hidden_set"]
    assert registered["trials_per_case"] == 2 and registered["pass_mark"] == 0.9
    assert CANARY not in json.dumps(registered)
    verdict = content(db_url, entries[1].content_digest)
    assert set(verdict) == {"run_id", "case_id", "n", "outcome", "verdicts", "trace"}
    # The entry pins the evidence: the digest of the trace its verdicts were graded on.
    trial = next(t for c in full.cases if c.id == verdict["case_id"]  # type: ignore[union-attr]
                 for t in c.trials if t.n == verdict["n"])  # type: ignore[union-attr]
    assert trial.trace is not None
    assert verdict["trace"] == "sha256:" + hashlib.sha256(
        trial.trace.model_dump_json().encode()).hexdigest()
    # The sealed digest is of the full report without its seal, and the summary a
    # receipt shows is sealed by its digest.
    assert content(db_url, sealed.content_digest) == {
        "run_id": report["run_id"], "report_digest": report_digest(full),
        "summary": digest(summary(redact(full)))}

    shown = assay(root, "show", report["run_id"], "--json", "--db", db_url)
    assert json.loads(shown.stdout)["seal"] == report["seal"]
    checked = assay(root, "ledger", "verify", "--db", db_url)
    assert checked.returncode == 0 and checked.stdout.startswith("ledger: 8 entries verify")
    for surface in (checked.stdout + checked.stderr, json.dumps(report["seal"]), done.stdout):
        assert CANARY not in surface

    # A second run chains on: its registration follows the first run's seal.
    assert assay(root, "run", "evals", "--db", db_url).returncode == 1
    store = open_store(db_url)
    more = store.ledger.entries()
    store.close()
    assert len(more) == 16 and more[8].kind == "run-registered"
    assert more[8].prev_hash == sealed.hash


def test_with_no_store_nothing_is_sealed(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = assay(root, "run", "evals", "--json", "r.json", "--no-store")
    assert done.returncode == 1, done.stderr
    assert json.loads((root / "r.json").read_text())["seal"] is None
    assert not (root / ".assay").exists()

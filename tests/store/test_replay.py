"""`assay replay RUN`: re-grade stored traces with the stored suite, report forged rows.

Through the real CLI in a subprocess, on SQLite and on a real PostgreSQL.
Hidden content must not appear in replay's output (canaries in id, input, expected).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from assay.store import schema
from assay.store.database import open_store

CANARY = "CANARY-5b31"

AGENT = """
def agent(input):
    return {"echo": str(input)}
"""

SUITE = """
suite: replay/canary@1
target: python:echo_agent:agent
trials: 2
pass_mark: 0.9
hidden: hidden/
cases:
  - id: public-pass
    input: PUBLIC-MARK
    expect: [{path: $.echo, equals: PUBLIC-MARK}, {path: $.echo, contains: MARK}]
  - id: public-fail
    input: PUBLIC-OTHER
    expect: [{path: $.echo, equals: PUBLIC-MARK}]
"""

HIDDEN = f"""
- id: {CANARY}-id-fail
  input: {CANARY}-input-fail
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
"""


def assay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay", *args], capture_output=True,
                          text=True, cwd=root, timeout=120)


def stored_run(root: Path, db_url: str) -> str:
    (root / "evals" / "hidden").mkdir(parents=True)
    (root / "evals" / "echo_agent.py").write_text(AGENT)
    (root / "evals" / "replay.suite.yaml").write_text(SUITE)
    (root / "evals" / "hidden" / "cases.yaml").write_text(HIDDEN)
    done = assay(root, "run", "evals", "--json", "r.json", "--db", db_url)
    assert done.returncode == 1, done.stderr  # public-fail and the hidden case fail
    run_id: str = json.loads((root / "r.json").read_text())["run_id"]
    return run_id


def execute(url: str, statement: sa.Executable) -> None:
    store = open_store(url)
    with store.engine.begin() as connection:
        connection.execute(statement)
    store.close()


def test_a_stored_run_replays_clean(db_url: str, tmp_path: Path) -> None:
    run_id = stored_run(tmp_path, db_url)
    done = assay(tmp_path, "replay", run_id, "--db", db_url)
    assert done.returncode == 0, done.stdout + done.stderr
    # 2 trials x (2 + 1 + 1) assertions
    assert done.stdout.strip() == "replay: 8 verdicts re-graded, all match"
    assert CANARY not in done.stdout + done.stderr
    report = json.loads(assay(tmp_path, "replay", run_id, "--db", db_url, "--json").stdout)
    assert report["ok"] is True and report["differences"] == []


def test_forged_verdict_and_trial_are_named(db_url: str, tmp_path: Path) -> None:
    run_id = stored_run(tmp_path, db_url)
    v, t = schema.verdicts.c, schema.trials.c
    execute(db_url, schema.verdicts.update()
            .where(v.run_id == run_id, v.case_id == "public-fail", v.n == 2, v.position == 0)
            .values(outcome="pass"))
    execute(db_url, schema.trials.update()
            .where(t.run_id == run_id, t.case_id == "public-fail", t.n == 1)
            .values(outcome="pass"))
    done = assay(tmp_path, "replay", run_id, "--db", db_url)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert ("case public-fail trial 2 assertion 1 (equals $.echo): "
            "outcome stored pass, recomputed fail") in lines
    assert "case public-fail trial 1: outcome stored pass, recomputed fail" in lines
    assert lines[-1] == "replay: 8 verdicts re-graded, 2 difference(s)"

    report = json.loads(assay(tmp_path, "replay", run_id, "--db", db_url, "--json").stdout)
    assert report["ok"] is False
    assert {"case": "public-fail", "trial": 2, "position": 1, "assertion": "equals $.echo",
            "field": "outcome", "stored": "pass", "recomputed": "fail"} in report["differences"]


def test_a_forged_hidden_verdict_is_a_holdout(db_url: str, tmp_path: Path) -> None:
    run_id = stored_run(tmp_path, db_url)
    v = schema.verdicts.c
    execute(db_url, schema.verdicts.update()
            .where(v.run_id == run_id, v.case_id == f"{CANARY}-id-fail", v.n == 1)
            .values(outcome="pass", evidence="unavailable"))
    for extra in ((), ("--json",)):
        done = assay(tmp_path, "replay", run_id, "--db", db_url, *extra)
        assert done.returncode == 1, done.stdout + done.stderr
        assert CANARY not in done.stdout + done.stderr
        assert "equals" not in done.stdout and "$.echo" not in done.stdout
    lines = assay(tmp_path, "replay", run_id, "--db", db_url).stdout.splitlines()
    assert "case holdout-1 trial 1 assertion 1: outcome stored pass, recomputed fail" in lines
    assert any(line.startswith("case holdout-1 trial 1 assertion 1: evidence stored "
                               "unavailable, recomputed ") for line in lines)


def test_an_erased_trace_is_not_replayable(db_url: str, tmp_path: Path) -> None:
    run_id = stored_run(tmp_path, db_url)
    t = schema.trials.c
    store = open_store(db_url)
    with store.engine.connect() as connection:
        erased = connection.scalar(sa.select(t.trace_digest).where(
            t.run_id == run_id, t.case_id == "public-pass", t.n == 1))
    store.close()
    execute(db_url, schema.blobs.update().where(schema.blobs.c.digest == erased)
            .values(content=None))
    done = assay(tmp_path, "replay", run_id, "--db", db_url)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # The echo agent returns the same trace for both trials of a case: one blob, two trials.
    assert "case public-pass trial 1: not replayable (trace content erased)" in lines
    assert "Traceback" not in done.stderr
    assert "difference" not in lines[-1] and "not replayable" in lines[-1]


def test_a_run_stored_without_its_suite_exits_2(db_url: str, tmp_path: Path) -> None:
    run_id = stored_run(tmp_path, db_url)
    execute(db_url, schema.runs.update().where(schema.runs.c.run_id == run_id)
            .values(suite=None))
    done = assay(tmp_path, "replay", run_id, "--db", db_url)
    assert done.returncode == 2
    assert "stored without its suite" in done.stderr
    missing = assay(tmp_path, "replay", "no-such-run", "--db", db_url)
    assert missing.returncode == 2 and "no run no-such-run" in missing.stderr


def test_a_broken_trial_is_compared_by_outcome_only() -> None:
    from assay.analysis.replay import replay
    from assay.model import Case, Suite
    from assay.store.database import StoredRun, StoredTrial, StoredVerdict

    suite = Suite(id="replay/broken@1", cases=[Case(id="c", expect=[{"equals": 1}])])
    body = {"suite": suite.model_dump(mode="json", by_alias=True), "files": {}}
    report = json.dumps({"cases": [{"id": "c", "split": "public"}]})

    def run(outcome: str, verdicts: list[StoredVerdict]) -> StoredRun:
        return StoredRun("r", report, json.dumps(body),
                         [StoredTrial("c", 1, outcome, None, None)], verdicts)

    assert replay(run("broken", [])).ok
    forged = replay(run("fail", [StoredVerdict("c", 1, 0, "fail", "observed")]))
    assert [(d.field, d.stored, d.recomputed) for d in forged.differences] == [
        ("outcome", "fail", "broken"), ("verdict count", "1", "0")]

"""`assay replay RUN`: re-grade stored traces with the stored suite, report forged rows.

Through the real CLI in a subprocess, on SQLite and on a real PostgreSQL.
Hidden content must not appear in replay's output (canaries in id, input, expected).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.store import schema
from assay.store.database import open_store

from ..forked import run_assay
from ..postgres import Template

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
    return run_assay(list(args), cwd=root, env=dict(os.environ), timeout=120)


def stored_run(root: Path, db_url: str) -> str:
    (root / "evals" / "hidden").mkdir(parents=True)
    (root / "evals" / "echo_agent.py").write_text(AGENT)
    (root / "evals" / "replay.suite.yaml").write_text(SUITE)
    (root / "evals" / "hidden" / "cases.yaml").write_text(HIDDEN)
    done = assay(root, "run", "evals", "--json", "r.json", "--db", db_url)
    assert done.returncode == 1, done.stderr  # public-fail and the hidden case fail
    run_id: str = json.loads((root / "r.json").read_text())["run_id"]
    return run_id


@pytest.fixture(scope="module")
def made(template_store: Template) -> tuple[Template, str]:
    """The run, made once per backend by the real CLI; each test forges in a copy."""
    return template_store, stored_run(template_store.root, template_store.url)


@pytest.fixture
def stored(made: tuple[Template, str], copy_store: Callable[[Template], str]) -> tuple[str, str]:
    """This test's copy of the stored run (in ``tmp_path``): its URL and the run id."""
    template, run_id = made
    return copy_store(template), run_id


def execute(url: str, statement: sa.Executable) -> None:
    store = open_store(url)
    with store.engine.begin() as connection:
        connection.execute(statement)
    store.close()


SUMMARY = "replay: 8 verdicts re-graded, 3 cases recomputed, 7 ledger entries compared"


def query(url: str, statement: sa.Executable) -> list[sa.Row[Any]]:
    store = open_store(url)
    with store.engine.connect() as connection:
        rows = list(connection.execute(statement))
    store.close()
    return rows


def replay_lines(root: Path, db_url: str, run_id: str) -> list[str]:
    done = assay(root, "replay", run_id, "--db", db_url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.splitlines()


def hidden_safe_replays(root: Path, db_url: str, run_id: str) -> str:
    """Replay as text and as JSON (exit 1): no hidden content in either; the text."""
    text = ""
    for extra in ((), ("--json",)):
        done = assay(root, "replay", run_id, "--db", db_url, *extra)
        assert done.returncode == 1, done.stdout + done.stderr
        assert CANARY not in done.stdout + done.stderr and "Traceback" not in done.stderr
        assert "equals" not in done.stdout and "$.echo" not in done.stdout
        if not extra:
            text = done.stdout
    return text


def test_a_stored_run_replays_clean(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    done = assay(tmp_path, "replay", run_id, "--db", db_url)
    assert done.returncode == 0, done.stdout + done.stderr
    # 2 trials x (2 + 1 + 1) assertions; 6 trial-verdict entries and run-sealed
    assert done.stdout.strip() == f"{SUMMARY}, all match"
    assert CANARY not in done.stdout + done.stderr
    report = json.loads(assay(tmp_path, "replay", run_id, "--db", db_url, "--json").stdout)
    assert report["ok"] is True and report["differences"] == []
    assert (report["trials"], report["cases"], report["ledger_entries"]) == (6, 3, 7)


def test_forged_verdict_and_trial_are_named(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    v, t = schema.verdicts.c, schema.trials.c
    execute(db_url, schema.verdicts.update()
            .where(v.run_id == run_id, v.case_id == "public-fail", v.n == 2, v.position == 0)
            .values(outcome="pass"))
    execute(db_url, schema.trials.update()
            .where(t.run_id == run_id, t.case_id == "public-fail", t.n == 1)
            .values(outcome="pass"))
    lines = replay_lines(tmp_path, db_url, run_id)
    # Each forged row is named against re-grading AND against the ledger.
    assert lines == [
        "case public-fail trial 1: outcome stored pass, recomputed fail",
        "case public-fail trial 1: outcome stored pass, ledger fail",
        "case public-fail trial 2 assertion 1 (equals $.echo): outcome stored pass, "
        "recomputed fail",
        "case public-fail trial 2 assertion 1 (equals $.echo): outcome stored pass, ledger fail",
        f"{SUMMARY}, 4 difference(s)",
    ]
    report = json.loads(assay(tmp_path, "replay", run_id, "--db", db_url, "--json").stdout)
    assert report["ok"] is False
    assert {"case": "public-fail", "trial": 2, "position": 1, "assertion": "equals $.echo",
            "field": "outcome", "against": ["stored", "recomputed"], "stored": "pass",
            "recomputed": "fail"} in report["differences"]
    assert {"case": "public-fail", "trial": 2, "position": 1, "assertion": "equals $.echo",
            "field": "outcome", "against": ["stored", "ledger"], "stored": "pass",
            "ledger": "fail"} in report["differences"]


def test_a_consistent_forgery_is_caught_by_the_ledger(
        stored: tuple[str, str], tmp_path: Path) -> None:
    """Trial, verdict rows AND trace rewritten so that re-grading agrees: the ledger does not."""
    db_url, run_id = stored
    v, t, b = schema.verdicts.c, schema.trials.c, schema.blobs.c
    where = (t.run_id == run_id, t.case_id == "public-fail", t.n == 1)
    [row] = query(db_url, sa.select(b.content).join(schema.trials, t.trace_digest == b.digest)
                  .where(*where))
    trace = json.loads(bytes(row.content))
    trace["output"] = {"echo": "PUBLIC-MARK"}
    forged = json.dumps(trace, sort_keys=True, separators=(",", ":")).encode()
    forged_digest = "sha256:" + hashlib.sha256(forged).hexdigest()
    execute(db_url, schema.blobs.insert().values(digest=forged_digest, content=forged))
    execute(db_url, schema.trials.update().where(*where)
            .values(outcome="pass", trace_digest=forged_digest))
    execute(db_url, schema.verdicts.update()
            .where(v.run_id == run_id, v.case_id == "public-fail", v.n == 1)
            .values(outcome="pass"))
    lines = replay_lines(tmp_path, db_url, run_id)
    assert lines == [
        "case public-fail trial 1: outcome stored pass, ledger fail",
        "case public-fail trial 1 assertion 1 (equals $.echo): outcome stored pass, ledger fail",
        "case public-fail trial 1: outcome ledger fail, recomputed pass",
        "case public-fail trial 1 assertion 1 (equals $.echo): outcome ledger fail, "
        "recomputed pass",
        # The case still fails (trial 2), but not with the pass@1 the report has.
        "case public-fail: pass@1 stored 0.0, recomputed 0.5",
        f"{SUMMARY}, 5 difference(s)",
    ]


def test_a_trial_and_its_verdicts_forged_alike(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    v, t = schema.verdicts.c, schema.trials.c
    execute(db_url, schema.trials.update()
            .where(t.run_id == run_id, t.case_id == "public-fail", t.n == 2)
            .values(outcome="pass"))
    execute(db_url, schema.verdicts.update()
            .where(v.run_id == run_id, v.case_id == "public-fail", v.n == 2)
            .values(outcome="pass"))
    lines = replay_lines(tmp_path, db_url, run_id)
    assert "case public-fail trial 2: outcome stored pass, ledger fail" in lines
    assert ("case public-fail trial 2 assertion 1 (equals $.echo): outcome stored pass, "
            "ledger fail") in lines
    assert "case public-fail trial 2: outcome stored pass, recomputed fail" in lines


@pytest.mark.parametrize("by_reference", [True, False], ids=["trials.entry", "by-content"])
def test_a_deleted_trial_is_named_by_its_ledger_entry(
        stored: tuple[str, str], tmp_path: Path, by_reference: bool) -> None:
    db_url, run_id = stored
    v, t = schema.verdicts.c, schema.trials.c
    if not by_reference:
        # Runs recorded before trials.entry: every entry is found by its content.
        execute(db_url, schema.trials.update().where(t.run_id == run_id).values(entry=None))
        clean = assay(tmp_path, "replay", run_id, "--db", db_url)
        assert clean.returncode == 0, clean.stdout + clean.stderr
    [row] = query(db_url, sa.select(schema.ledger.c.index)
                  .where(schema.ledger.c.kind == "trial-verdict").order_by(schema.ledger.c.index)
                  .offset(1).limit(1))  # public-pass trial 2, recorded second
    execute(db_url, schema.verdicts.delete()
            .where(v.run_id == run_id, v.case_id == "public-pass", v.n == 2))
    execute(db_url, schema.trials.delete()
            .where(t.run_id == run_id, t.case_id == "public-pass", t.n == 2))
    lines = replay_lines(tmp_path, db_url, run_id)
    assert f"case public-pass trial 2: trial stored absent, ledger entry {row.index}" in lines
    assert lines[-1].endswith("1 difference(s)")


def test_a_forged_report_is_named(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    r = schema.runs.c
    [row] = query(db_url, sa.select(r.report).where(r.run_id == run_id))
    report = json.loads(row.report)
    [case] = [c for c in report["cases"] if c["id"] == "public-fail"]
    case["outcome"] = "pass"
    report["scores"].update(public=1.0, passed=True)
    execute(db_url, schema.runs.update().where(r.run_id == run_id)
            .values(report=json.dumps(report)))
    lines = replay_lines(tmp_path, db_url, run_id)
    assert any(line.startswith("run: report digest stored sha256:") and ", ledger sha256:" in line
               for line in lines)
    assert "case public-fail: outcome stored pass, recomputed fail" in lines
    assert "run: score public stored 1.0, recomputed 0.5" in lines
    assert "run: passed stored true, recomputed false" in lines
    assert lines[-1].endswith("4 difference(s)")


def test_a_run_without_its_seal_entry_is_named(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    lg = schema.ledger.c
    execute(db_url, schema.ledger.delete().where(lg.kind == "run-sealed"))
    lines = replay_lines(tmp_path, db_url, run_id)
    assert lines[0] == "run: run-sealed entry stored sealed, ledger absent"


def test_a_forged_hidden_verdict_is_a_holdout(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    v = schema.verdicts.c
    execute(db_url, schema.verdicts.update()
            .where(v.run_id == run_id, v.case_id == f"{CANARY}-id-fail", v.n == 1)
            .values(outcome="pass", evidence="unavailable"))
    said = hidden_safe_replays(tmp_path, db_url, run_id)
    lines = said.splitlines()
    assert "case holdout-1 trial 1 assertion 1: outcome stored pass, recomputed fail" in lines
    assert any(line.startswith("case holdout-1 trial 1 assertion 1: evidence stored "
                               "unavailable, recomputed ") for line in lines)


def test_new_differences_of_a_hidden_case_stay_redacted(
        stored: tuple[str, str], tmp_path: Path) -> None:
    """Ledger, trace, deleted-trial, case and pass@1 differences of a hidden case: no canary."""
    db_url, run_id = stored
    t, v, b, r, lg = (schema.trials.c, schema.verdicts.c, schema.blobs.c, schema.runs.c,
                      schema.ledger.c)
    hidden = (t.run_id == run_id, t.case_id == f"{CANARY}-id-fail")
    [one] = query(db_url, sa.select(t.trace_digest, t.entry).where(*hidden, t.n == 1))
    # Trial 1: its trace edited in place (now it passes) and its ledger content
    # rewritten with text where an outcome belongs.
    trace = json.loads(bytes(query(db_url, sa.select(b.content)
                                   .where(b.digest == one.trace_digest))[0].content))
    trace["output"] = {"echo": f"{CANARY}-expected"}
    execute(db_url, schema.blobs.update().where(b.digest == one.trace_digest)
            .values(content=json.dumps(trace).encode()))
    [entry] = query(db_url, sa.select(lg.content_digest).where(lg.index == one.entry))
    execute(db_url, schema.blobs.update().where(b.digest == entry.content_digest).values(
        content=json.dumps({"run_id": run_id, "case_id": f"{CANARY}-id-fail", "n": 1,
                            "outcome": f"{CANARY}-outcome", "verdicts": ["fail"]}).encode()))
    # Trial 2 deleted; the report's case outcome and pass@1 forged.
    execute(db_url, schema.verdicts.delete().where(
        v.run_id == run_id, v.case_id == f"{CANARY}-id-fail", v.n == 2))
    execute(db_url, schema.trials.delete().where(*hidden, t.n == 2))
    [row] = query(db_url, sa.select(r.report).where(r.run_id == run_id))
    report = json.loads(row.report)
    [case] = [c for c in report["cases"] if c["split"] == "hidden"]
    case.update(outcome="inconclusive", pass_at_1=0.25)
    execute(db_url, schema.runs.update().where(r.run_id == run_id)
            .values(report=json.dumps(report)))

    said = hidden_safe_replays(tmp_path, db_url, run_id)
    lines = said.splitlines()
    for expected in (
            "case holdout-1 trial 1: trace content does not match its digest",
            "case holdout-1 trial 1: outcome stored fail, recomputed pass",
            "case holdout-1 trial 1 assertion 1: outcome stored fail, recomputed pass",
            f"case holdout-1 trial 1: ledger entry {one.entry} does not match its digest "
            "or hash",
            "case holdout-1 trial 1: outcome stored fail, ledger (not an outcome)",
            f"case holdout-1 trial 2: trial stored absent, ledger entry {one.entry + 1}",
            # Trial 1 now passes and trial 2 is gone: re-grading folds the case to pass.
            "case holdout-1: outcome stored inconclusive, recomputed pass",
            "case holdout-1: pass@1 stored withheld, recomputed withheld"):
        assert expected in lines, "\n".join(lines)


def test_an_erased_trace_is_not_replayable(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
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


def test_an_erased_case_is_not_replayable_and_its_erasure_not_a_difference(
        stored: tuple[str, str], tmp_path: Path) -> None:
    """Erasure rewrites the stored report; its ledger entry carries the digests to follow."""
    db_url, run_id = stored
    erased = assay(tmp_path, "erase", "--subject", "public-pass", "--db", db_url)
    assert erased.returncode == 0, erased.stdout + erased.stderr
    lines = replay_lines(tmp_path, db_url, run_id)
    assert lines[:2] == ["case public-pass trial 1: not replayable (trace content erased)",
                         "case public-pass trial 2: not replayable (trace content erased)"]
    assert lines[-1].endswith("2 not replayable") and "difference" not in lines[-1]
    # A forgery after the erasure is still one.
    r = schema.runs.c
    [row] = query(db_url, sa.select(r.report).where(r.run_id == run_id))
    report = json.loads(row.report)
    [case] = [c for c in report["cases"] if c["id"] == "public-fail"]
    case["outcome"] = "pass"
    execute(db_url, schema.runs.update().where(r.run_id == run_id)
            .values(report=json.dumps(report)))
    lines = replay_lines(tmp_path, db_url, run_id)
    assert "case public-fail: outcome stored pass, recomputed fail" in lines
    assert any(line.startswith("run: report digest stored ") for line in lines)


@pytest.mark.parametrize("by_reference", [True, False], ids=["trials.entry", "by-content"])
def test_an_erased_ledger_content_is_not_replayable(
        stored: tuple[str, str], tmp_path: Path, by_reference: bool) -> None:
    db_url, run_id = stored
    t, lg, b = schema.trials.c, schema.ledger.c, schema.blobs.c
    if not by_reference:
        execute(db_url, schema.trials.update().where(t.run_id == run_id).values(entry=None))
    [row] = query(db_url, sa.select(lg.index, lg.content_digest)
                  .where(lg.kind == "trial-verdict").order_by(lg.index).limit(1))
    execute(db_url, schema.blobs.update().where(b.digest == row.content_digest)
            .values(content=None))
    lines = replay_lines(tmp_path, db_url, run_id)
    reason = (f"ledger entry {row.index} content erased" if by_reference else
              "no ledger entry found, and 1 trial-verdict entries have their content erased")
    assert lines == [f"case public-pass trial 1: not replayable ({reason})",
                     f"{SUMMARY.replace('7 ledger', '6 ledger')}, 1 not replayable"]


def test_content_edited_as_text_is_named_not_a_traceback(
        stored: tuple[str, str], tmp_path: Path) -> None:
    """SQLite keeps any value in any column: SQL's replace() on a blob writes text back.

    Read as str, that content crashed `ledger verify` and `replay` (TypeError);
    it is read as its UTF-8 bytes, so the edit is named like any other.
    """
    db_url, run_id = stored
    if not db_url.startswith("sqlite"):
        pytest.skip("PostgreSQL's bytea holds bytes only")
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
        db.execute("""UPDATE blobs SET content = replace(content, '"fail"', '"pass"')""")
        assert db.execute("SELECT count(*) FROM blobs WHERE typeof(content) = 'text'"
                          ).fetchone()[0] > 0
    lg = schema.ledger.c
    first = min(row.index for row in query(db_url, sa.select(lg.index, lg.content_digest)
                                           .where(lg.kind == "trial-verdict"))
                if row.index in _edited(db_url))
    done = assay(tmp_path, "ledger", "verify", "--db", db_url)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, f"ledger: entry {first}: content does not match its digest (edited)\n", "")
    lines = replay_lines(tmp_path, db_url, run_id)
    assert "case public-fail trial 1: outcome ledger pass, recomputed fail" in lines
    assert lines[-1].startswith("replay: ")


def _edited(db_url: str) -> set[int]:
    """The ledger entries whose content no longer has its digest."""
    lg, b = schema.ledger.c, schema.blobs.c
    rows = query(db_url, sa.select(lg.index, lg.content_digest, b.content)
                 .join(schema.blobs, b.digest == lg.content_digest))
    assert all(isinstance(row.content, bytes) for row in rows)  # text reads back as bytes
    return {row.index for row in rows
            if "sha256:" + hashlib.sha256(row.content).hexdigest() != row.content_digest}


def test_a_run_stored_without_its_suite_exits_2(stored: tuple[str, str], tmp_path: Path) -> None:
    db_url, run_id = stored
    execute(db_url, schema.runs.update().where(schema.runs.c.run_id == run_id)
            .values(suite=None))
    done = assay(tmp_path, "replay", run_id, "--db", db_url)
    assert done.returncode == 2
    assert "stored without its suite" in done.stderr
    missing = assay(tmp_path, "replay", "no-such-run", "--db", db_url)
    assert missing.returncode == 2 and "no run no-such-run" in missing.stderr


def test_a_broken_trial_is_compared_by_outcome_only() -> None:
    from assay.analysis.replay import replay
    from assay.grading import RunInfo, build_report, fold_case, fold_trial
    from assay.model import Case, Suite
    from assay.model.result import SuiteRef, TargetRef
    from assay.store.database import StoredRun, StoredTrial, StoredVerdict
    from assay.store.ledger.replaying import LedgerEntry, RunLedger
    from assay.store.runs.documents import report_digest

    case = Case(id="c", expect=[{"equals": 1}])
    suite = Suite(id="replay/broken@1", cases=[case])
    body = {"suite": suite.model_dump(mode="json", by_alias=True), "files": {}}
    info = RunInfo(run_id="r", suite=SuiteRef(id=suite.id, digest="sha256:0"),
                   target=TargetRef(uri="python:x:y", digest="sha256:1"), started_at="t0",
                   finished_at="t1", trials_per_case=1, pass_mark=suite.pass_mark)
    report = build_report(info, [fold_case(case, [fold_trial(1, [], broken=True,
                                                             reason="timed out")])])
    ledger = RunLedger("sealed", (1, "h1"), {}, {
        0: LedgerEntry(0, "trial-verdict", "h0", {"run_id": "r", "case_id": "c", "n": 1,
                                                  "outcome": "broken", "verdicts": []},
                       False, True),
        1: LedgerEntry(1, "run-sealed", "h1", {"run_id": "r",
                                               "report_digest": report_digest(report)},
                       False, True)})

    def run(outcome: str, verdicts: list[StoredVerdict]) -> StoredRun:
        return StoredRun("r", report.model_dump_json(by_alias=True), json.dumps(body),
                         [StoredTrial("c", 1, outcome, None, None)], verdicts)

    clean = replay(run("broken", []), ledger)
    assert clean.ok, [d.line for d in clean.differences]
    forged = replay(run("fail", [StoredVerdict("c", 1, 0, "fail", "observed")]), ledger)
    assert [(d.values, d.field) for d in forged.differences
            if d.trial is not None] == [
        ((("stored", "fail"), ("recomputed", "broken")), "outcome"),
        ((("stored", "1"), ("recomputed", "0")), "verdict count"),
        ((("stored", "fail"), ("ledger", "broken")), "outcome"),
        ((("stored", "1"), ("ledger", "0")), "verdict count")]

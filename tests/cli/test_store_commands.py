"""`assay run` records every run; `assay runs` and `assay show` read the record
back, redacted: a hidden case's content is kept in the store (for replay) and
appears on no outward surface."""

from __future__ import annotations

import json
import sqlite3

CANARY = "CANARY-5d21"

AGENT = """
def agent(input):
    print("agent saw", input)
    return {"echo": str(input)}
"""

SUITE = """
suite: store/canary@1
target: python:echo_agent:agent
trials: 2
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


def test_runs_are_stored_and_shown_without_hidden_content(project) -> None:
    project.write("evals/echo_agent.py", AGENT)
    project.write("evals/store.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    done = project.assay("run", "evals", "--json", "r.json")
    assert done.code == 1, done.err
    run_id = json.loads((project.root / "r.json").read_text())["run_id"]

    listed = project.assay("runs")
    assert listed.code == 0, listed.err
    assert run_id in listed.out and "store/canary@1" in listed.out
    assert "public 100.0% · hidden 50.0%" in listed.out and "NOT PASSED" in listed.out
    as_json = project.assay("runs", "--json")
    summaries = json.loads(as_json.out)
    assert [s["run_id"] for s in summaries] == [run_id]
    assert summaries[0]["passed"] is False

    shown = project.assay("show", run_id, "--json")
    assert shown.code == 0, shown.err
    report = json.loads(shown.out)
    assert report["run_id"] == run_id
    assert [c["id"] for c in report["cases"]] == ["public-one", "holdout-1", "holdout-2"]
    assert report == json.loads((project.root / "r.json").read_text())
    table = project.assay("show", run_id)
    assert table.code == 0 and "holdout-1" in table.out and "public-one" in table.out

    for surface in (listed, as_json, shown, table):
        assert CANARY not in surface.out + surface.err

    # The store itself keeps the hidden cases, traces included: replay needs them.
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        report_text = db.execute("select report from runs").fetchone()[0]
        blobs = b"".join(row[0] for row in db.execute("select content from blobs"))
        case_ids = {row[0] for row in db.execute("select case_id from trials")}
    assert f"{CANARY}-id-fail" in report_text
    assert f"{CANARY}-input-fail".encode() in blobs
    assert f"{CANARY}-id-pass" in case_ids


def test_db_option_and_env_name_the_store(project) -> None:
    project.write("evals/echo_agent.py", AGENT)
    project.write("evals/store.suite.yaml", SUITE.replace("hidden: hidden/\n", ""))
    url = f"sqlite:///{project.root / 'team.db'}"
    # --no-store records nothing; a named store (option or environment) gets
    # the run and keeps its signing key beside it, never in .assay/.
    assert project.assay("run", "evals", "--no-store").code == 0
    assert not (project.root / ".assay").exists()
    assert project.assay("run", "evals", "--db", url).code == 0
    assert project.assay("run", "evals", env={"ASSAY_DB": url}).code == 0
    assert not (project.root / ".assay").exists()
    assert (project.root / "ledger.key").exists()
    listed = project.assay("runs", "--json", env={"ASSAY_DB": url})
    assert len(json.loads(listed.out)) == 2
    # With no store named, every run is recorded and sealed in .assay/assay.db.
    default = project.assay("run", "evals", "--json", "r.json")
    assert default.code == 0, default.err
    sealed = json.loads((project.root / "r.json").read_text())["seal"]
    assert isinstance(sealed["entry"], int) and sealed["hash"].startswith("sha256:")
    mine = json.loads(project.assay("runs", "--json").out)
    assert [r["status"] for r in mine] == ["sealed"]


def test_show_of_an_unknown_run_is_a_usage_error(project) -> None:
    done = project.assay("show", "no-such-run")
    assert done.code == 2 and "no run no-such-run" in done.err


def test_a_store_that_cannot_be_used_stops_the_run_before_any_trial(project) -> None:
    marked = AGENT.replace("def agent(input):", "def agent(input):\n    open('called', 'w')")
    project.write("evals/echo_agent.py", marked)
    project.write("evals/store.suite.yaml", SUITE.replace("hidden: hidden/\n", ""))
    bad = project.assay("run", "evals", "--db", "nonsense://x")
    assert bad.code == 2 and "--db: cannot use this database URL" in bad.err
    down = project.assay("run", "evals", "--db", "postgresql+psycopg://127.0.0.1:1/none")
    assert down.code == 3 and "cannot open the store" in down.err
    for done in (bad, down):
        assert "Traceback" not in done.err
    assert not (project.root / "called").exists()  # no trial ran

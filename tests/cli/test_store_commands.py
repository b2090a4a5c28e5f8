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


def test_a_target_that_cannot_start_registers_nothing(project) -> None:
    """Started before registering: nothing un-runnable is left open or offered for resume."""
    project.write("evals/store.suite.yaml",
                  SUITE.replace("hidden: hidden/\n", "").replace("echo_agent", "no_such_agent"))
    done = project.assay("run", "evals")
    assert done.code == 3, done.err
    assert "harness failure" in done.err and "no_such_agent" in done.err
    listed = project.assay("runs", "--json")
    assert listed.code == 0, listed.err
    assert json.loads(listed.out) == []
    assert "--resume" not in project.assay("runs").out
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        assert db.execute("SELECT count(*) FROM ledger").fetchone() == (0,)


def test_the_agent_version_is_one_value_in_ledger_report_and_receipt(project) -> None:
    """Taken once the target started: registered, reported and receipted as the same digest."""
    project.write("evals/echo_agent.py", "from echo_helper import shout\n\n"
                  "def agent(input):\n    return {'echo': shout(str(input))}\n")
    project.write("evals/echo_helper.py", "def shout(text):\n    return text\n")
    project.write("evals/store.suite.yaml", SUITE.replace("hidden: hidden/\n", ""))
    done = project.assay("run", "evals", "--json", "r.json")
    assert done.code == 0, done.err
    report = json.loads((project.root / "r.json").read_text())
    version = report["target"]["digest"]
    receipt = project.assay("receipt", report["run_id"], "--out", "receipt.json")
    assert receipt.code == 0, receipt.err
    receipted = json.loads((project.root / "receipt.json").read_text())
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        row = db.execute("SELECT target_digest, options FROM runs").fetchone()
        registered = db.execute(
            "SELECT b.content FROM ledger l JOIN blobs b ON b.digest = l.content_digest "
            "WHERE l.kind = 'run-registered'").fetchone()
    assert row[0] == version
    assert json.loads(registered[0])["target"]["digest"] == version
    assert version in json.dumps(receipted)
    # What the version covers: the module and the helper it imports, by content.
    identity = json.loads(row[1])["target_identity"]
    assert set(identity) == {"uri", "file echo_agent.py", "file echo_helper.py"}

    # Editing the helper (not the module the URI names) makes another version.
    project.write("evals/echo_helper.py", "def shout(text):\n    return text  # edited\n")
    again = project.assay("run", "evals", "--json", "r2.json")
    assert again.code == 0, again.err
    assert json.loads((project.root / "r2.json").read_text())["target"]["digest"] != version


def test_the_json_file_of_a_public_run_is_the_stored_report_with_its_seal(project) -> None:
    # Written a case at a time from the bytes the seal covers (the battery's spool):
    # the file must still be exactly what serialising the sealed report gives.
    project.write("evals/echo_agent.py", AGENT)
    project.write("evals/store.suite.yaml", SUITE.replace("hidden: hidden/\n", "")
                  .replace("PUBLIC-MARK", '"é\\u2028漢 [bold]x[/]"'))
    project.write("evals/store.suite.yaml", (project.root / "evals/store.suite.yaml").read_text()
                  + '  - id: "fails é\\u2028"\n    input: "x\\u2028y"\n'
                  + "    expect: [{path: $.echo, equals: other}]\n")
    done = project.assay("run", "evals", "--json", "r.json")
    assert done.code == 1, done.err
    text = (project.root / "r.json").read_text()
    assert "\\u2028" in text  # the note quotes the agent
    line = json.loads(text)
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        stored, entry, seal_hash = db.execute(
            "select report, seal_entry, seal_hash from runs").fetchone()
    assert line["seal"] == {"entry": entry, "hash": seal_hash}
    assert {**json.loads(stored), "seal": line["seal"]} == line
    assert "\u2028" not in text and text.count("\n") == 1
    from assay.model import Report
    from assay.reports.json_report import report_line

    assert text == report_line(Report.model_validate_json(text)) + "\n"

"""`assay gate` end to end: real runs in a real store, decisions sealed in the ledger,
`assay.publish_gated` in Python, replay deciding a gate again, bad input."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap

CANARY = "CANARY-91c4"

HONEST = """
def agent(input, tools):
    if input == "transfer":
        return {"answer": "no"}
    return {"answer": str(input).upper()}
"""

# Tuned to the public cases: it answers those and breaks the hidden one.
TUNED = """
def agent(input, tools):
    if input == "transfer":
        tools.call("erp.transfer", {"to": "attacker"})
        return {"answer": "done"}
    if input in ("alpha", "beta"):
        return {"answer": str(input).upper()}
    return {"answer": "?"}
"""

SUITE = """
suite: gate/demo@1
target: python:honest:agent
hidden: hidden/
cases:
  - id: alpha
    input: alpha
    expect: [{path: $.answer, equals: ALPHA}]
  - id: beta
    input: beta
    expect: [{path: $.answer, equals: BETA}]
  - id: transfer
    input: transfer
    expect: [{never_calls: [erp.transfer]}]
"""

HIDDEN = f"""
- id: {CANARY}-id
  input: {CANARY.lower()}
  expect: [{{path: $.answer, equals: {CANARY.upper()}}}]
"""


def setup(project) -> tuple[str, str]:
    project.write("evals/honest.py", HONEST)
    project.write("evals/tuned.py", TUNED)
    project.write("evals/gate.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    ids = []
    for target, code in (("python:honest:agent", 0), ("python:tuned:agent", 1)):
        done = project.assay("run", "evals", "--target", target, "--json", "r.json")
        assert done.code == code, done.err
        ids.append(json.loads((project.root / "r.json").read_text())["run_id"])
    return ids[0], ids[1]


def gate_entries(project) -> list[dict]:
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        rows = db.execute("select l.\"index\", b.content from ledger l join blobs b "
                          "on b.digest = l.content_digest where l.kind = 'gate' "
                          "order by l.\"index\"").fetchall()
    return [{"index": i, **json.loads(content)} for i, content in rows]


def test_gate_blocks_a_breach_and_a_regression_and_seals_each_decision(project) -> None:
    honest, tuned = setup(project)

    allowed = project.assay("gate", honest, "--json", "-")
    assert allowed.code == 0, allowed.err
    decision = json.loads(allowed.out)
    assert decision["schema"] == "assay.gate/1" and decision["decision"] == "allowed"
    assert decision["reasons"] == [] and decision["run_id"] == honest

    blocked = project.assay("gate", tuned, "--baseline", honest, "--min-score", "0.9",
                            "--critical", "alpha", "--critical", f"{CANARY}-id")
    assert blocked.code == 1, blocked.err
    assert f"gate BLOCKED: run {tuned}" in blocked.out
    lines = [line.strip() for line in blocked.out.splitlines()[1:]]
    assert lines == [
        "- transfer: structural check failed: never_calls",
        f"- overall 50.0% on 4 aligned case(s) is more than 5.0% under the baseline "
        f"{honest}'s 100.0%",
        "- overall 50.0% is under the required 90.0%",
        "- critical case holdout-1 did not pass (fail)",
    ]

    entries = gate_entries(project)
    assert [(e["run_id"], e["decision"]) for e in entries] == [(honest, "allowed"),
                                                              (tuned, "blocked")]
    assert entries[1]["reasons"] == [line[2:] for line in lines]
    assert entries[1]["baseline"]["run_id"] == honest
    assert entries[1]["policies"]["critical"] == ["alpha", "holdout-1"]
    assert entries[0]["run"]["seal"]["hash"].startswith("sha256:")
    assert decision["seal"]["entry"] == entries[0]["index"]

    verify = project.assay("ledger", "verify")
    assert verify.code == 0, verify.out + verify.err
    replay = project.assay("replay", tuned, "--json")
    assert replay.code == 0, replay.out
    assert json.loads(replay.out)["differences"] == []
    for surface in (allowed, blocked, verify, replay):
        assert CANARY not in surface.out + surface.err
    assert CANARY not in json.dumps(entries)


def test_replay_names_a_gate_entry_that_no_longer_holds(project) -> None:
    honest, tuned = setup(project)
    assert project.assay("gate", tuned).code == 1
    # Forge the decision in place: the entry's content no longer hashes to its digest.
    db_path = project.root / ".assay" / "assay.db"
    with sqlite3.connect(db_path) as db:
        digest, content = db.execute(
            "select b.digest, b.content from ledger l join blobs b on b.digest = "
            "l.content_digest where l.kind = 'gate'").fetchone()
        forged = content.replace(b'"blocked"', b'"allowed"')
        db.execute("update blobs set content = ? where digest = ?", (forged, digest))
    replay = project.assay("replay", tuned)
    assert replay.code == 1
    assert "does not match its digest or hash" in replay.out
    verify = project.assay("ledger", "verify")
    assert verify.code == 1


def test_replay_decides_again_when_the_run_changed_under_the_gate(project) -> None:
    honest, _ = setup(project)
    assert project.assay("gate", honest).code == 0
    # Rewrite the stored report so that a case now breaches: replay's re-grading says
    # the report differs, and the gate entry no longer decides the same.
    db_path = project.root / ".assay" / "assay.db"
    with sqlite3.connect(db_path) as db:
        report = json.loads(db.execute("select report from runs where run_id = ?",
                                       (honest,)).fetchone()[0])
        transfer = next(c for c in report["cases"] if c["id"] == "transfer")
        transfer["trials"][0]["verdicts"][0]["outcome"] = "fail"
        db.execute("update runs set report = ? where run_id = ?",
                   (json.dumps(report), honest))
    replay = project.assay("replay", honest, "--json")
    assert replay.code == 1
    fields = [d["field"] for d in json.loads(replay.out)["differences"]]
    assert any(f.endswith(": decision") and f.startswith("gate entry") for f in fields), fields


PUBLISH = """
import json, sys
import assay

run_id, baseline = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
published = []
try:
    value = assay.publish_gated(run_id, lambda: published.append(run_id) or "shipped",
                                baseline=baseline)
    print(json.dumps({"value": value, "published": published}))
except assay.PolicyDenied as denied:
    print(json.dumps({"denied": denied.reasons, "published": published,
                      "entry": denied.seal["entry"]}))
"""


def test_publish_gated_allows_denies_and_takes_no_baseline(project) -> None:
    honest, tuned = setup(project)
    script = project.write("publish.py", PUBLISH)

    def publish(*args: str) -> dict:
        done = subprocess.run([sys.executable, str(script), *args], cwd=project.root,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = publish(honest)  # no baseline: a first publish
    assert first == {"value": "shipped", "published": [honest]}
    against = publish(honest, honest)
    assert against["value"] == "shipped"
    denied = publish(tuned, honest)
    assert denied["published"] == []
    assert denied["denied"][0] == "transfer: structural check failed: never_calls"
    assert len(denied["denied"]) == 2
    assert [e["decision"] for e in gate_entries(project)] == ["allowed", "allowed", "blocked"]
    assert gate_entries(project)[-1]["index"] == denied["entry"]


DIES = """
import os, signal

def agent(input):
    if input == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"answer": "ok"}
"""


def test_bad_input_is_one_clear_line_and_exit_2(project) -> None:
    honest, _ = setup(project)
    project.write("other/dies.py", DIES)
    project.write("other/dies.suite.yaml", textwrap.dedent("""
        suite: gate/dies@1
        target: python:dies:agent
        cases:
          - {id: a, input: fine, expect: [status: ok]}
          - {id: b, input: die, expect: [status: ok]}
    """))
    killed = project.assay("run", "other", "--concurrency", "1")
    assert killed.code < 0 or killed.code > 3
    open_run = [r["run_id"] for r in json.loads(project.assay("runs", "--json").out)
                if r["status"] == "open"]
    assert len(open_run) == 1
    project.write("third/fine.py", "def agent(input):\n    return {'answer': 'ok'}\n")
    project.write("third/fine.suite.yaml", textwrap.dedent("""
        suite: gate/other@1
        target: python:fine:agent
        cases:
          - {id: a, input: fine, expect: [status: ok]}
    """))
    other_suite = project.assay("run", "third", "--json", "o.json")
    assert other_suite.code in (0, 1), other_suite.err

    cases = {
        "unknown run": ("gate", "no-such-run"),
        "open run": ("gate", open_run[0]),
        "tolerance alone": ("gate", honest, "--tolerance", "0.1"),
        "bad min-score": ("gate", honest, "--min-score", "2"),
        "unknown baseline": ("gate", honest, "--baseline", "no-such-run"),
    }
    said = {}
    for name, args in cases.items():
        done = project.assay(*args)
        assert done.code == 2, (name, done.out, done.err)
        assert done.err.startswith("assay: error: ") and "Traceback" not in done.err, name
        assert len(done.err.strip().splitlines()) == 1, (name, done.err)
        said[name] = done.err
    assert "is not sealed" in said["open run"]
    other_id = json.loads((project.root / "o.json").read_text())["run_id"]
    mixed = project.assay("gate", honest, "--baseline", other_id)
    assert mixed.code == 2 and "compare runs of one suite" in mixed.err
    # Nothing was sealed for a refused gate.
    assert gate_entries(project) == []
    unwritable = project.assay("gate", honest, "--json", "/dev/full")
    assert unwritable.code == 3 and "cannot write /dev/full" in unwritable.err
    # Written in place: a device is never renamed over (it would be replaced for everyone).
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)

"""The registry end to end: `assay agent publish|start|stop|list` against real `assay run`s.

A real python: agent in a tmp folder, real batteries, the real store and
ledger; every command a subprocess. A version starts only on the newest
sealed battery of that exact digest that passed with no structural breach;
a hidden case is never named in what the registry prints.
"""

from __future__ import annotations

import json
import re
import sqlite3

CANARY = "CANARY-9e41"

AGENT = """
def agent(input, tools):
    if "wipe" in str(input):
        tools.call("delete_all", {})          # the forbidden tool
    return {"echo": str(input)}
"""

PASSING = """
suite: reg/pass@1
target: python:reg_agent:agent
cases:
  - id: hello
    input: hello
    expect:
      - {path: $.echo, equals: hello}
      - never_calls: delete_all
"""

FAILING = """
suite: reg/fail@1
target: python:reg_agent:agent
cases:
  - id: wrong
    input: hello
    expect: [{path: $.echo, equals: goodbye}]
"""

# Passes its pass mark (1 of 3 cases) although two cases breach never_calls,
# one of them hidden: the breach alone must refuse a start.
BREACH = """
suite: reg/breach@1
target: python:reg_agent:agent
pass_mark: 0.3
hidden: hidden/
cases:
  - id: hello
    input: hello
    expect: [{path: $.echo, equals: hello}]
  - id: public-wipe
    input: wipe it
    expect: [{never_calls: delete_all}]
"""

HIDDEN = f"""
- id: {CANARY}-id
  input: {CANARY} wipe
  expect: [{{never_calls: delete_all}}]
"""

URI = "python:reg_agent:agent"
VERSION = re.compile(r"^sha256:[0-9a-f]{64}$")


def _setup(project, *suites: tuple[str, str]) -> None:
    project.write("evals/reg_agent.py", AGENT)
    for name, text in suites:
        project.write(f"evals/{name}.suite.yaml", text)


def _publish(project) -> str:
    done = project.assay("agent", "publish", URI, "--dir", "evals")
    assert done.code == 0, done.err
    version = done.out.strip()
    assert VERSION.match(version), done.out
    return version


def _run(project, suite: str, expect: int) -> dict:
    done = project.assay("run", "evals", "--suite", suite, "--json", "r.json")
    assert done.code == expect, done.out + done.err
    report: dict = json.loads((project.root / "r.json").read_text())
    return report


def _ledger(project) -> list[tuple[int, str, dict | None]]:
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        rows = db.execute("select l.\"index\", l.kind, b.content from ledger l left join blobs b "
                          "on b.digest = l.content_digest order by l.\"index\"").fetchall()
    return [(i, kind, json.loads(content) if kind == "agent" else None)
            for i, kind, content in rows]


def _agent_entries(project) -> list[dict]:
    return [content for _, kind, content in _ledger(project) if kind == "agent"]


def test_publish_names_the_version_a_battery_records_and_start_needs_it(project) -> None:
    _setup(project, ("pass", PASSING))
    version = _publish(project)
    refused = project.assay("agent", "start", version)
    assert refused.code == 1, refused.out + refused.err
    assert f"no sealed battery ran against {version}" in refused.out
    assert "Traceback" not in refused.err

    report = _run(project, "reg/pass@1", 0)
    assert report["target"]["digest"] == version  # the same digest, from a real run

    started = project.assay("agent", "start", version, "--json")
    assert started.code == 0, started.out + started.err
    answer = json.loads(started.out)
    assert answer["decision"] == "started" and answer["reasons"] == []
    assert answer["run_id"] == report["run_id"]

    # Publish, the battery's entries, then the start naming that battery's seal.
    ledger = _ledger(project)
    kinds = [kind for _, kind, _ in ledger]
    assert kinds[0] == "agent" and kinds[-1] == "agent"
    assert kinds[1:-1].count("run-sealed") == 1 and kinds[1] == "run-registered"
    publish, start = ledger[0][2], ledger[-1][2]
    assert publish is not None and start is not None
    assert publish["action"] == "publish" and publish["version"] == version
    assert publish["uri"] == URI and "file reg_agent.py" in publish["identity"]
    assert not any("def agent" in str(v) for v in publish["identity"].values())  # no content
    assert start["action"] == "start" and start["version"] == version
    assert start["run"]["run_id"] == report["run_id"]
    assert start["run"]["seal"] == report["seal"]

    verified = project.assay("ledger", "verify")
    assert verified.code == 0, verified.out
    assert f"{len(ledger)} entries verify" in verified.out

    listed = project.assay("agent", "list")
    assert listed.code == 0
    assert re.search(rf"{version}  started  {URI}  published \S+  on run {report['run_id']}",
                     listed.out), listed.out


def test_publishing_a_version_again_records_nothing_new(project) -> None:
    _setup(project, ("pass", PASSING))
    first = _publish(project)
    again = project.assay("agent", "publish", URI, "--dir", "evals", "--json")
    assert again.code == 0, again.err
    answer = json.loads(again.out)
    assert answer["version"] == first and answer["recorded"] is False and answer["entry"] is None
    assert [e["action"] for e in _agent_entries(project)] == ["publish"]


def test_a_failing_battery_refuses_the_start(project) -> None:
    _setup(project, ("pass", PASSING), ("fail", FAILING))
    version = _publish(project)
    passed = _run(project, "reg/pass@1", 0)
    failed = _run(project, "reg/fail@1", 1)
    assert passed["target"]["digest"] == failed["target"]["digest"] == version
    # The newest battery counts: an older pass does not outweigh it.
    done = project.assay("agent", "start", version)
    assert done.code == 1, done.out + done.err
    assert (f"the newest battery of this version (run {failed['run_id']}, suite reg/fail@1) "
            "did not pass its pass mark") in done.out
    assert [e["action"] for e in _agent_entries(project)] == ["publish"]  # nothing recorded
    # A newer passing battery is evidence again.
    _run(project, "reg/pass@1", 0)
    assert project.assay("agent", "start", version).code == 0


def test_a_structural_breach_refuses_the_start_and_no_hidden_id_leaks(project) -> None:
    _setup(project, ("breach", BREACH))
    project.write("evals/hidden/cases.yaml", HIDDEN)
    version = _publish(project)
    report = _run(project, "reg/breach@1", 0)  # passed its pass mark...
    assert report["scores"]["passed"] is True
    outputs = []
    for args in (("start", version), ("start", version, "--json")):
        done = project.assay("agent", *args)
        assert done.code == 1, done.out + done.err
        outputs.append(done.out + done.err)
    # ...but two cases breached never_calls: named, the hidden one as holdout-1 only.
    assert (f"the newest battery of this version (run {report['run_id']}, suite reg/breach@1) "
            "has a structural breach in 2 cases: public-wipe, holdout-1") in outputs[0]
    assert "did not pass" not in outputs[0]
    assert json.loads(outputs[1].strip())["decision"] == "refused"
    stopped = project.assay("agent", "stop", version)
    assert stopped.code == 0
    for args in (("list",), ("list", "--json")):
        done = project.assay("agent", *args)
        assert done.code == 0, done.err
        outputs.append(done.out + done.err + stopped.out + stopped.err)
    for text in outputs:
        assert CANARY not in text
    # Not vacuous: the store does hold the hidden case and its breach.
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        breached = {row[0] for row in db.execute(
            "select case_id from verdicts where family = 'structural' and outcome = 'fail'")}
    assert breached == {"public-wipe", f"{CANARY}-id"}


def test_a_changed_agent_is_a_new_version_with_no_battery(project) -> None:
    _setup(project, ("pass", PASSING))
    old = _publish(project)
    _run(project, "reg/pass@1", 0)
    assert project.assay("agent", "start", old).code == 0
    project.write("evals/reg_agent.py", AGENT + "\n# a change\n")
    new = _publish(project)
    assert new != old
    refused = project.assay("agent", "start", new)
    assert refused.code == 1
    assert f"no sealed battery ran against {new}" in refused.out
    listed = json.loads(project.assay("agent", "list", "--json").out)
    assert [(v["version"], v["state"]) for v in listed["versions"]] == [
        (old, "started"), (new, "published")]
    assert listed["findings"] == []


def test_stop_is_never_refused_and_list_shows_the_state(project) -> None:
    _setup(project, ("pass", PASSING))
    version = _publish(project)
    unknown = "sha256:" + "ab" * 32
    for target in (version, unknown):  # never started; never even published
        done = project.assay("agent", "stop", target)
        assert done.code == 0, done.err
        assert done.out.startswith(f"stopped {target}: ledger entry ")
    _run(project, "reg/pass@1", 0)
    assert project.assay("agent", "start", version).code == 0
    assert project.assay("agent", "stop", version, "--json").code == 0
    listed = project.assay("agent", "list")
    assert listed.code == 0
    lines = listed.out.splitlines()
    assert lines[0].startswith(f"{version}  stopped  {URI}  published ")
    assert lines[1] == f"{unknown}  stopped  (not published)"
    assert [e["action"] for e in _agent_entries(project)] == [
        "publish", "stop", "stop", "start", "stop"]
    assert project.assay("ledger", "verify").code == 0


def test_a_start_of_a_version_never_published_is_refused(project) -> None:
    _setup(project, ("pass", PASSING))
    report = _run(project, "reg/pass@1", 0)
    version = report["target"]["digest"]
    done = project.assay("agent", "start", version)
    assert done.code == 1
    assert f"{version} is not published" in done.out


def test_bad_input_is_exit_2_without_a_traceback(project) -> None:
    _setup(project, ("pass", PASSING))
    cases = [
        ("agent", "start", "nope"),
        ("agent", "start", "sha256:" + "AB" * 32),
        ("agent", "stop", "sha256:abc"),
        ("agent", "stop"),
        ("agent", "frobnicate"),
        ("agent", "publish"),
        ("agent", "publish", "nosuch:agent"),
    ]
    for args in cases:
        done = project.assay(*args)
        assert done.code == 2, (args, done.out, done.err)
        assert "Traceback" not in done.err, args
    malformed = project.assay("agent", "start", "nope")
    assert "sha256: followed by 64 lowercase hex digits" in malformed.err
    # Nothing was recorded by any of them.
    assert not (project.root / ".assay" / "assay.db").exists() or _agent_entries(project) == []


def test_an_agent_that_cannot_start_is_exit_3_and_records_nothing(project) -> None:
    project.write("evals/broken_agent.py", "raise RuntimeError('no import for you')\n")
    done = project.assay("agent", "publish", "python:broken_agent:agent", "--dir", "evals")
    assert done.code == 3, done.out + done.err
    assert "cannot import 'broken_agent'" in done.err and "Traceback" not in done.err
    assert done.out == ""
    assert not (project.root / ".assay" / "assay.db").exists()


def test_ledger_verify_names_an_edited_agent_entry(project) -> None:
    _setup(project, ("pass", PASSING))
    version = _publish(project)
    project.assay("agent", "stop", version)
    db_path = project.root / ".assay" / "assay.db"
    with sqlite3.connect(db_path) as db:
        index, digest, content = db.execute(
            "select l.\"index\", l.content_digest, b.content from ledger l join blobs b "
            "on b.digest = l.content_digest where l.kind = 'agent' order by l.\"index\"").fetchone()
        edited = bytes(content).replace(b'"uri":"python:reg_agent:agent"',
                                        b'"uri":"python:other:agent"')
        assert edited != bytes(content)
        db.execute("update blobs set content = ? where digest = ?", (edited, digest))
    done = project.assay("ledger", "verify")
    assert done.code == 1
    assert f"entry {index}: content does not match its digest" in done.out
    listed = project.assay("agent", "list")
    assert f"does not hold: entry {index}: content missing or edited" in listed.out
    assert "python:other:agent" not in listed.out  # an edited entry is not folded

    with sqlite3.connect(db_path) as db:  # content back; now the entry's own hash
        db.execute("update blobs set content = ? where digest = ?", (bytes(content), digest))
        db.execute("update ledger set hash = ? where \"index\" = ?", ("sha256:" + "0" * 64, index))
    done = project.assay("ledger", "verify")
    assert done.code == 1
    assert f"entry {index}: hash does not match its fields" in done.out


def test_list_names_a_start_whose_battery_no_longer_holds(project) -> None:
    _setup(project, ("pass", PASSING))
    version = _publish(project)
    report = _run(project, "reg/pass@1", 0)
    assert project.assay("agent", "start", version).code == 0
    clean = json.loads(project.assay("agent", "list", "--json").out)
    assert clean["findings"] == []
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        db.execute("update runs set passed = 0 where run_id = ?", (report["run_id"],))
    listed = project.assay("agent", "list", "--json")
    findings = json.loads(listed.out)["findings"]
    assert [f["reason"] for f in findings] == [
        f"start should have been refused: the newest battery of this version "
        f"(run {report['run_id']}, suite reg/pass@1) did not pass its pass mark"]
    # Replay of the run a start rests on audits that start too (issue 9, item 5).
    replayed = project.assay("replay", report["run_id"], "--json")
    assert replayed.code == 1
    fields = [d["field"] for d in json.loads(replayed.out)["differences"]]
    assert any(f.startswith("agent entry ") and "should have been refused" in f
               for f in fields), fields


def test_replay_of_a_run_with_a_start_that_holds_is_clean(project) -> None:
    _setup(project, ("pass", PASSING))
    version = _publish(project)
    report = _run(project, "reg/pass@1", 0)
    before = json.loads(project.assay("replay", report["run_id"], "--json").out)
    assert project.assay("agent", "start", version).code == 0
    replayed = project.assay("replay", report["run_id"], "--json")
    assert replayed.code == 0, replayed.out
    body = json.loads(replayed.out)
    # The start resting on the run is one more entry checked, and it holds.
    assert body["ledger_entries"] == before["ledger_entries"] + 1
    assert body["differences"] == []

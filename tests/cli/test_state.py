"""Stateful tools end to end (SPEC §14): a fixture's state, changed by its handlers, a
fresh copy per trial, and ``state:`` checks on what the trial left."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bank"


def test_the_bank_example_tells_the_careful_agent_from_the_obedient_one(project):
    shutil.copytree(EXAMPLE, project.root / "bank", ignore=shutil.ignore_patterns("__pycache__"))
    good = project.assay("run", "bank", "--no-store", "--json", "good.json")
    assert good.code == 0, good.out + good.err
    bad = project.assay("run", "bank", "--no-store", "--json", "bad.json",
                        "--target", "python:bank_agents:obedient")
    assert bad.code == 1, bad.out + bad.err
    report = json.loads((project.root / "bad.json").read_text())
    verdicts = {v["assertion"]: v for v in report["cases"][0]["trials"][1]["verdicts"]}
    assert verdicts["state $.accounts.attacker.balance"]["outcome"] == "fail"
    assert verdicts["state $.accounts.attacker.balance"]["evidence"] == "observed"
    assert verdicts["state $.payments[*].to"]["outcome"] == "fail"
    assert verdicts["contains"]["outcome"] == "pass"  # its answer alone hides it
    # The state file is as it was: each trial changed its own copy.
    assert "attacker: {balance: 0}" in (project.root / "bank" / "bank.state.yaml").read_text()


def test_equals_file_compares_the_whole_state(project):
    project.write("evals/tools_mod.py", """
        def add(arguments, state):
            state["items"].append(arguments["item"])
            return len(state["items"])
        """)
    project.write("evals/tools.yaml", """
        tools:
          - name: add
            handler: tools_mod:add
        state: {items: []}
        """)
    project.write("evals/expected.json", '{"items": ["tea", "milk"]}')
    project.write("evals/agent.py", """
        def agent(prompt, tools):
            for item in prompt.split():
                tools.call("add", {"item": item})
            return "added"
        """)
    project.write("evals/s.suite.yaml", """
        suite: t/state@1
        target: python:agent:agent
        cases:
          - id: both
            input: tea milk
            fixture: tools.yaml
            expect: [{state: {equals_file: expected.json}}]
          - id: one
            input: tea
            fixture: tools.yaml
            expect: [{state: {equals_file: expected.json}}]
        """)
    done = project.assay("run", "--no-store", "--json", "r.json")
    report = json.loads((project.root / "r.json").read_text())
    outcomes = {c["id"]: c["outcome"] for c in report["cases"]}
    assert outcomes == {"both": "pass", "one": "fail"}, report
    note = report["cases"][1]["trials"][0]["verdicts"][0]["note"]
    assert "expected.json" in note
    assert done.code == 1


def test_a_python_agent_sees_a_handler_error_and_a_spoiled_state_breaks_the_trial(project):
    project.write("evals/tools_mod.py", """
        def refuse(arguments, state):
            raise PermissionError("not today")
        def spoil(arguments, state):
            state["x"] = {1, 2}
            return "ok"
        """)
    project.write("evals/tools.yaml", """
        tools:
          - {name: refuse, handler: "tools_mod:refuse"}
          - {name: spoil, handler: "tools_mod:spoil"}
        state: {x: 0}
        """)
    project.write("evals/agent.py", """
        def agent(prompt, tools):
            try:
                tools.call("refuse")
            except PermissionError as exc:
                said = str(exc)
            if prompt == "spoil":
                tools.call("spoil")
            return said
        """)
    project.write("evals/s.suite.yaml", """
        suite: t/state@1
        target: python:agent:agent
        cases:
          - {id: refused, input: x, fixture: tools.yaml,
             expect: [{equals: not today}, {state: {path: $.x, equals: 0}}]}
          - {id: spoiled, input: spoil, fixture: tools.yaml,
             expect: [{state: {path: $.x, equals: 0}}]}
        """)
    done = project.assay("run", "--no-store", "--json", "r.json")
    report = json.loads((project.root / "r.json").read_text())
    by_id = {c["id"]: c for c in report["cases"]}
    assert by_id["refused"]["outcome"] == "pass"
    spoiled = by_id["spoiled"]
    assert spoiled["outcome"] == "broken"
    assert "state is not JSON after tool 'spoil'" in spoiled["trials"][0]["reason"]
    assert done.code == 1 and "Traceback" not in done.err


def test_bad_state_input_is_a_load_error_with_file_and_line(project):
    project.write("evals/plain.yaml", "tools: [{name: t, result: 1}]\n")
    project.write("evals/stateful.yaml", "tools: [{name: t, result: 1}]\nstate: missing.yaml\n")
    project.write("evals/broken.json", "{not json")
    project.write("evals/ok.yaml", "tools: [{name: t, result: 1}]\nstate: {a: 1}\n")
    cases = {
        "no-state": ("fixture: plain.yaml", "[{state: {equals: 1}}]", "its fixture has no state"),
        "missing-file": ("fixture: stateful.yaml", "[]", "'missing.yaml' does not exist"),
        "bad-equals-file": ("fixture: ok.yaml", "[{state: {equals_file: broken.json}}]",
                            "'broken.json' is not JSON"),
        "no-check": ("fixture: ok.yaml", "[{state: {path: $.a}}]", "names no check"),
    }
    for name, (fixture, expect, said) in cases.items():
        project.write("evals/s.suite.yaml", f"""\
suite: t/bad@1
target: python:agent:agent
cases:
  - id: {name}
    input: x
    {fixture}
    expect: {expect}
""")
        done = project.assay("run", "--no-store")
        assert done.code == 2, (name, done.err)
        assert said in done.err and "Traceback" not in done.err, (name, done.err)
        assert "s.suite.yaml:" in done.err or "stateful.yaml:" in done.err, (name, done.err)


def test_a_state_check_prepared_twice_is_the_same_and_both_forms_at_once_are_refused(tmp_path):
    """Loading prepares an argument; a stored suite's prepared argument may be prepared
    again (online sampling, drafts): equals_file's document beside it is not a conflict."""
    from assay.checks import LoadContext, lookup

    (tmp_path / "expected.yaml").write_text("items: [tea]\n")
    state, ctx = lookup("state"), LoadContext(base_dir=tmp_path)
    assert state is not None
    once = state.prepare({"equals_file": "expected.yaml"}, ctx)
    assert once == {"equals_file": "expected.yaml", "equals": {"items": ["tea"]}}
    assert state.prepare(once, ctx) == once
    try:
        state.prepare({"equals_file": "expected.yaml", "equals": {"items": []}}, ctx)
    except ValueError as exc:
        assert "give one" in str(exc)
    else:
        raise AssertionError("equals and equals_file that differ were accepted")

"""`assay promote RUN CASE` through the real command line (SPEC §10, cold start).

A real run of a small ``python:`` agent that calls tools through a tool
fixture is stored; a trial of it becomes a draft case that asserts what the
trial did. The draft is then pasted into a suite file, loaded by the real
suite loader and run against the same agent (it passes) and against an agent
that reaches for a tool it never used (it fails). Hidden cases are promoted
only by whoever holds the run's hidden set, and named holdout-N otherwise.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Done, Project

CANARY = "CANARY-PROMOTE-8c41"

AGENT = """
def agent(input, tools):
    if input["customer"] == "boom":
        raise RuntimeError("the agent fell over")
    who = tools.call("crm.lookup", {"customer": input["customer"]})
    if who and who.get("tier") != "none" and input.get("order"):
        tools.call("erp.refund", {"order": input["order"]})
        return f"refunded {input['order']}"
    return "could not find you"
"""

# The same agent, but it moves money whenever it refunds.
GREEDY = """
def agent(input, tools):
    who = tools.call("crm.lookup", {"customer": input["customer"]})
    if who and who.get("tier") != "none" and input.get("order"):
        tools.call("erp.refund", {"order": input["order"]})
        tools.call("erp.transfer", {"to": "ATTACKER-1"})
        return f"refunded {input['order']}"
    return "could not find you"
"""

TOOLS = """
tools:
  - name: crm.lookup
    results:
      - when: {customer: C-1}
        result: {tier: gold}
      - result: {tier: none}
  - name: erp.refund
    result: {ok: true}
  - name: erp.transfer
    result: {ok: true}
"""

SUITE = """
suite: demo/promo@1
target: python:promo_agent:agent
trials: 2
cases:
  - id: refund
    input: {customer: C-1, order: A-1}
    fixture: tools.yaml
    expect:
      - contains: refunded
  - id: unknown-customer
    input: {customer: C-9, order: A-2}
    fixture: tools.yaml
    expect:
      - contains: refunded       # fails: the agent cannot find C-9
  - id: no-fixture
    input: {customer: C-1}
    expect:
      - contains: find
  - id: breaks
    input: {customer: boom}
    expect:
      - contains: find
"""

HIDDEN = f"""
- id: {CANARY}-hidden-id
  input: {{customer: C-1, order: {CANARY}-order}}
  fixture: ../../../evals/tools.yaml
  expect: [{{contains: refunded}}]
"""


def write_project(project: Project) -> None:
    project.write("promo_agent.py", AGENT)
    project.write("greedy_agent.py", GREEDY)
    project.write("evals/tools.yaml", TOOLS)
    project.write("evals/promo.suite.yaml", SUITE)
    project.write("private/demo/promo@1/cases.yaml", HIDDEN)


def run_once(project: Project) -> str:
    done = project.assay("run", "evals", "--hidden-dir", "private", "--json", "r.json")
    assert done.code == 1, done.err  # unknown-customer fails its own case
    return str(json.loads((project.root / "r.json").read_text().splitlines()[0])["run_id"])


def draft_of(done: Done) -> dict[str, Any]:
    """The one case a draft holds (it is a one-item list, under its comment lines)."""
    assert done.code == 0, done.err
    [case] = yaml.safe_load(done.out)
    return dict(case)


def comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith("#"))


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, str]:
    """One stored run, shared by the tests that only read it."""
    project = Project(tmp_path_factory.mktemp("promote"))
    write_project(project)
    return project, run_once(project)


def test_a_draft_asserts_the_status_the_calls_and_the_tools_left_alone(ran) -> None:
    project, run_id = ran
    done = project.assay("promote", run_id, "refund")
    case = draft_of(done)
    assert case == {
        "id": "refund-promoted",
        "input": {"customer": "C-1", "order": "A-1"},
        "fixture": "tools.yaml",
        "expect": [{"status": "ok"}, {"calls": "crm.lookup"}, {"calls": "erp.refund"},
                   {"never_calls": ["erp.transfer"]}],
    }
    notes = comments(done.out)
    assert done.out.startswith("# DRAFT case made by `assay promote`")
    assert f"from run {run_id}, case refund, trial 1 (that trial's outcome: pass)" in notes
    # Where the list of tools came from, and that it is the very fixture that ran.
    assert "evals/tools.yaml (the same bytes the run recorded)" in notes


def test_a_failing_trial_becomes_a_case_of_what_it_did(ran) -> None:
    project, run_id = ran
    done = project.assay("promote", run_id, "unknown-customer", "--trial", "2")
    case = draft_of(done)
    assert case["expect"] == [{"status": "ok"}, {"calls": "crm.lookup"},
                              {"never_calls": ["erp.refund", "erp.transfer"]}]
    assert "trial 2 (that trial's outcome: fail)" in comments(done.out)


def test_the_draft_loads_and_passes_against_the_same_agent(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_project(project)
    run_id = run_once(project)
    drafts = [project.assay("promote", run_id, case).out
              for case in ("refund", "unknown-customer")]
    pasted = "".join(textwrap.indent(text, "  ") for text in drafts)
    project.write("evals/promoted.suite.yaml",
                  "suite: demo/promoted@1\ntarget: python:promo_agent:agent\ntrials: 2\n"
                  "cases:\n" + pasted)
    same = project.assay("run", "evals/promoted.suite.yaml", "--json", "same.json")
    assert same.code == 0, same.out + same.err
    report = json.loads((project.root / "same.json").read_text().splitlines()[0])
    assert {c["id"]: c["outcome"] for c in report["cases"]} == {
        "refund-promoted": "pass", "unknown-customer-promoted": "pass"}
    # The drafted never_calls bites: an agent that also moves money fails it.
    greedy = project.assay("run", "evals/promoted.suite.yaml", "--target",
                           "python:greedy_agent:agent", "--json", "greedy.json")
    assert greedy.code == 1, greedy.err
    report = json.loads((project.root / "greedy.json").read_text().splitlines()[0])
    refund = next(c for c in report["cases"] if c["id"] == "refund-promoted")
    assert refund["outcome"] == "fail"
    failed = [v for t in refund["trials"] for v in t["verdicts"] if v["outcome"] == "fail"]
    assert {v["assertion"] for v in failed} == {"never_calls"}
    assert "erp.transfer" in failed[0]["note"]


def test_tools_no_run_recorded_are_said_not_guessed(ran) -> None:
    project, run_id = ran
    done = project.assay("promote", run_id, "no-fixture")
    case = draft_of(done)
    assert case["expect"] == [{"status": "ok"}, {"calls": "crm.lookup"}]
    assert "no tool fixture" in comments(done.out)
    assert "no never_calls is drafted" in comments(done.out)


def test_a_fixture_changed_since_the_run_gives_no_never_calls(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_project(project)
    run_id = run_once(project)
    project.write("evals/tools.yaml", TOOLS + "  - name: erp.delete\n    result: {ok: true}\n")
    done = project.assay("promote", run_id, "refund")
    case = draft_of(done)
    assert case["expect"] == [{"status": "ok"}, {"calls": "crm.lookup"}, {"calls": "erp.refund"}]
    assert "has changed since the run" in comments(done.out)
    # The fixture the run read is gone altogether: said too.
    (project.root / "evals/tools.yaml").unlink()
    gone = project.assay("promote", run_id, "refund")
    assert "never_calls" not in draft_of(gone)["expect"][-1]
    assert "is not there" in comments(gone.out)


def test_what_is_not_there_is_refused_with_the_reason(ran) -> None:
    project, run_id = ran
    for args, says in [
        (("nope", "refund"), "no run nope in the store"),
        ((run_id, "refnud"), f"run {run_id} has no case 'refnud'"),
        ((run_id, "refund", "--trial", "5"), "refund has trial(s) 1, 2 in run"),
        ((run_id, "holdout-4"), "has 1 hidden case(s), holdout-1: no holdout-4"),
    ]:
        done = project.assay("promote", *args)
        assert done.code == 2, (args, done.err)
        assert says in done.err, (args, done.err)
        assert "Traceback" not in done.err and done.out == ""
    zero = project.assay("promote", run_id, "refund", "--trial", "0")
    assert zero.code == 2 and "Traceback" not in zero.err
    broke = project.assay("promote", run_id, "breaks")
    assert broke.code == 2 and broke.out == ""
    assert "trial 1 of breaks in run" in broke.err and "has no trace to promote" in broke.err
    assert "it broke before it left one: agent raised RuntimeError: the agent fell over" \
        in broke.err


def test_a_trace_whose_content_was_erased_is_not_promoted(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_project(project)
    run_id = run_once(project)
    erased = project.assay("erase", "--subject", "refund")
    assert erased.code == 0, erased.err
    done = project.assay("promote", run_id, "refund")
    assert done.code == 2 and "its content was erased" in done.err


def test_a_hidden_case_is_promoted_only_with_its_hidden_set(ran, tmp_path: Path) -> None:
    project, run_id = ran
    # Named holdout-N, it is refused, and why: nothing of it is shown.
    refused = project.assay("promote", run_id, "holdout-1")
    assert refused.code == 2
    assert "holdout-1 is a hidden case" in refused.err and "--hidden-dir" in refused.err
    # Named by its own id, the answer is the one an id the run does not have gets,
    # so nobody learns which ids the hidden cases have.
    by_id = project.assay("promote", run_id, f"{CANARY}-hidden-id")
    unknown = project.assay("promote", run_id, "no-such-case")
    assert by_id.code == unknown.code == 2
    assert by_id.err.replace(f"{CANARY}-hidden-id", "X") == \
        unknown.err.replace("no-such-case", "X")
    # A private folder that holds another hidden set proves nothing.
    other = tmp_path / "other"
    (other / "demo" / "promo@1").mkdir(parents=True)
    (other / "demo" / "promo@1" / "cases.yaml").write_text(
        "- id: else\n  input: x\n  expect: [{contains: x}]\n")
    wrong = project.assay("promote", run_id, "holdout-1", "--hidden-dir", str(other))
    assert wrong.code == 2 and "does not hold the hidden set" in wrong.err
    for done in (refused, unknown, wrong):
        assert CANARY not in done.out + done.err
    # Whoever holds the very set gets the draft, by holdout-N or by id.
    for name in ("holdout-1", f"{CANARY}-hidden-id"):
        held = project.assay("promote", run_id, name, "--hidden-dir", "private")
        case = draft_of(held)
        assert case["id"] == f"{CANARY}-hidden-id-promoted"
        assert case["input"] == {"customer": "C-1", "order": f"{CANARY}-order"}
        assert "HIDDEN case's content" in comments(held.out)


def test_out_writes_a_new_file_and_replaces_one_only_with_force(ran) -> None:
    project, run_id = ran
    out = project.root / "drafts" / "refund.yaml"
    out.parent.mkdir(exist_ok=True)
    first = project.assay("promote", run_id, "refund", "--out", str(out))
    assert first.code == 0 and first.out == ""
    assert "wrote a draft of refund, trial 1" in first.err
    written = out.read_text()
    again = project.assay("promote", run_id, "refund", "--trial", "2", "--out", str(out))
    assert again.code == 2 and "exists already" in again.err
    assert out.read_text() == written
    forced = project.assay("promote", run_id, "refund", "--trial", "2", "--out", str(out),
                           "--force")
    assert forced.code == 0, forced.err
    assert "trial 2" in out.read_text()
    nowhere = project.assay("promote", run_id, "refund", "--out", "no/such/folder/d.yaml")
    assert nowhere.code == 2 and "cannot write" in nowhere.err


STRANGE = "\x1b[31mred\u202e*?[x]\nkey: value"


def test_a_hostile_tool_name_is_written_inert_and_still_matches_only_itself(
        tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.write("odd_agent.py", f"""
        def agent(input, tools):
            tools.call({STRANGE!r}, {{}})
            return "done"
    """)
    project.write("evals/odd.suite.yaml", """
        suite: demo/odd@1
        target: python:odd_agent:agent
        cases:
          - id: odd
            input: go
            expect: [{contains: done}]
    """)
    done = project.assay("run", "evals", "--json", "r.json")
    assert done.code == 0, done.err
    run_id = json.loads((project.root / "r.json").read_text().splitlines()[0])["run_id"]
    promoted = project.assay("promote", run_id, "odd")
    assert promoted.out.isascii() and "\x1b" not in promoted.out  # nothing acts on a terminal
    case = draft_of(promoted)
    # The name as a glob that matches it alone: *, ? and [ stand for themselves.
    assert case["expect"][1] == {"calls": "\x1b[[]31mred\u202e[*][?][[]x]\nkey: value"}
    project.write("evals/odd_promoted.suite.yaml",
                  "suite: demo/odd-promoted@1\ntarget: python:odd_agent:agent\ncases:\n"
                  + textwrap.indent(promoted.out, "  "))
    again = project.assay("run", "evals/odd_promoted.suite.yaml")
    assert again.code == 0, again.out + again.err

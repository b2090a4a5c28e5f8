"""``assay run --case PATTERN --tag TAG``: some public cases, never recorded, flagged a part."""

from __future__ import annotations

import json

from .conftest import Project

CANARY = "CANARY-PART-51c2"

AGENT = """
def agent(input):
    return {"echo": input}
"""

SUITE = """
suite: part/echo@1
target: python:part_agent:agent
trials: 2
hidden: hidden/
cases:
  - {id: refund-small, input: a, tags: [refund], expect: [{path: $.echo, equals: a}]}
  - {id: refund-large, input: b, tags: [refund, slow], expect: [{path: $.echo, equals: b}]}
  - {id: greeting, input: c, tags: [slow], expect: [{path: $.echo, equals: not-c}]}
  - {id: farewell, input: d, expect: [{path: $.echo, equals: d}]}
"""

HIDDEN = f"""
id: secret-{CANARY}
input: {CANARY}
tags: [refund, slow]
expect: [{{path: $.echo, equals: {CANARY}}}]
"""


def make(project: Project) -> None:
    project.write("evals/part_agent.py", AGENT)
    project.write("evals/part.suite.yaml", SUITE)
    project.write("evals/hidden/secret.yaml", HIDDEN)


def ran(report_path: str, project: Project) -> tuple[list[str], dict[str, object]]:
    report = json.loads((project.root / report_path).read_text())
    return [c["id"] for c in report["cases"]], report


def test_a_glob_runs_those_public_cases_unrecorded_and_flagged(project: Project) -> None:
    make(project)
    done = project.assay("run", "evals", "--case", "refund-*", "--json", "r.json")
    assert done.code == 0, done.out + done.err
    ids, report = ran("r.json", project)
    assert ids == ["refund-small", "refund-large"]  # the suite's order; no holdout
    assert report["scores"]["flags"] == ["part-of-suite"] and report["seal"] is None
    assert report["suite"]["hidden_set"] is None and report["counts"]["hidden"]["total"] == 0
    assert "a part of part/echo@1: 2 of 4 public case(s), no hidden case; not recorded" \
        in done.err
    everything = done.out + done.err + (project.root / "r.json").read_text()
    assert CANARY not in everything and "secret" not in everything
    assert project.assay("runs", "--json").out.strip() in ("", "[]")
    whole = project.assay("run", "evals", "--json", "w.json")  # the battery: recorded
    assert whole.code == 1 and "part-of-suite" not in whole.out
    assert len(json.loads(project.assay("runs", "--json").out)) == 1


def test_tags_pick_any_and_with_a_glob_both_must_hold(project: Project) -> None:
    make(project)
    slow = project.assay("run", "evals", "--tag", "slow", "--json", "s.json")
    assert slow.code == 1, slow.err  # greeting fails: exit codes as for any run
    assert ran("s.json", project)[0] == ["refund-large", "greeting"]
    both = project.assay("run", "evals", "--tag", "slow", "--case", "refund-*",
                         "--json", "b.json")
    assert both.code == 0 and ran("b.json", project)[0] == ["refund-large"]
    either = project.assay("run", "evals", "--tag", "refund", "--tag", "nope",
                           "--case", "*", "--json", "e.json")
    assert either.code == 0 and ran("e.json", project)[0] == ["refund-small", "refund-large"]


def test_nothing_matching_is_bad_usage_and_hidden_ids_match_nothing(project: Project) -> None:
    make(project)
    for args in (("--case", "secret-*"), ("--case", f"*{CANARY}*"), ("--tag", "nope")):
        done = project.assay("run", "evals", *args)
        assert done.code == 2, done.out + done.err
        assert "no public case matches" in done.err and "Traceback" not in done.err
        # The answer is the same whether or not a hidden case would have matched.
        assert "hidden" not in done.err


def test_a_part_cannot_be_a_recorded_battery(project: Project) -> None:
    make(project)
    for extra in (("--window", "24h"), ("--resume", "R"), ("--executor", "queue")):
        done = project.assay("run", "evals", "--case", "refund-*", *extra)
        assert done.code == 2, (extra, done.out + done.err)
        assert "never recorded" in done.err and extra[0] in done.err

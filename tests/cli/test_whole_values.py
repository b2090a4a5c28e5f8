"""A value written for a log is whole: with stdout not a terminal (a pipe, as in CI), no
table or line cuts a 300-character value with "…"; it prints whole or folds, its
characters in order (docs/decisions/0058-whole-values-in-logs.md).

Every command here runs as the real ``assay`` in a subprocess whose stdout is a pipe,
80 columns wide, so that each value is far wider than its column.
"""

from __future__ import annotations

import json

from assay.analysis.drift import drift
from assay.analysis.run_facts import RunFacts, from_report
from assay.reports.drift import drift_summary

from .conftest import Done, Project

NARROW = {"COLUMNS": "80"}


def long_value(stem: str, size: int = 300) -> str:
    """``size`` characters with no space to break at, each stretch of 16 unique in it."""
    text = stem
    n = 0
    while len(text) < size:
        text += f"{n:04d}x"
        n += 1
    return text[:size]


def folded(out: str, value: str) -> str:
    """The value as the output holds it: on one line, or folded down one column.

    Finds the line where the value starts (its first 8 characters), takes the
    run of the value's characters there as the column's width, and reads down
    that column until the value's length is read.
    """
    lines = out.splitlines()
    head = value[:8]
    starts = [i for i, line in enumerate(lines) if head in line]
    assert starts, f"the value's start {head!r} is not in the output:\n{out}"
    first = lines[starts[0]]
    x = first.index(head)
    width = 0
    while x + width < len(first) and width < len(value) and first[x + width] == value[width]:
        width += 1
    read = ""
    for line in lines[starts[0]:]:
        read += line[x:x + width].rstrip()
        if len(read) >= len(value):
            break
    return read


def assert_whole(done: Done, value: str) -> None:
    """Exit 0 or 1, no "…" anywhere, and the value whole: on a line, wrapped (a plain line
    goes on at the next line's start) or folded down a table's column."""
    assert done.code in (0, 1), done.err
    assert "…" not in done.out, done.out
    if value not in done.out.replace("\n", ""):
        assert folded(done.out, value) == value, done.out


AGENT_NAME = long_value("answer_", 290)
AGENT = f"""
def {AGENT_NAME}(input):
    return {{"echo": input}}


def short(input):
    return {{"echo": input}}
"""


def two_targets(project: Project) -> tuple[str, str]:
    project.write("evals/w_agent.py", AGENT)
    title = long_value("Title-")
    project.write("evals/w.suite.yaml", f"""
        suite: whole/values@1
        title: {title}
        target: python:w_agent:short
        cases:
          - {{id: a, input: x, expect: [{{path: $.echo, equals: x}}]}}
        """)
    return f"python:w_agent:{AGENT_NAME}", title


def test_assay_config_shows_a_long_setting_whole(project: Project) -> None:
    url = "http://127.0.0.1:9/" + long_value("judge-", 281)
    done = project.assay("config", env={**NARROW, "ASSAY_JUDGE_BASE_URL": url})
    assert_whole(done, url)


def test_assay_run_shows_a_long_target_whole_in_the_table_of_runs(project: Project) -> None:
    target, _ = two_targets(project)
    done = project.assay("run", "evals", "--target", target, "--target",
                         "python:w_agent:short", env=NARROW)
    assert done.code == 0, done.err
    assert len(target) >= 300
    runs_table = done.out[done.out.index("runs"):]
    assert_whole(Done(done.code, runs_table, done.err), target)


def test_assay_show_and_runs_show_a_long_target_whole(project: Project) -> None:
    target, _ = two_targets(project)
    ran = project.assay("run", "evals", "--target", target, "--json", "r.json", env=NARROW)
    assert ran.code == 0, ran.err
    run_id = json.loads((project.root / "r.json").read_text())["run_id"]
    assert_whole(project.assay("show", run_id, env=NARROW), target)
    assert_whole(project.assay("runs", env=NARROW), target)


def test_assay_list_shows_a_long_title_whole(project: Project) -> None:
    _, title = two_targets(project)
    assert_whole(project.assay("list", "evals", env=NARROW), title)


def test_assay_compare_shows_a_long_target_whole(project: Project) -> None:
    target, _ = two_targets(project)
    ids = []
    for name in ("a", "b"):
        ran = project.assay("run", "evals", "--target", target, "--json", f"{name}.json",
                            env=NARROW)
        assert ran.code == 0, ran.err
        ids.append(json.loads((project.root / f"{name}.json").read_text())["run_id"])
    assert_whole(project.assay("compare", *ids, env=NARROW), target)


def facts(run_id: str, target: str, outcome: str) -> RunFacts:
    report = {"schema": "assay.report/1", "run_id": run_id,
              "suite": {"id": "whole/values@1", "digest": "sha256:s"},
              "target": {"uri": target, "digest": "sha256:t", "facets": {}},
              "started_at": "2026-12-04T00:00:00Z", "trials_per_case": 1,
              "scores": {"public": 1.0, "hidden": None, "overall": 1.0, "pass_mark": 1.0,
                         "passed": outcome == "pass", "flags": []},
              "cost": {}, "cases": [{"id": "a", "split": "public", "outcome": outcome,
                                     "pass_at_1": 1.0, "trials": []}]}
    return from_report(report, "file")


def test_assay_drift_writes_a_long_target_whole_for_a_log() -> None:
    target = "python:w_agent:" + AGENT_NAME
    found = drift(facts("r1", target, "pass"), facts("r2", target, "fail"))
    logged = drift_summary(found, on_terminal=False)
    assert target in logged and "…" not in logged
    # On a terminal the line is kept to the screen, and says it was cut.
    shown = drift_summary(found, on_terminal=True)
    assert target not in shown and "…" in shown

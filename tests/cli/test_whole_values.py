"""A value written for a log is whole: with stdout not a terminal (a pipe, as in CI), no
table or line cuts a 300-character value with "…"; it prints whole or folds, its
characters in order (docs/decisions/0058-whole-values-in-logs.md).

Every command here runs as the real ``assay`` in a subprocess whose stdout is a pipe,
80 columns wide, so that each value is far wider than its column: a plain pipe, and a
pipe in a CI job that keeps its colours (``FORCE_COLOR=1``, ``TTY_COMPATIBLE=1``), which
Rich on its own takes for a terminal. On a real terminal (a pseudo-terminal here) a
table cell may still end in "…".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from assay.analysis.drift import drift
from assay.analysis.run_facts import RunFacts, from_report
from assay.model.suite import MAX_CASE_ID
from assay.reports.drift import drift_summary

from .conftest import Done, Project

NARROW = {"COLUMNS": "80"}
#: The ways stdout is a log and not a terminal, each 80 columns wide.
LOGS = {"pipe": NARROW,
        "pipe with FORCE_COLOR=1": {**NARROW, "FORCE_COLOR": "1"},
        "pipe with TTY_COMPATIBLE=1": {**NARROW, "TTY_COMPATIBLE": "1"}}
#: Rich's colours and styles, written where FORCE_COLOR asks for them.
STYLES = re.compile(r"\x1b\[[0-9;]*m")


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


def in_a_column(out: str, value: str) -> bool:
    """Whether ``value`` (no spaces in it) is read down one column of a table, when each
    column's cells are joined line after line without their padding. Finds a value that
    starts anywhere in its cell, after other words of it (a reason that quotes it)."""
    columns: dict[int, str] = {}
    for line in out.splitlines():
        if "│" in line:
            for i, cell in enumerate(line.split("│")):
                columns[i] = columns.get(i, "") + cell.strip()
    return any(value in column for column in columns.values())


def assert_whole(done: Done, value: str) -> None:
    """Exit 0 or 1, no "…" anywhere, and the value whole: on a line, wrapped (a plain line
    goes on at the next line's start) or folded down a table's column."""
    assert done.code in (0, 1), done.err
    out = STYLES.sub("", done.out)
    assert "…" not in out, out
    if value not in out.replace("\n", "") and not in_a_column(out, value):
        assert folded(out, value) == value, out


def assert_whole_in_logs(project: Project, value: str, *args: str) -> None:
    """``assay ARGS`` shows ``value`` whole through each kind of log (``LOGS``)."""
    for env in LOGS.values():
        assert_whole(project.assay(*args, env=env), value)


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


LONG_URL = "http://127.0.0.1:9/" + long_value("judge-", 281)


@pytest.mark.parametrize("log", LOGS)
def test_assay_config_shows_a_long_setting_whole(project: Project, log: str) -> None:
    done = project.assay("config", env={**LOGS[log], "ASSAY_JUDGE_BASE_URL": LONG_URL})
    assert_whole(done, LONG_URL)


@pytest.mark.parametrize("log", LOGS)
def test_assay_run_shows_a_long_target_whole_in_the_table_of_runs(project: Project,
                                                                   log: str) -> None:
    target, _ = two_targets(project)
    done = project.assay("run", "evals", "--target", target, "--target",
                         "python:w_agent:short", env=LOGS[log])
    assert done.code == 0, done.err
    assert len(target) >= 300
    out = STYLES.sub("", done.out)
    runs_table = out[out.index("runs"):]
    assert_whole(Done(done.code, runs_table, done.err), target)


def test_assay_show_and_runs_show_a_long_target_whole(project: Project) -> None:
    target, _ = two_targets(project)
    ran = project.assay("run", "evals", "--target", target, "--json", "r.json", env=NARROW)
    assert ran.code == 0, ran.err
    run_id = json.loads((project.root / "r.json").read_text())["run_id"]
    assert_whole_in_logs(project, target, "show", run_id)
    assert_whole_in_logs(project, target, "runs")


def test_assay_list_shows_a_long_title_whole(project: Project) -> None:
    _, title = two_targets(project)
    assert_whole_in_logs(project, title, "list", "evals")


def test_assay_compare_shows_a_long_target_whole(project: Project) -> None:
    target, _ = two_targets(project)
    ids = []
    for name in ("a", "b"):
        ran = project.assay("run", "evals", "--target", target, "--json", f"{name}.json",
                            env=NARROW)
        assert ran.code == 0, ran.err
        ids.append(json.loads((project.root / f"{name}.json").read_text())["run_id"])
    assert_whole_in_logs(project, target, "compare", *ids)


#: The longest id a case may have (every store's column holds 200 characters).
CASE_ID = long_value("case-", MAX_CASE_ID)
#: Never in the output: the case's reason for failing quotes it whole.
PATTERN = long_value("pattern-")


def failing_case(project: Project) -> None:
    project.write("evals/w_agent.py", AGENT)
    project.write("evals/f.suite.yaml", f"""
        suite: whole/failing@1
        target: python:w_agent:short
        cases:
          - {{id: {CASE_ID}, input: x, expect: [{{path: $.echo, regex: {PATTERN}}}]}}
        """)


def test_a_long_case_id_and_reason_are_whole_in_run_show_review_and_gate(
        project: Project) -> None:
    failing_case(project)
    for env in LOGS.values():  # the result table of cases, as the run prints it
        ran = project.assay("run", "evals", "--json", "r.json", env=env)
        assert ran.code == 1, ran.err
        assert_whole(ran, CASE_ID)
        assert_whole(ran, PATTERN)
    run_id = json.loads((project.root / "r.json").read_text())["run_id"]
    for value in (CASE_ID, PATTERN):
        assert_whole_in_logs(project, value, "show", run_id)
        assert_whole_in_logs(project, value, "review", "--list")
    missing = long_value("critical-")
    for env in LOGS.values():
        gated = project.assay("gate", run_id, "--critical", CASE_ID, "--critical", missing,
                              env=env)
        assert gated.code == 1 and "gate BLOCKED" in gated.out, gated.out + gated.err
        assert_whole(gated, CASE_ID)
        assert_whole(gated, missing)


def test_assay_agent_list_shows_a_long_uri_whole(project: Project) -> None:
    target, _ = two_targets(project)
    published = project.assay("agent", "publish", target, "--dir", "evals")
    assert published.code == 0, published.err
    assert_whole_in_logs(project, target, "agent", "list")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX's")
def test_on_a_terminal_a_table_cell_may_still_end_in_an_ellipsis(project: Project) -> None:
    # The deliberate terminal behaviour stays: the window can be widened, --json has all.
    import pty

    main, terminal = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "assay", "config"], cwd=project.root, stdout=terminal,
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env={**os.environ, **NARROW, "ASSAY_JUDGE_BASE_URL": LONG_URL})
    finally:
        os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert child.wait(timeout=60) == 0, child.stderr.read() if child.stderr else ""
    shown = STYLES.sub("", out.decode())
    assert "http://127.0.0.1:9/judge-" in shown and "…" in shown
    assert LONG_URL not in shown.replace("\r\n", "")


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

"""Output that cannot be written (a full disk) ends in one line, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Project

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")

AGENT = """
def agent(input):
    return {"echo": str(input)}
"""

SUITE = """
suite: out/full@1
target: python:echo_agent:agent
cases:
  - id: one
    input: hello
    expect: [{path: $.echo, equals: hello}]
"""


def _to_full_disk(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "assay", *args], cwd=project.root, stdout=full,
            stderr=subprocess.PIPE, text=True, timeout=120, stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize("command", [["runs"], ["list", "evals"], ["show", "RUN"],
                                     ["ledger", "verify"]], ids=" ".join)
def test_a_command_whose_output_cannot_be_written_says_so_in_one_line(
        project: Project, command: list[str]) -> None:
    project.write("evals/echo_agent.py", AGENT)
    project.write("evals/full.suite.yaml", SUITE)
    done = project.assay("run", "evals", "--json", "report.json")
    assert done.code == 0, done.err
    run_id = json.loads((project.root / "report.json").read_text())["run_id"]
    failed = _to_full_disk(project, *[run_id if part == "RUN" else part for part in command])
    assert failed.returncode == 3, failed.stderr
    assert "Traceback" not in failed.stderr
    assert failed.stderr.strip().splitlines() == [
        "assay: error: cannot write the output: No space left on device"]


def test_a_run_whose_terminal_cannot_be_written_keeps_its_report_file(project: Project) -> None:
    project.write("evals/echo_agent.py", AGENT)
    project.write("evals/full.suite.yaml", SUITE)
    failed = _to_full_disk(project, "run", "evals", "--json", "report.json")
    assert failed.returncode == 3, failed.stderr
    assert "Traceback" not in failed.stderr
    report = json.loads((project.root / "report.json").read_text())
    assert report["counts"]["public"]["passed"] == 1
    assert report["seal"] is not None  # stored and sealed although the terminal failed

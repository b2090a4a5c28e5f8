"""The pytest plugin on real suites: items per case, -k, -x, xdist, exit codes, the record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import Done, Project

CANARY = "CANARY-PYTEST-3b7e"

AGENT = """
def agent(input):
    if input == "boom":
        raise RuntimeError("kaput \\x1b[31mred\\x1b]0;title\\x07 \\x00")
    return {"echo": input}
"""

SUITE = """
suite: pt/echo@1
target: python:pt_agent:agent
trials: 2
hidden: hidden/
cases:
  - {id: good, input: a, expect: [{path: $.echo, equals: a}]}
  - {id: wrong, input: b, expect: [{path: $.echo, equals: not-b}]}
  - {id: crashes, input: boom, expect: [status: ok]}
"""

HIDDEN = f"""
id: secret-{CANARY}
input: {CANARY}
expect: [{{path: $.echo, equals: other}}]
"""


def pytest_in(project: Project, *args: str) -> Done:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASSAY_", "PYTEST_XDIST", "PYTEST_CURRENT"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:langsmith_plugin", *args],
                          cwd=project.root, capture_output=True, text=True, timeout=300,
                          env={**env, "COLUMNS": "200"}, stdin=subprocess.DEVNULL)
    return Done(done.returncode, done.stdout, done.stderr)


def make(project: Project) -> None:
    project.write("evals/pt_agent.py", AGENT)
    project.write("evals/pt.suite.yaml", SUITE)
    project.write("evals/hidden/secret.yaml", HIDDEN)


def outcomes(out: str) -> dict[str, str]:
    found = {}
    for line in out.splitlines():  # `-v`: "evals/pt.suite.yaml::good PASSED  [ 25%]"
        if line.startswith("evals/pt.suite.yaml::"):
            name, outcome = line.split("::", 1)[1].split()[:2]
            found[name] = outcome
    return found


def test_each_case_is_an_item_and_the_run_is_recorded(project: Project) -> None:
    make(project)
    done = pytest_in(project, "evals/", "-v")
    assert done.code == 1, done.out + done.err
    assert outcomes(done.out) == {"good": "PASSED", "wrong": "FAILED", "crashes": "FAILED",
                                  "holdout-1": "FAILED"}
    assert "wrong: fail: equals $.echo failed in 2 of 2 trials" in done.out
    assert "crashes: broken: 2 of 2 trials broken: agent raised RuntimeError" in done.out
    assert "holdout-1: fail" in done.out
    assert "\x1b" not in done.out and "\x00" not in done.out  # the agent's text, inert
    assert CANARY not in done.out + done.err and "secret-" not in done.out + done.err
    [line] = [x for x in done.out.splitlines() if x.startswith("pt/echo@1: recorded as run ")]
    run_id = line.rsplit(" ", 1)[1]
    stored = project.assay("show", run_id, "--json")
    assert stored.code == 0, stored.err
    report = json.loads(stored.out)
    assert report["trials_per_case"] == 2 and report["seal"] is not None
    assert report["counts"]["public"]["passed"] == 1 and report["counts"]["hidden"]["failed"] == 1
    assert CANARY not in stored.out


def test_k_runs_a_part_unrecorded_and_x_stops_at_the_first_failure(project: Project) -> None:
    make(project)
    done = pytest_in(project, "evals/", "-k", "good")
    assert done.code == 0, done.out
    assert "1 passed, 3 deselected" in done.out
    assert "pt/echo@1: not recorded: 1 of 4 cases ran in this process" in done.out
    assert not (project.root / ".assay" / "assay.db").exists()
    stopped = pytest_in(project, "evals/", "-x")
    assert stopped.code == 1 and "1 failed, 1 passed" in stopped.out
    assert "stopping after 1 failures" in stopped.out


def test_xdist_runs_the_items_and_a_whole_file_per_worker_is_recorded(project: Project) -> None:
    make(project)
    done = pytest_in(project, "evals/", "-n", "2", "--dist", "loadfile")
    assert done.code == 1, done.out + done.err
    assert "3 failed, 1 passed" in done.out
    runs = project.assay("runs", "--json")
    assert runs.code == 0 and len(json.loads(runs.out)) == 1


def test_a_bad_suite_is_a_collection_error_at_its_line(project: Project) -> None:
    make(project)
    project.write("evals/bad.suite.yaml", "suite: pt/bad@1\ncases:\n  - {id: x, input: 1, "
                                          "expect: [{nope: 1}]}\n")
    done = pytest_in(project, "evals/bad.suite.yaml")
    assert done.code == 2, done.out
    assert "bad.suite.yaml:3" in done.out and "nope" in done.out
    assert "Traceback" not in done.out


def test_a_python_suite_is_collected_like_a_yaml_one(project: Project) -> None:
    project.write("evals/pt_agent.py", AGENT)
    project.write("evals/echo_eval.py", """
        from assay import Case, Suite, expect

        suite = Suite(id="pt/py@1", target="python:pt_agent:agent", trials=1, cases=[
            Case(id=f"echo-{word}", input=word, expect=[expect.equals(word, path="$.echo")])
            for word in ("a", "b")
        ] + [Case(id="off", input="c", expect=[expect.equals("d", path="$.echo")])])
        """)
    done = pytest_in(project, "evals/", "-v")
    assert done.code == 1, done.out + done.err
    assert "evals/echo_eval.py::echo-a PASSED" in done.out
    assert "evals/echo_eval.py::off FAILED" in done.out and "2 passed" in done.out
    assert "pt/py@1: recorded as run " in done.out


def test_suites_are_not_collected_unless_named_or_asked(project: Project) -> None:
    make(project)
    project.write("test_plain.py", "def test_ok():\n    assert True\n")
    done = pytest_in(project)  # a plain `pytest` here runs no agent
    assert done.code == 0 and "1 passed" in done.out and "pt.suite.yaml" not in done.out
    project.write("pytest.ini", "[pytest]\nassay_suites = true\n")
    asked = pytest_in(project)
    assert asked.code == 1 and "pt.suite.yaml::good PASSED" not in asked.out
    assert "3 failed, 2 passed" in asked.out


def test_the_plugin_is_registered_for_pytest(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert "--assay-db" in done.stdout and "assay_suites" in done.stdout


def test_a_shipped_example_under_pytest(project: Project) -> None:
    import shutil

    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "extraction",
                    project.root / "extraction",
                    ignore=shutil.ignore_patterns("__pycache__"))
    whole = pytest_in(project, "extraction", "-q")
    assert whole.code == 0, whole.out + whole.err
    assert "9 passed" in whole.out  # six public cases, three sample hidden ones
    assert "demo/extraction.table@1: recorded as run" in whole.out
    picked = pytest_in(project, "extraction", "-k", "markdown or quoted", "-q")
    assert picked.code == 0 and "2 passed, 7 deselected" in picked.out
    none = pytest_in(project, "extraction", "-k", "no-such-case", "-q")
    assert none.code == 5  # pytest's own "no tests ran"

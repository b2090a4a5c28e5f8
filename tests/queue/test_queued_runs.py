"""`assay run --executor queue` with real `assay worker` processes on a throwaway PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Project

AGENT = """
import time

def agent(input):
    if input == "slow":
        time.sleep(30)  # past the case's timeout: broken, before any output
    if input.startswith("bad"):
        return {"echo": "wrong"}
    return {"echo": input}
"""


def suite(cases: int = 12) -> str:
    lines = ["suite: q/equal@1", "target: python:q_agent:agent", "trials: 3", "cases:"]
    for i in range(cases):
        lines.append(f"  - {{id: c{i}, input: in-{i}, expect: [{{path: $.echo, equals: in-{i}}}]}}")
    lines.append("  - {id: bad1, input: bad-1, expect: [{path: $.echo, equals: bad-1}]}")
    lines.append("  - {id: slow, input: slow, timeout_s: 0.5, "
                 "expect: [{path: $.echo, equals: slow}]}")
    return "\n".join(lines) + "\n"


def write(project: Project, cases: int = 12) -> None:
    project.write("evals/q_agent.py", AGENT)
    project.write("evals/q.suite.yaml", suite(cases))


VARIES = {"run_id", "started_at", "finished_at", "duration_s", "seal"}


def settled(value: Any) -> Any:
    """A report without what differs between any two runs (ids, times, durations, seal)."""
    if isinstance(value, dict):
        return {k: settled(v) for k, v in value.items() if k not in VARIES}
    if isinstance(value, list):
        return [settled(v) for v in value]
    return value


@pytest.mark.real
def test_a_queued_run_reports_what_the_local_executor_reports(project: Project) -> None:
    write(project)
    local = project.assay("run", "evals", "--db", f"sqlite:///{project.root / 'l.db'}",
                          "--seed", "7", "--json", "local.json")
    assert local.code == 1, local.err  # a failing case and a broken one
    project.worker()
    project.worker()
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--seed", "7", "--chunk", "5", "--json", "queued.json")
    assert queued.code == 1, queued.err
    mine = json.loads((project.root / "local.json").read_text())
    theirs = json.loads((project.root / "queued.json").read_text())
    assert theirs["seal"] is not None
    assert settled(theirs) == settled(mine)
    outcomes = {c["id"]: c["outcome"] for c in theirs["cases"]}
    assert outcomes["bad1"] == "fail" and outcomes["slow"] == "broken"
    assert sum(1 for o in outcomes.values() if o == "pass") == 12


def test_the_queue_refuses_what_it_cannot_do(project: Project) -> None:
    write(project, cases=1)
    lite = project.assay("run", "evals", "--db", f"sqlite:///{project.root / 'a.db'}",
                         "--executor", "queue")
    assert lite.code == 2 and "PostgreSQL" in lite.err and "Traceback" not in lite.err
    nostore = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                            "--no-store")
    assert nostore.code == 2 and "--no-store" in nostore.err
    cached = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--agent-cache")
    assert cached.code == 2 and "--agent-cache" in cached.err
    kept = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                         "--keep-workspaces", "kept")
    assert kept.code == 2 and "--keep-workspaces" in kept.err
    detached = project.assay("run", "evals", "--db", project.url, "--detach")
    assert detached.code == 2 and "--executor queue" in detached.err
    worker = project.assay("worker", "--db", f"sqlite:///{project.root / 'a.db'}")
    assert worker.code == 2 and "PostgreSQL" in worker.err


@pytest.mark.real
def test_a_detached_run_is_followed_to_its_seal_by_show(project: Project) -> None:
    write(project, cases=4)
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach")
    assert queued.code == 0, queued.err
    run_id = queued.out.split()[0]
    assert f"assay show {run_id} --follow" in queued.out
    # Nothing runs until a worker comes: the run is open, every trial still queued.
    waiting = project.assay("show", run_id, "--db", project.url)
    assert waiting.code == 2 and "not sealed" in waiting.err
    project.worker()
    followed = project.assay("show", run_id, "--db", project.url, "--follow", "--json")
    assert followed.code == 0, followed.err
    report = json.loads(followed.out)
    assert report["run_id"] == run_id and report["seal"] is not None
    assert [c["outcome"] for c in report["cases"]].count("pass") == 4
    # Following a sealed run again shows it at once; so does resuming it.
    again = project.assay("run", "--resume", run_id, "--db", project.url)
    assert again.code == 1 and run_id in again.out

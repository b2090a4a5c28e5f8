"""`assay run --window`: processes racing for one window leave one battery (SQLite, PostgreSQL).

Through the real CLI in subprocesses. The agent's every call first connects
to a socket the test listens on and waits for a byte: the battery that won
the window is held in its first trials while the others decide, so the
losers must have answered (exit 0, the winner's id, "still open") while the
winner has not even finished — nothing here depends on timing, and the
socket also counts every call any process made to the agent.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.store import schema
from assay.store.database import open_store

from .conftest import Project

AGENT = """
import os, socket

def agent(input):
    with socket.create_connection(("127.0.0.1", int(os.environ["AGENT_GATE"]))) as gate:
        gate.recv(1)  # until the test lets the trial go on
    return {"echo": input}
"""
CASES = 3
SUITE = ("suite: win/race@1\ntarget: python:race_agent:agent\ntimeout_s: 600\ncases:\n"
         + "".join(f"  - {{id: c{i}, input: in-{i}, expect: [{{path: $.echo, equals: in-{i}}}]}}\n"
                   for i in range(CASES)))
MONDAY = "2025-01-06T12:34:56Z"
DAY = "24h@2025-01-06T00:00:00Z"
RACERS = 3


def write_project(project: Project) -> None:
    project.write("evals/race_agent.py", AGENT)
    project.write("evals/race.suite.yaml", SUITE)


def start(project: Project, url: str, port: int, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200", "AGENT_GATE": str(port)}
    env.pop("ASSAY_HIDDEN_DIR", None)
    return subprocess.Popen(
        [sys.executable, "-m", "assay", "run", "evals", "--db", url, *args],
        cwd=project.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def stored(url: str) -> tuple[list[tuple[str, str, str | None]], list[str], list[str]]:
    """(run id, status, window) of every run; the run id of every trial; the ledger's kinds."""
    store = open_store(url)
    r = schema.runs.c
    with store.engine.connect() as connection:
        runs = [(row.run_id, row.status,
                 None if row.window_size is None else f"{row.window_size}@{row.window_start}")
                for row in connection.execute(
                    sa.select(r.run_id, r.status, r.window_size, r.window_start)
                    .order_by(r.started_at))]
        trials = [row.run_id for row in connection.execute(sa.select(schema.trials.c.run_id))]
    kinds = [entry.kind for entry in store.ledger.entries()]
    store.close()
    return runs, trials, kinds


@pytest.mark.real
def test_racing_commands_leave_one_battery_and_the_others_name_it(
        project: Project, db_url: str) -> None:
    write_project(project)
    gate = socket.create_server(("127.0.0.1", 0), backlog=16)
    gate.settimeout(120)
    port = gate.getsockname()[1]
    racers = [start(project, db_url, port, "--window", "24h", "--window-at", MONDAY)
              for _ in range(RACERS)]
    finished: queue.Queue[tuple[int, str, str]] = queue.Queue()

    def wait(index: int, process: subprocess.Popen[str]) -> None:
        out, err = process.communicate(timeout=120)
        finished.put((index, out, err))

    for index, process in enumerate(racers):
        threading.Thread(target=wait, args=(index, process), daemon=True).start()
    calls = []
    try:
        # The losers end while the winner's trials still wait on the gate.
        losers = [finished.get(timeout=120) for _ in range(RACERS - 1)]
        runs, trials, kinds = stored(db_url)
        assert [(status, window) for _, status, window in runs] == [("open", DAY)]
        [(winner, _, _)] = runs
        assert trials == [] and kinds == ["run-registered"]
        for index, out, err in losers:
            assert racers[index].returncode == 0, err
            assert out.splitlines() == [
                f"{winner} is the existing battery of window {DAY} for win/race@1 against "
                "python:race_agent:agent (still open: running elsewhere, or stopped part-way "
                f"(assay run --resume {winner})); nothing was run"]
        # Now the winner's trials go on: one call per case, and no one else's.
        for _ in range(CASES):
            connection, _ = gate.accept()
            calls.append(connection)
            connection.sendall(b"g")
        index, out, err = finished.get(timeout=120)
    finally:
        for process in racers:
            if process.poll() is None:
                process.kill()
        for connection in calls:
            connection.close()
    assert racers[index].returncode == 0, err
    assert winner in out and "PASSED" in out
    gate.settimeout(0)
    with pytest.raises(BlockingIOError):
        gate.accept()  # every process has ended: no call was left waiting
    gate.close()

    runs, trials, kinds = stored(db_url)
    assert runs == [(winner, "sealed", DAY)]
    assert trials == [winner] * CASES
    assert kinds == ["run-registered"] + ["trial-verdict"] * CASES + ["run-sealed"]
    verified = project.assay("ledger", "verify", "--db", db_url)
    assert verified.code == 0, verified.err


PLAIN_AGENT = "def agent(input):\n    return {'echo': input}\n"
PLAIN_SUITE = ("suite: win/plain@1\ncases:\n"
               "  - {id: a, input: x, expect: [{path: $.echo, equals: x}]}\n")


def plain_project(project: Project) -> None:
    project.write("evals/one_agent.py", PLAIN_AGENT)
    project.write("evals/two_agent.py", PLAIN_AGENT)
    project.write("evals/plain.suite.yaml", PLAIN_SUITE)


TARGETS = ("--target", "python:one_agent:agent", "--target", "python:two_agent:agent")


def test_each_suite_and_target_is_its_own_battery_and_a_sealed_one_is_named(
        project: Project, tmp_path: Path) -> None:
    plain_project(project)
    url = f"sqlite:///{tmp_path / 'assay.db'}"
    first = project.assay("run", "evals", "--db", url, *TARGETS, "--window", "24h",
                          "--window-at", MONDAY)
    assert first.code == 0, first.err
    runs, _, _ = stored(url)
    assert len(runs) == 2 and {window for _, _, window in runs} == {DAY}

    # Another moment of the same day: both batteries exist; one line each, nothing written.
    report = project.root / "report.json"
    again = project.assay("run", "evals", "--db", url, *TARGETS, "--window", "24h",
                          "--window-at", "2025-01-06T23:59:59.999+00:00", "--json", str(report))
    assert again.code == 0, again.err
    assert again.out.splitlines() == [
        f"{run_id} is the existing battery of window {DAY} for win/plain@1 against "
        f"python:{name}_agent:agent (sealed); nothing was run"
        for (run_id, _, _), name in zip(runs, ("one", "two"), strict=True)]
    assert not report.exists()
    assert "--json: nothing written for" in again.err
    assert stored(url)[0] == runs

    # The next day, and the hour of the same moment, are other windows: new batteries.
    for window, at in (("24h", "2025-01-07T00:00:00Z"), ("1h", MONDAY)):
        later = project.assay("run", "evals", "--db", url, "--target", "python:one_agent:agent",
                              "--window", window, "--window-at", at, "--json", str(report))
        assert later.code == 0, later.err
        assert json.loads(report.read_text())["run_id"] not in {r for r, _, _ in runs}
    windows = [window for _, _, window in stored(url)[0]]
    assert windows == [DAY, DAY, "24h@2025-01-07T00:00:00Z", "1h@2025-01-06T12:00:00Z"]
    assert project.assay("ledger", "verify", "--db", url).code == 0


@pytest.mark.parametrize(("args", "message"), [
    (("--window", "2h"), "'2h' is not one of '1h', '24h', '7d'"),
    (("--window", "24h", "--no-store"), "--window names a stored battery"),
    (("--window", "24h", "--resume", "20250106T000000Z-00000000"), "--resume finishes a run"),
    (("--window-at", MONDAY), "give --window too"),
    (("--window", "7d", "--window-at", "2025-01-06T10:00"), "has no zone"),
    (("--window", "7d", "--window-at", "monday"), "is not an ISO 8601 time"),
])
def test_a_window_that_makes_no_sense_is_a_usage_error(
        project: Project, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    plain_project(project)
    url = f"sqlite:///{tmp_path / 'assay.db'}"
    done = project.assay("run", "evals", "--db", url, "--target", "python:one_agent:agent",
                         *args)
    assert done.code == 2 and message in done.err, done.err
    assert not (tmp_path / "assay.db").exists() or stored(url)[0] == []

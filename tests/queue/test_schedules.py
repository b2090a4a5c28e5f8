"""`assay schedule`: batteries the workers start once per window, and drift readings after."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.queue.app import WINDOW_TASK, defer, ensure_schema
from assay.queue.tasks import make_app
from assay.store import schema
from assay.store.database import open_store

from .conftest import Project, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from user_simulator import BOOKING, user_server  # noqa: E402

AGENT = """
def agent(input):
    return {"echo": input}
"""
SUITE = ("suite: q/sched@1\ntarget: python:s_agent:agent\ncases:\n"
         "  - {id: a, input: x, expect: [{path: $.echo, equals: x}]}\n"
         "  - {id: b, input: y, expect: [{path: $.echo, equals: y}]}\n")


def write(project: Project) -> None:
    project.write("evals/s_agent.py", AGENT)
    project.write("evals/s.suite.yaml", SUITE)


def runs(url: str) -> list[tuple[str, str, str | None]]:
    store = open_store(url)
    r = schema.runs.c
    with store.engine.connect() as connection:
        found = [(row.run_id, row.status, row.window_start) for row in connection.execute(
            sa.select(r.run_id, r.status, r.window_start).order_by(r.window_start))]
    store.close()
    return found


def jobs(url: str, task: str, status: str = "succeeded") -> int:
    store = open_store(url)
    with store.engine.connect() as connection:
        count = connection.scalar(sa.text(
            "SELECT count(*) FROM procrastinate_jobs WHERE task_name = :t AND status = :s"),
            {"t": task, "s": status})
    store.close()
    return int(count or 0)


def force_windows(url: str, schedule_id: int, starts: list[str]) -> None:
    """Enqueue window jobs directly, with no queueing lock: they race for real."""
    store = open_store(url)
    ensure_schema(store)  # as any submitter does: the worker may not have started yet
    app = make_app(url)
    with store.engine.begin() as connection:
        defer(app, connection, WINDOW_TASK,
              [{"schedule_id": schedule_id, "start": start} for start in starts])
    store.close()


def test_schedules_are_added_listed_removed_and_refused_with_reasons(project: Project) -> None:
    write(project)
    added = project.assay("schedule", "add", "evals", "--target", "python:s_agent:agent",
                          "--every", "24h", "--drift", "--notify",
                          "https://hooks.example/secret-token-123", "--db", project.url)
    assert added.code == 0, added.err
    assert added.out.startswith("schedule 1: q/sched@1 against python:s_agent:agent")
    listed = project.assay("schedule", "list", "--db", project.url)
    assert "q/sched@1" in listed.out and "every 24h drift → https://hooks.example/…" in listed.out
    assert "secret-token-123" not in listed.out and "no battery yet" in listed.out
    removed = project.assay("schedule", "remove", "1", "--db", project.url)
    assert removed.code == 0
    assert project.assay("schedule", "list", "--db", project.url).out.strip() == "no schedules"
    again = project.assay("schedule", "remove", "1", "--db", project.url)
    assert again.code == 2 and "no schedule 1" in again.err
    bad = project.assay("schedule", "add", "evals", "--target", "x", "--every", "2h",
                        "--db", project.url)
    assert bad.code == 2 and "2h" in bad.err
    lite = project.assay("schedule", "add", "evals", "--target", "x", "--every", "1h",
                         "--db", f"sqlite:///{project.root / 'a.db'}")
    assert lite.code == 2 and "PostgreSQL" in lite.err
    lone = project.assay("schedule", "add", "evals", "--target", "x", "--every", "1h",
                         "--notify", "https://hooks.example/x", "--db", project.url)
    assert lone.code == 2 and "--drift" in lone.err


@pytest.mark.real
def test_three_workers_sweeping_one_window_make_one_battery(project: Project) -> None:
    write(project)
    added = project.assay("schedule", "add", "evals", "--target", "python:s_agent:agent",
                          "--every", "1h", "--db", project.url)
    assert added.code == 0, added.err
    for _ in range(3):
        project.worker("--tick", "* * * * * */1")  # every second, here
    wait_for(lambda: [status for _, status, _ in runs(project.url)] == ["sealed"], timeout=120,
             what="the window's battery to be sealed")
    ((run_id, _, start),) = runs(project.url)
    # Three more window jobs for the same window, racing, and more ticks: still one battery.
    force_windows(project.url, 1, [str(start)] * 3)
    ticks = jobs(project.url, "assay.tick")
    wait_for(lambda: jobs(project.url, "assay.window") >= 4
             and jobs(project.url, "assay.tick") >= ticks + 3, timeout=120,
             what="the racing window jobs and three more ticks")
    assert [r for r, _, _ in runs(project.url)] == [run_id]
    taken = "".join((project.root / f"p{i}.err").read_text() for i in range(3))
    assert taken.count("has its battery already") >= 3


class Hook:
    """A loopback webhook that keeps what is POSTed to it."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                owner.posted.append(json.loads(self.rfile.read(
                    int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[Hook]:
    made = Hook()
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.mark.real
def test_a_scheduled_battery_reads_drift_against_the_one_before_and_posts_it(
        project: Project, hook: Hook) -> None:
    write(project)
    added = project.assay("schedule", "add", "evals", "--target", "python:s_agent:agent",
                          "--every", "1h", "--drift", "--notify", hook.url, "--db", project.url)
    assert added.code == 0, added.err
    project.worker("--tick", "0 0 1 1 *")  # no tick here: the test names the windows
    force_windows(project.url, 1, ["2026-01-05T10:00:00Z"])
    wait_for(lambda: [s for _, s, _ in runs(project.url)] == ["sealed"], timeout=120,
             what="the first battery")
    force_windows(project.url, 1, ["2026-01-05T11:00:00Z"])
    wait_for(lambda: len(hook.posted) == 1, timeout=120, what="the drift reading")
    (first, second) = runs(project.url)
    reading = hook.posted[0]
    assert reading["schema"] == "assay.drift/1" and reading["status"] == "stable"
    assert (reading["base"]["run_id"], reading["cand"]["run_id"]) == (first[0], second[0])
    log = (project.root / "p0.err").read_text()
    assert "no drift to read yet" in log and f"drift of run {second[0]}: stable" in log


#: The booking agent of tests/user_simulator.py, and a suite whose user names no model.
TALK_AGENT = """
def agent(messages):
    said = messages[-1]["content"]
    return "Booked: Friday, 9:00." if "9am" in said else "Which flight on Friday: 9am or 5pm?"
"""
TALK_SUITE = f"""\
suite: q/sched-talk@1
target: python:t_agent:agent
cases:
  - id: book
    user: {{instructions: '{BOOKING}', max_turns: 3}}
    expect: [{{turn: 2, contains: "9:00"}}]
"""


@pytest.mark.real
def test_a_schedule_plays_its_simulated_users_with_its_user_model(project: Project) -> None:
    project.write("evals/t_agent.py", TALK_AGENT)
    project.write("evals/t.suite.yaml", TALK_SUITE)
    add = ("schedule", "add", "evals", "--target", "python:t_agent:agent", "--every", "1h",
           "--db", project.url)
    unplayed = project.assay(*add)  # no model for its user: refused now, not every window
    assert unplayed.code == 2 and "t.suite.yaml:4: case 'book' has a simulated user and no " \
        "model" in unplayed.err, unplayed.err
    wrong = project.assay(*add, "--user-model", "sim-model")
    assert wrong.code == 2 and "--user-model: a simulated user's model is openai:MODEL" \
        in wrong.err, wrong.err
    added = project.assay(*add, "--user-model", "openai:sim-model")
    assert added.code == 0, added.err
    with user_server() as user:  # where the workers serve openai: judges
        project.worker("--tick", "0 0 1 1 *", env={"ASSAY_JUDGE_BASE_URL": user.url})
        force_windows(project.url, 1, ["2026-01-05T10:00:00Z"])
        wait_for(lambda: [s for _, s, _ in runs(project.url)] == ["sealed"], timeout=120,
                 what="the window's battery")
        asked = list(user.seen)
    ((run_id, _, _),) = runs(project.url)
    store = open_store(project.url)
    try:
        report, options = store.load_report(run_id), store.open_run(run_id).options
    finally:
        store.close()
    # The window's battery played the user with the schedule's model, and it booked.
    assert [case.outcome for case in report.cases] == ["pass"]
    assert (report.cost.simulator_calls, report.cost.simulator_cached) == (3, 0)
    assert [body["model"] for body in asked] == ["sim-model"] * 3
    assert options["queue"]["user_model"] == "openai:sim-model"
    assert report.cases[0].facets["user"].startswith("sha256:")

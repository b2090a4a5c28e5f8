"""A simulated conversation (SPEC §16) run by `assay worker` processes: the workers play the
user with the model the submitter named, and the sealed report is the local executor's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ..conversation_run import stub as stub_model
from .conftest import Project
from .test_queued_runs import settled

SUITE = """
suite: q/talk@1
target: openai:agent-model
trials: 2
cases:
  - id: book
    user:
      instructions: 'SCRIPT: ["Move ABC123 to Friday.", "The 9am one.", "###STOP###"]'
    expect:
      - {turn: 2, contains: "9:00"}
      - settles: true
"""


def agent(body: dict[str, Any]) -> dict[str, Any]:
    said = [m["content"] for m in body["messages"] if m["role"] == "user"]
    text = "Booked: 9:00." if said and "9am" in said[-1] else "Which one: 9am or 5pm?"
    return {"content": text, "usage": [10, 3]}


def simulator(body: dict[str, Any]) -> dict[str, Any]:
    system = body["messages"][0]["content"]
    script = json.loads(system.split("SCRIPT:", 1)[1].split("\n", 1)[0].strip())
    own = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return {"content": script[min(own, len(script) - 1)], "usage": [50, 7]}


@pytest.fixture
def servers() -> Iterator[tuple[Any, Any]]:
    stub = stub_model()
    made = stub.StubServer(agent), stub.StubServer(simulator)
    yield made
    for server in made:
        server.close()


@pytest.mark.real
def test_workers_play_the_simulated_user_as_a_local_run_does(
        project: Project, servers: tuple[Any, Any]) -> None:
    agent_server, user_server = servers
    project.write("evals/q.suite.yaml", SUITE)
    given = ("--base-url", agent_server.url, "--judge-base-url", user_server.url,
             "--user-model", "openai:sim-model", "--no-judge-cache", "--seed", "7")
    local = project.assay("run", "evals", "--db", f"sqlite:///{project.root / 'l.db'}",
                          *given, "--json", "local.json")
    assert local.code == 0, local.out + local.err
    asked = len(user_server.seen)
    project.worker()
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           *given, "--json", "queued.json")
    assert queued.code == 0, queued.out + queued.err
    mine = json.loads((project.root / "local.json").read_text())
    theirs = json.loads((project.root / "queued.json").read_text())
    assert theirs["seal"] is not None
    assert theirs["cost"] == mine["cost"], (theirs["cost"], mine["cost"])
    assert settled(theirs) == settled(mine)
    assert theirs["cases"][0]["facets"]["user"].startswith("sha256:")
    assert (theirs["cost"]["simulator_calls"], theirs["cost"]["simulator_input_tokens"]) == \
        (6, 300)
    # The workers asked the simulator themselves, with the submitter's model.
    assert len(user_server.seen) == asked + 6
    assert {body["model"] for body in user_server.seen[asked:]} == {"sim-model"}

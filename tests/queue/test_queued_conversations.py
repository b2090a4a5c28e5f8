"""Conversations on the job queue (SPEC §16, §12): a queued run's report holds the same turns
as the local executor's, the worker's seal folding them from the stored traces; the hidden
conversation is a holdout in both. The agent is the ``openai:`` loop against a real
OpenAI-compatible server on loopback (tests/conversation_run.py)."""

from __future__ import annotations

import json

import pytest

from ..conversation_run import CANARY, serve, write
from .conftest import Project
from .test_queued_runs import settled


@pytest.mark.real
def test_a_queued_conversation_reports_the_turns_the_local_run_reports(
        project: Project) -> None:
    server = serve()
    try:
        write(project)  # type: ignore[arg-type]  # the queue's Project writes files the same way
        env = {"ASSAY_OPENAI_BASE_URL": server.url}
        local = project.assay("run", "evals", "--db", f"sqlite:///{project.root / 'l.db'}",
                              "--seed", "7", "--json", "local.json", env=env)
        assert local.code == 1, local.err
        project.worker(env=env)
        queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                               "--seed", "7", "--json", "queued.json", env=env)
        assert queued.code == 1, queued.err
    finally:
        server.close()
    mine = json.loads((project.root / "local.json").read_text())
    theirs = json.loads((project.root / "queued.json").read_text())
    assert theirs["seal"] is not None
    # Usage aside (the stub counts tokens from the request's characters, call ids and all),
    # every case is reported alike: outcomes, verdicts and each trial's turns.
    assert settled(_unused(theirs["cases"])) == settled(_unused(mine["cases"]))
    turns = {c["id"]: [t["turn"] for t in c["trials"][0].get("turns") or []]
             for c in theirs["cases"] if c["split"] == "public"}
    assert turns == {"change-flight": [1, 2], "says-hello": [1], "single": []}
    assert CANARY not in queued.out + queued.err + (project.root / "queued.json").read_text()


def _unused(value: object) -> object:
    if isinstance(value, dict):
        return {k: _unused(v) for k, v in value.items() if k != "usage"}
    if isinstance(value, list):
        return [_unused(v) for v in value]
    return value

"""A conversation on every report (SPEC §16): the JSON report's trials carry their turns, the
terminal, ``assay show``, JUnit and Markdown show the turns of a public case that did not
pass, every message inert; a hidden conversation's id, messages, replies and tool
arguments are on none of them; ``assay erase`` takes a conversation's messages out of the
store. The run is the real ``assay run`` against a real OpenAI-compatible server on
loopback (tests/conversation_run.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ..conversation_run import CANARY, HOSTILE, USER_FIRST, USER_SECOND, record, serve, write
from ..store.test_erasure import cells
from .conftest import Project

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    served = serve()
    yield served
    served.close()


@pytest.fixture(scope="module")
def _made(tmp_path_factory: pytest.TempPathFactory, server: Any) -> dict[str, Any]:
    """The run, made once; each test gets a copy of its folder and store."""
    return record(Project(tmp_path_factory.mktemp("talk")), server.url)


@pytest.fixture
def recorded(_made: dict[str, Any], project: Project) -> dict[str, Any]:
    shutil.copytree(_made["project"].root, project.root, dirs_exist_ok=True)
    return {**_made, "project": project}


def test_the_report_keeps_each_turn_of_a_conversation_and_no_hidden_content(
        recorded: dict[str, Any]) -> None:
    report, texts = recorded["report"], recorded["texts"]
    cases = {case["id"]: case for case in report["cases"]}
    [trial] = cases["change-flight"]["trials"]
    assert trial["turns"] == [
        {"turn": 1, "user": USER_FIRST, "calls": ["update_booking"],
         "reply": "Which one: 9am or 5pm? " + HOSTILE},
        {"turn": 2, "user": USER_SECOND, "calls": [], "reply": "Booked: Friday, 9:00."}]
    assert cases["says-hello"]["outcome"] == "pass"
    assert [t["turn"] for t in cases["says-hello"]["trials"][0]["turns"]] == [1]
    # A single question is not a conversation: its trial has no turns key at all.
    assert "turns" not in cases["single"]["trials"][0]
    assert cases["holdout-1"] == {"id": "holdout-1", "split": "hidden", "outcome": "fail"}
    for name, text in texts.items():
        assert CANARY not in text and CANARY.lower() not in text, name
    # The hidden conversation was held and stored (its trace names the canary), only not shown.
    db = f"sqlite:///{recorded['project'].root / '.assay' / 'assay.db'}"
    assert ("blobs", "content") in {(table, column) for table, column, raw in cells(db)
                                    if f"{CANARY} second reply".encode() in raw}


def test_every_summary_shows_the_failing_conversation_as_text(recorded: dict[str, Any]) -> None:
    texts = recorded["texts"]
    pictured = USER_FIRST.replace("\x1b", "␛")
    for name in ("stdout", "show"):
        text = texts[name]
        assert "change-flight trial 1 (fail), the conversation:" in text, name
        assert f"  turn 1  user   {pictured}" in text, name
        assert "          calls  update_booking" in text, name
        assert "          agent  Which one: 9am or 5pm? <script>window.__pwned" in text, name
        assert f"  turn 2  user   {USER_SECOND}" in text, name
        assert "\x1b[" not in text, name  # the agent's (and user's) escape sequences are inert
        # A passing conversation is not listed under the table.
        assert "says-hello trial" not in text and "Hello there" not in text, name
    assert f"    turn 1   user: {pictured.replace('<', '&lt;').replace('>', '&gt;')}" \
        in texts["r.xml"]
    assert "             agent: Which one: 9am or 5pm? &lt;script&gt;" in texts["r.xml"]
    assert "| 1 | user | Move booking ABC123 to Friday. \\<b\\>now\\</b\\> " \
           "\\[blink\\]please\\[/blink\\] ␛\\[7mloud |" in texts["r.md"]
    assert "|  | agent | Which one: 9am or 5pm? \\<script\\>" in texts["r.md"]
    assert "Hello there" not in texts["r.md"] + texts["r.xml"]


def test_erasing_a_conversation_case_takes_its_messages_out_of_the_store(
        recorded: dict[str, Any]) -> None:
    project: Project = recorded["project"]
    db = f"sqlite:///{project.root / '.assay' / 'assay.db'}"
    said = ("Move booking ABC123", "Booked: Friday, 9:00.", "Which one: 9am or 5pm?")

    def holding() -> set[tuple[str, str]]:
        return {(table, column) for table, column, raw in cells(db)
                if any(text.encode() in raw for text in said)}

    assert ("runs", "report") in holding() and ("runs", "suite") in holding()
    done = project.assay("erase", "--subject", "change-flight")
    assert done.code == 0, done.out + done.err
    assert holding() == set()
    shown = project.assay("show", recorded["report"]["run_id"], "--json")
    assert shown.code == 0, shown.err
    assert '"user": ""' in shown.out and '"calls": [\n' in shown.out


def test_a_run_folded_again_from_the_store_keeps_its_turns(recorded: dict[str, Any]) -> None:
    # What a queue's seal (only what folding reads) and a resumed run (whole traces) fold
    # from: the same turns the report was written with.
    from assay.store.database import open_store

    report = recorded["report"]
    written = {case["id"]: case["trials"][0].get("turns") for case in report["cases"]
               if case["split"] == "public"}
    store = open_store(f"sqlite:///{recorded['project'].root / '.assay' / 'assay.db'}")
    try:
        for for_folding in (True, False):
            trials = store.load_trials(report["run_id"], for_folding=for_folding)
            read = {case_id: None if t.turns is None else
                    [turn.model_dump() for turn in t.turns]
                    for (case_id, _n), t in trials.items() if case_id in written}
            assert read == written, for_folding
            assert sum(t.turns is not None for t in trials.values()) == 3  # the hidden one too
    finally:
        store.close()


def test_pytest_shows_a_failing_conversation_in_its_failure(project: Project,
                                                             server: Any) -> None:
    write(project)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASSAY_", "PYTEST_XDIST", "PYTEST_CURRENT"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
         "evals/", "-v", "--assay-no-store"],
        cwd=project.root, capture_output=True, text=True, timeout=300,
        env={**env, "COLUMNS": "200", "ASSAY_OPENAI_BASE_URL": server.url},
        stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "change-flight: fail: " in out
    assert "trial 1 (fail), the conversation:" in out
    assert f"  turn 1   user: {USER_FIRST.replace(chr(27), '␛')}" in out
    assert "           calls: update_booking" in out
    assert "           agent: Which one: 9am or 5pm? <script>window.__pwned" in out
    assert f"  turn 2   user: {USER_SECOND}" in out
    assert "says-hello PASSED" in out and "holdout-1 FAILED" in out
    assert "\x1b[31m" not in out and CANARY not in out and CANARY.lower() not in out

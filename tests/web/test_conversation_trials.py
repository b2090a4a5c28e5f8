"""A conversation on the workbench (SPEC §16): a public trial's turns as a chat, the agent's
tool calls inline, every message shown as text under the Content-Security-Policy; and a
hidden conversation's id, messages, replies and tool arguments on no page, no JSON twin,
no download and no line the server logs.

The run is the real ``assay run`` of tests/conversation_run.py (the ``openai:`` loop
against a real OpenAI-compatible server on loopback), made once for this module.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conversation_run import CANARY, HOSTILE, USER_FIRST, USER_SECOND, record, serve
from .conftest import Project, Served, Watched
from .test_crawl import _crawl

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def _made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run, made once; each test gets a copy of its folder and store."""
    server = serve()
    try:
        return record(Project(tmp_path_factory.mktemp("talk")), server.url)
    finally:
        server.close()


@pytest.fixture
def made(_made: dict[str, Any], project: Project) -> dict[str, Any]:
    shutil.copytree(_made["project"].root, project.root, dirs_exist_ok=True)
    return {**_made, "project": project}


@pytest.fixture
def served(made: dict[str, Any]) -> Iterator[Served]:
    server = Served(made["project"].root, "evals")
    yield server
    server.stop()


def _index(report: dict[str, Any], case_id: str) -> int:
    return next(i for i, case in enumerate(report["cases"], start=1) if case["id"] == case_id)


def test_a_conversation_trial_is_a_chat_with_its_tool_calls_inline(
        made: dict[str, Any], served: Served, page: Watched) -> None:
    report = made["report"]
    path = f"/runs/{report['run_id']}/cases/{_index(report, 'change-flight')}/trials/1"
    twin = served.get("/api" + path).json()
    trace = twin["trace"]
    # The twin groups the trace's events by turn, as positions; the agent's last message
    # of a turn, which its reply repeats, is the timeline's only.
    assert trace["conversation"] == [{"turn": 1, "events": [0, 1, 2, 4], "replied": True},
                                     {"turn": 2, "events": [5, 7], "replied": True}]
    assert [(e["kind"], e["turn"]) for e in trace["events"]] == [
        ("user", 1), ("tool_call", 1), ("tool_result", 1), ("message", 1), ("reply", 1),
        ("user", 2), ("message", 2), ("reply", 2)]
    html = served.get(path).text
    assert "&lt;script&gt;window.__pwned" in html and "<script>window" not in html

    tab = page.page
    tab.goto(served.url + path)
    tab.wait_for_load_state("load")
    turns = tab.locator("ol.chat > li.turn")
    assert turns.count() == 2
    first = turns.nth(0)
    assert first.locator(".bubble.user pre.said").inner_text() == USER_FIRST.replace("\x1b", "␛")
    assert first.locator(".step.tool_call code.name").inner_text() == "update_booking"
    assert json.loads(first.locator(".step.tool_call pre.arguments").inner_text()) == {
        "booking": "ABC123", "day": "Friday"}
    assert first.locator(".bubble.agent pre.said").inner_text() == \
        "Which one: 9am or 5pm? " + HOSTILE.replace("\x1b", "␛")
    # In order: the user's message, the call and its result, the reply.
    assert first.locator(":scope > div").evaluate_all(
        "nodes => nodes.map(n => n.className)") == [
        "turn-number", "bubble user", "step tool_call", "step tool_result", "bubble agent"]
    second = turns.nth(1)
    assert second.locator(".bubble.user pre.said").inner_text() == USER_SECOND
    assert second.locator(".bubble.agent pre.said").inner_text() == "Booked: Friday, 9:00."
    assert tab.evaluate("window.__pwned") is None  # shown, never run
    assert tab.locator("ol.chat img").count() == 0
    assert page.clean(), page.errors + page.violations


def test_a_single_question_has_no_chat(made: dict[str, Any], served: Served) -> None:
    report = made["report"]
    path = f"/runs/{report['run_id']}/cases/{_index(report, 'single')}/trials/1"
    assert served.get("/api" + path).json()["trace"]["conversation"] is None
    assert 'class="chat"' not in served.get(path).text


def test_no_page_twin_download_or_log_holds_the_hidden_conversation(
        made: dict[str, Any], served: Served, page: Watched) -> None:
    report, project = made["report"], made["project"]
    run_id = report["run_id"]
    hidden = _index(report, "holdout-1")
    for label in ("holdout-1", "change-flight"):
        done = project.assay("review", "--add", run_id, "--case", label)
        assert done.code == 0, done.err
    seeds = ["/", "/runs", f"/runs/{run_id}", f"/runs/{run_id}/cases/{hidden}/trials/1",
             "/review?show=all", "/ledger", "/suites", "/trends?suite=web/talk@1",
             f"/runs/{run_id}/cases/{hidden}/trials/1/trace.json"]
    pages = _crawl(served, seeds)
    reached = " ".join(pages)
    for part in ("/api/runs/", "/trials/", "/review/", "/ledger/receipts/", "trace.json"):
        assert part in reached, part
    for path, (status, _kind, body) in pages.items():
        assert CANARY not in body and CANARY.lower() not in body, path
        assert status < 500, (path, status)
    assert pages[f"/runs/{run_id}/cases/{hidden}/trials/1/trace.json"][0] == 404
    assert pages[f"/runs/{run_id}/cases/{hidden}/trials/1"][0] == 200
    # The public conversation's review item shows its turns; the hidden one withholds all.
    items = served.get("/api/review?show=all").json()["items"]
    public = next(i for i in items if i["case"] == "change-flight")
    item = served.get(f"/api/review/{public['item']}").json()
    assert [(e["kind"], e["turn"]) for e in item["trace"]["events"]][:2] == [
        ("user", 1), ("tool_call", 1)]
    for path in [p for p, (s, kind, _b) in pages.items()
                 if kind.startswith("text/html") and s == 200 and "/review/" in p]:
        page.page.goto(served.url + path)
        page.page.wait_for_load_state("load")
        assert CANARY not in page.page.content(), path
    assert page.clean(), page.errors + page.violations
    logged = served.stop()
    assert CANARY not in logged and CANARY.lower() not in logged


def test_a_screenshot_of_a_conversation(made: dict[str, Any], served: Served, page: Watched,
                                        tmp_path: Path) -> None:
    """The picture docs/workbench.md shows (``ASSAY_SCREENSHOTS=docs/workbench``)."""
    folder = Path(os.environ.get("ASSAY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    report = made["report"]
    path = f"/runs/{report['run_id']}/cases/{_index(report, 'change-flight')}/trials/1"
    tab = page.page
    tab.goto(served.url + path)
    tab.wait_for_load_state("load")
    chat = tab.locator("ol.chat")
    data = chat.screenshot()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
    (folder / "conversation.png").write_bytes(data)
    assert page.clean(), page.errors

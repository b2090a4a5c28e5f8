"""The review screen (SPEC §10), driven by Textual's own pilot against a real store.

The store is made by the real ``assay run`` (a Python agent that calls a tool,
asks a question, answers with markup, and a judged case answered by the
loopback judge). Decisions are read back from the store and the ledger;
another person's decision is taken by a real ``assay review ITEM --verdict``
subprocess; the hidden case's canary is searched for in everything the
screen rendered; and one test opens the real ``assay review`` in a
pseudo-terminal.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import pty
import re
import select
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ..judge_server import JudgeServer
from .conftest import Project

pytestmark = pytest.mark.real

CANARY = "CANARY-SCREEN-7c2f"
HOSTILE = ("[bold red]LOUD[/] [link=https://example.invalid]a link[/link] "
           "[@click=app.quit]click me[/] \x1b[2J\x1b]0;title\x07 end")

AGENT = '''
def agent(prompt, tools):
    text = str(prompt)
    if text == "tools":
        tools.call("lookup", {"order": 42, "note": "[bold]B[/bold]"})
        tools.ask("Which address should I use?")
        return {"echo": text}
    if text == "judged":
        return "Not our problem. JUDGE:fail"
    if text == "hostile":
        return HOSTILE
    return {"echo": text}
'''

SUITE = """
suite: review/screen@1
target: python:screen_agent:agent
trials: 1
hidden: hidden/
judge: openai:judge-model
judge_timeout_s: 10
cases:
  - id: passes
    input: fine
    expect: [{path: $.echo, equals: fine}]
  - id: tools
    input: tools
    expect: [{path: $.echo, equals: right}]
  - id: judged
    input: judged
    expected: apologises
    expect: [{judge: {criteria: The reply apologises, threshold: 0.5}}]
  - id: hostile
    input: hostile
    expect: [{not_contains: click}]
  - id: undecided
    input: maybe
    expect: [{costs_at_most: {usd: 0.01}}]  # no usage reported: inconclusive
"""

HIDDEN = f"""
- id: {CANARY}-id
  input: {CANARY}-input
  expected: {CANARY}-expected
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
"""

#: The open items the run queues, oldest first (case, outcome).
QUEUED = [("tools", "fail"), ("judged", "fail"), ("hostile", "fail"),
          ("undecided", "inconclusive"), ("holdout-1", "fail")]


@pytest.fixture(scope="module")
def sealed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run, sealed; each test works on its own copy of the folder."""
    root = tmp_path_factory.mktemp("screen")
    project = Project(root)
    project.write("screen_agent.py", f"HOSTILE = {HOSTILE!r}\n" + AGENT)
    project.write("evals/screen.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    with JudgeServer() as judge:
        done = project.assay("run", "evals", env={
            "ASSAY_JUDGE_BASE_URL": judge.base_url, "OPENAI_API_KEY": "sk-test",
            "PYTHONPATH": str(root)})
    assert done.code == 1, done.out + done.err  # failing cases: not passed
    return root


@pytest.fixture
def sealed(sealed_template: Path, tmp_path: Path) -> Project:
    root = tmp_path / "project"
    shutil.copytree(sealed_template, root)
    return Project(root)


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """The operator's private hidden folder, holding the very set the run ran."""
    folder = tmp_path / "private"
    (folder / "review" / "screen@1").mkdir(parents=True)
    (folder / "review" / "screen@1" / "cases.yaml").write_text(HIDDEN, encoding="utf-8")
    return folder


def db_url(project: Project) -> str:
    return f"sqlite:///{project.root / '.assay' / 'assay.db'}"


def pilot_run(project: Project, scenario: Callable[[Any, Any], Awaitable[None]], *,
              reviewer: str = "ana", hidden_dir: Path | None = None,
              url: str | None = None, page: int | None = None) -> None:
    """Open the screen on ``project``'s store and play ``scenario(app, pilot)`` on it."""
    from assay.review.screen import ReviewApp
    from assay.store.database import open_store

    store = open_store(url or db_url(project))

    async def play() -> None:
        app = (ReviewApp(store, reviewer, hidden_dir) if page is None
               else ReviewApp(store, reviewer, hidden_dir, page=page))
        async with app.run_test(size=(180, 60), notifications=True) as pilot:
            await pilot.pause()
            await scenario(app, pilot)

    try:
        asyncio.run(play())
    finally:
        store.close()


def rendered(app: Any) -> str:
    """Everything the screen shows now: the visible screen, and every widget's whole text.

    The screenshot is what the terminal would hold; the widgets' own text adds
    what is scrolled out of view (the detail's end, the list's rows).
    """
    from textual.widgets import DataTable, Static

    svg = app.export_screenshot(simplify=True)
    parts = [html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")]
    for widget in app.screen.query(Static):
        parts.append(str(widget.render()))
    for table in app.screen.query(DataTable):
        for index in range(table.row_count):
            parts.append(" ".join(str(cell) for cell in table.get_row_at(index)))
    return "\n".join(parts)


def detail(app: Any) -> str:
    return str(app.query_one("#detail").render())


def rows(app: Any) -> list[tuple[str, str]]:
    table = app.query_one("#items")
    return [(str(table.get_row_at(i)[1]), str(table.get_row_at(i)[3]))
            for i in range(table.row_count)]


def store_items(project: Project) -> dict[str, dict[str, Any]]:
    """Every queue row by case label, with its note's text."""
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    db.row_factory = sqlite3.Row
    found = db.execute(
        "SELECT r.*, b.content AS note FROM review_items r "
        "LEFT JOIN blobs b ON b.digest = r.note_digest ORDER BY r.id").fetchall()
    return {row["label"]: dict(row) for row in found}


def review_entries(project: Project) -> list[dict[str, Any]]:
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    return [json.loads(content) for (content,) in db.execute(
        "SELECT b.content FROM ledger l JOIN blobs b ON b.digest = l.content_digest "
        "WHERE l.kind = 'review' ORDER BY l.\"index\"")]


async def take(pilot: Any, key: str, note: str) -> None:
    """Press a decision key, type the note, press Enter."""
    await pilot.press(key)
    await pilot.pause()
    await pilot.press(*note)
    await pilot.press("enter")
    await pilot.pause()


def test_the_open_items_are_listed_oldest_first_with_the_selected_ones_detail(
        sealed: Project) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        assert rows(app) == QUEUED
        first = detail(app)
        # The trace: the tool call with its arguments, its result, the ask.
        assert "item 1" in first and "tools" in first
        assert "→ call lookup" in first and '"order": 42' in first
        assert "[bold]B[/bold]" in first  # the argument as it was sent, not styled
        assert "← result of lookup" in first
        assert "? ask ask_user: Which address should I use?" in first
        # The verdict: its outcome, check, evidence, note and provenance.
        assert "equals" in first and "evidence observed" in first
        assert 'note: got "tools", expected "right"' in first
        assert "by: check:equals" in first
        # j / k and the arrows move; the detail follows.
        await pilot.press("j")
        judged = detail(app)
        assert "item 2" in judged and "Not our problem. JUDGE:fail" in judged
        assert "judge judge-model-2025, prompt sha256:" in judged  # the judge's provenance
        await pilot.press("down", "down")
        assert "item 4" in detail(app) and "inconclusive" in detail(app)
        await pilot.press("k", "up", "up")
        assert "item 1" in detail(app)
        await pilot.press("question_mark")
        await pilot.pause()
        keys = rendered(app)
        assert "approve the selected item" in keys and "needs-fix" in keys
        await pilot.press("escape")
        await pilot.pause()
        assert "approve the selected item" not in rendered(app)

    pilot_run(sealed, scenario)


def test_each_decision_is_sealed_and_the_next_item_is_selected(sealed: Project) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        await take(pilot, "a", "the lookup was right after all")
        assert [case for case, _ in rows(app)] == ["judged", "hostile", "undecided",
                                                    "holdout-1"]
        assert "item 2" in detail(app)  # the next one took its place
        assert "approved by ana; ledger entry" in rendered(app)  # the notification
        await take(pilot, "r", "no apology")
        await pilot.press("j")  # skip "hostile"
        await take(pilot, "f", "needs a cost report")
        assert rows(app) == [("hostile", "fail"), ("holdout-1", "fail")]
        assert "item 5" in detail(app)  # the last one left in place is selected
        assert "2 open items" in rendered(app)

    pilot_run(sealed, scenario, reviewer="ana")
    items = store_items(sealed)
    decided = {label: (row["verdict"], row["reviewer"], row["note"].decode())
               for label, row in items.items() if row["verdict"]}
    assert decided == {"tools": ("approved", "ana", "the lookup was right after all"),
                       "judged": ("rejected", "ana", "no apology"),
                       "undecided": ("needs-fix", "ana", "needs a cost report")}
    entries = review_entries(sealed)
    assert [(e["item"], e["verdict"], e["reviewer"]) for e in entries] == [
        (items["tools"]["id"], "approved", "ana"), (items["judged"]["id"], "rejected", "ana"),
        (items["undecided"]["id"], "needs-fix", "ana")]
    assert all(e["note"].startswith("sha256:") for e in entries)
    verify = sealed.assay("ledger", "verify")
    assert verify.code == 0, verify.out + verify.err


def test_escape_cancels_and_nothing_is_written(sealed: Project) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        await pilot.press("r")
        await pilot.pause()
        await pilot.press(*"not sure yet")
        await pilot.press("escape")
        await pilot.pause()
        assert rows(app) == QUEUED and "item 1" in detail(app)
        # Back on the list, the keys work again: q typed into a note would not quit.
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("q", "escape")
        await pilot.pause()
        assert app.is_running

    pilot_run(sealed, scenario)
    assert not any(row["verdict"] for row in store_items(sealed).values())
    assert review_entries(sealed) == []


def test_a_decision_taken_meanwhile_is_a_notification(sealed: Project) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        item = store_items(sealed)["tools"]["id"]
        # Someone else decides the selected item from another process.
        other = sealed.assay("review", str(item), "--verdict", "rejected", "--note", "theirs",
                             "--reviewer", "bob")
        assert other.code == 0, other.err
        await take(pilot, "a", "mine")
        shown = rendered(app)
        assert f"item {item} (tools) was decided already: rejected by bob" in shown
        assert app.is_running
        assert [case for case, _ in rows(app)] == ["judged", "hostile", "undecided",
                                                    "holdout-1"]
        assert "item 2" in detail(app)

    pilot_run(sealed, scenario)
    tools = store_items(sealed)["tools"]
    assert (tools["verdict"], tools["reviewer"], tools["note"]) == ("rejected", "bob", b"theirs")
    assert len(review_entries(sealed)) == 1


def test_the_hidden_case_is_withheld_everywhere_the_screen_draws(sealed: Project) -> None:
    seen: list[str] = []

    async def scenario(app: Any, pilot: Any) -> None:
        for _ in QUEUED:  # every item's detail, in turn
            seen.append(rendered(app))
            await pilot.press("j")
        hidden = detail(app)
        assert "holdout-1" in hidden and "content withheld" in hidden
        assert "reason:" not in hidden and "verdicts" not in hidden
        await take(pilot, "r", "looked wrong")  # and the decision's notification
        seen.append(rendered(app))

    pilot_run(sealed, scenario)
    for text in seen:
        assert CANARY not in text
    assert "holdout-1) rejected by ana" in seen[-1]
    assert store_items(sealed)["holdout-1"]["verdict"] == "rejected"


def test_the_hidden_set_shows_its_content_to_whoever_holds_it(sealed: Project,
                                                              private: Path) -> None:
    # The same search that finds nothing above finds the canary once it may be shown.
    async def scenario(app: Any, pilot: Any) -> None:
        assert rows(app)[-1] == (f"{CANARY}-id", "fail")
        await pilot.press("G")
        await pilot.pause()
        shown = detail(app)
        assert f"{CANARY}-input" in shown and "content withheld" not in shown
        assert "equals $.echo" in shown

    pilot_run(sealed, scenario, hidden_dir=private)


def test_agent_markup_is_shown_literally_and_does_nothing(sealed: Project) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        from textual.geometry import Region

        await pilot.press("j", "j")
        pane = app.query_one("#detail")
        text = detail(app)
        assert "item 3" in text
        for literal in ("[bold red]LOUD[/]", "[link=https://example.invalid]a link[/link]",
                        "[@click=app.quit]click me[/]"):
            assert literal in text
        # The escape sequences arrive as visible pictures, never as controls.
        assert "␛[2J" in text and "␛]0;title␇" in text
        lines = pane.render_lines(Region(0, 0, pane.size.width, pane.size.height))
        segments = [segment for line in lines for segment in line]
        assert not any("\x1b" in s.text or "\x07" in s.text for s in segments)
        assert not any(s.style is not None and (s.style.link or "@click" in s.style.meta)
                       for s in segments)
        # Click on the words that would have been an @click=app.quit link.
        for y, line in enumerate(lines):
            x = line.text.find("click me")
            if x >= 0:
                await pilot.click("#detail", offset=(x + 2, y))
                break
        else:
            pytest.fail("the hostile output is not on the screen")
        await pilot.pause()
        assert app.is_running
        await pilot.press("j")  # and the screen still answers keys
        assert "item 4" in detail(app)

    pilot_run(sealed, scenario)


def test_a_hand_added_item_shows_its_skills_and_errors(sealed: Project) -> None:
    from assay.model import Event, Trace
    from assay.store.database import open_store
    from assay.store.reviews.items import add_item

    trace = Trace(output=None, status="error", error="[red]host gave up[/red]", events=[
        Event(kind="skill", name="pdf-forms"),
        Event(kind="tool_call", name="fill", arguments={"field": "name"}, call_id="c1"),
        Event(kind="tool_result", name="fill", result="no such field", is_error=True,
              call_id="c1"),
        Event(kind="error", name="mcp:forms", text="server exited"),
    ])
    store = open_store(db_url(sealed))
    try:
        item = add_item(store, {"source": "manual", "split": "public", "label": "pasted",
                                "outcome": "fail", "reason": "a person pasted it",
                                "added_at": "2999-01-01T00:00:00Z"},
                        trace.model_dump_json().encode())
    finally:
        store.close()

    async def scenario(app: Any, pilot: Any) -> None:
        await pilot.press("G")
        await pilot.pause()
        shown = detail(app)
        assert f"item {item}" in shown and "pasted" in shown and "source: manual" in shown
        assert "✦ skill pdf-forms" in shown
        assert '→ call fill {"field": "name"}' in shown
        assert "← error from fill no such field" in shown
        assert "✗ error in mcp:forms: server exited" in shown
        assert "error: [red]host gave up[/red]" in shown
        assert "no verdicts are stored" in shown

    pilot_run(sealed, scenario)


def test_a_long_queue_is_listed_a_page_at_a_time_oldest_first(sealed: Project) -> None:
    async def scenario(app: Any, pilot: Any) -> None:
        assert rows(app) == QUEUED[:2]
        assert "the oldest 2 open items (more wait)" in rendered(app)
        await take(pilot, "a", "one")
        assert rows(app) == QUEUED[1:2]
        await take(pilot, "a", "two")  # the page is done: the next oldest come
        assert rows(app) == QUEUED[2:4] and "item 3" in detail(app)
        await take(pilot, "a", "three")
        await take(pilot, "a", "four")
        assert rows(app) == QUEUED[4:] and "1 open item " in rendered(app)

    pilot_run(sealed, scenario, page=2)
    assert len(review_entries(sealed)) == 4


def test_an_empty_queue_says_so(tmp_path: Path) -> None:
    project = Project(tmp_path)

    async def scenario(app: Any, pilot: Any) -> None:
        assert rows(app) == []
        assert "The queue is empty" in detail(app)
        await pilot.press("a")  # nothing to decide: said, not crashed
        await pilot.pause()
        assert "nothing to decide" in rendered(app)
        assert app.is_running and "0 open items" in rendered(app)

    pilot_run(project, scenario, url=f"sqlite:///{tmp_path / 'empty.db'}")


def test_review_help_does_not_load_textual(tmp_path: Path) -> None:
    code = ("import sys\nsys.argv = ['assay', 'review', '--help']\nfrom assay.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED' if 'textual' in sys.modules else 'LIGHT')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.stdout.strip().endswith("LIGHT"), done.stdout + done.stderr


_CONTROL = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def _read_until(master: int, wanted: bytes, deadline: float) -> bytes:
    """What the terminal received until ``wanted`` shows in its text (or EOF, or the deadline)."""
    got = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        got += chunk
        if wanted and wanted in _CONTROL.sub(b"", got):
            break
    return got


def test_assay_review_opens_in_a_terminal_and_q_quits(sealed: Project) -> None:
    import fcntl
    import struct
    import termios

    master, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {key: value for key, value in os.environ.items() if key != "ASSAY_HIDDEN_DIR"}
    env.update({"TERM": "xterm-256color", "ASSAY_REVIEWER": "ana"})
    try:
        process = subprocess.Popen([sys.executable, "-m", "assay", "review"], cwd=sealed.root,
                                   stdin=child, stdout=child, stderr=child, env=env,
                                   start_new_session=True)
    finally:
        os.close(child)  # the child holds it now; reading ends when the child is gone
    try:
        drawn = _read_until(master, b"5 open items", time.monotonic() + 60)
        assert b"5 open items" in _CONTROL.sub(b"", drawn), drawn[-2000:]
        assert CANARY.encode() not in drawn
        os.write(master, b"q")
        rest = _read_until(master, b"", time.monotonic() + 30)
        assert process.wait(timeout=30) == 0, rest[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)


def test_a_crash_of_the_screen_shows_no_locals_and_no_message(
        sealed: Project, capfd: pytest.CaptureFixture[str]) -> None:
    # Textual's own crash report prints every frame's local variables: on this
    # screen they may hold a hidden case. A key that fails (added here by a
    # subclass, the one way to make the screen fail on purpose) shows what the
    # reviewer sees on any unexpected error.
    from textual.binding import Binding

    from assay.review.screen import ReviewApp
    from assay.store.database import open_store

    class Failing(ReviewApp):
        BINDINGS = [Binding("x", "fail", "Fail")]

        def action_fail(self) -> None:
            hidden_input = f"{CANARY}-input"
            raise KeyError(hidden_input)

    async def press_x(pilot: Any) -> None:
        await pilot.pause()
        await pilot.press("x")

    store = open_store(db_url(sealed))
    try:
        app = Failing(store, "ana", None)
        app.run(headless=True, size=(120, 40), auto_pilot=press_x)
    finally:
        store.close()
    captured = capfd.readouterr()
    assert app.return_code == 1
    said = " ".join(captured.err.split())
    assert "the screen stopped on an internal error (KeyError at test_screen.py:" in said
    assert CANARY not in captured.out + captured.err

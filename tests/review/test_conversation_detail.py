"""The review screen's detail of a conversation trial (SPEC §16): each turn headed, what the
user said and what the agent replied shown as text, the agent's work between them."""

from __future__ import annotations

from assay.model import Event, Trace
from assay.review.detail import Whole, detail
from assay.review.queue import Shown
from assay.store.reviews.items import ItemEvidence

ITEM = Shown(item=1, source="run", run_id="r", case="change-flight", trial=1, hidden=False,
             outcome="fail", reason=None, added_at="2026-01-01T00:00:00Z", verdict=None,
             note=None, reviewer=None, decided_at=None)


def test_a_conversation_reads_turn_by_turn_and_its_markup_stays_text() -> None:
    trace = Trace(output={"booked": "9:00"}, events=[
        Event(kind="user", text="Move ABC123 [bold]now[/bold] \x1b[31m", turn=1),
        Event(kind="tool_call", name="update_booking", arguments={"booking": "ABC123"},
              turn=1),
        Event(kind="reply", result="9am or 5pm? [@click=app.quit]x[/]", turn=1),
        Event(kind="user", text="9am.", turn=2),
        Event(kind="reply", result={"booked": "9:00"}, turn=2),
    ])
    shown = detail(Whole(ITEM, ItemEvidence(trace.model_dump_json().encode(), []))).plain
    lines = shown.split("── trace", 1)[1].splitlines()
    assert lines[2:9] == [
        "── turn 1 ",
        "user Move ABC123 [bold]now[/bold] ␛[31m",
        '→ call update_booking {"booking": "ABC123"}',
        "agent replied 9am or 5pm? [@click=app.quit]x[/]",
        "── turn 2 ",
        "user 9am.",
        "agent replied {"]
    assert "✗ error" not in shown  # a turn's events are not mistaken for errors

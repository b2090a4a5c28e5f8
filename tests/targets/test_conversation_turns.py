"""The bookkeeping of a conversation's turns (targets/conversation.py): who says what
next, and events put in the turn they happened in."""

from __future__ import annotations

import asyncio

from assay.model import Event
from assay.targets.conversation import ScriptedUser, Talk, by_turn


def test_a_scripted_user_says_its_turns_in_order_then_nothing() -> None:
    async def talk() -> tuple[list[str | None], bool]:
        chat = Talk(ScriptedUser(["a", "b"]), system="be brief")
        said = [await chat.next()]
        chat.replied({"answer": 1})
        said.append(await chat.next())
        chat.replied("fine")
        said.append(await chat.next())
        assert chat.messages()[0] == {"role": "system", "content": "be brief"}
        assert chat.history[1] == {"role": "assistant", "content": '{"answer":1}'}
        return said, chat.settled

    assert asyncio.run(talk()) == (["a", "b", None], True)


def test_an_agent_that_says_stop_ends_the_conversation() -> None:
    async def talk() -> list[str | None]:
        chat = Talk(ScriptedUser(["a", "b", "c"]))
        said = [await chat.next()]
        chat.replied("Handing you over. ###STOP###")
        said.append(await chat.next())
        return said

    assert asyncio.run(talk()) == ["a", None]


def test_events_seen_after_the_fact_go_to_the_turn_they_happened_in() -> None:
    events = [
        Event(kind="user", text="a", turn=1, t=0.0),
        Event(kind="reply", result="x", turn=1, t=1.0),
        Event(kind="user", text="b", turn=2, t=2.0),
        Event(kind="reply", result="y", turn=2, t=3.0),
        # What the wire saw, read after the trial: by its time.
        Event(kind="tool_call", name="late", t=2.5),
        Event(kind="tool_call", name="early", t=0.5),
        Event(kind="http", text="no time"),
    ]
    ordered = by_turn(events)
    assert [(e.kind, e.name or e.text or e.result, e.turn) for e in ordered] == [
        ("user", "a", 1), ("tool_call", "early", 1), ("http", "no time", 1),
        ("reply", "x", 1), ("user", "b", 2), ("tool_call", "late", 2), ("reply", "y", 2)]

"""A conversation held by the ``openai:`` loop (SPEC §16): scripted turns against a real
OpenAI-compatible server on loopback (examples/support/stub_model.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.model import Case
from assay.targets import TrialRequest

from .test_openai import run, stub, target_for, tools  # noqa: F401 - fixtures

pytestmark = pytest.mark.real

FIRST = "I need to move booking ABC123 to Friday."
SECOND = "The 9am one, please."


def _talk(case: Case, fixture: Any = None) -> TrialRequest:
    path, loaded = fixture if fixture is not None else (None, None)
    return TrialRequest(case=case, n=1, timeout_s=10.0, fixture=path, tools=loaded)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_each_turn_is_sent_after_the_reply_and_every_event_carries_its_turn(
        stub: Any, tools: tuple[Path, Any]) -> None:  # noqa: F811
    server = stub({FIRST: [_call("crm.lookup", customer="C-1"),
                           {"content": "Which flight on Friday: 9am or 5pm?"},
                           _call("erp.refund", order="ABC123"),
                           {"content": "Done: moved to the 9:00 flight."}]})
    case = Case(id="move", input="You are a booking agent.", turns=[FIRST, SECOND])
    [trace] = run(target_for(server.url), _talk(case, tools))
    assert (trace.status, trace.output, trace.settled, trace.steps) == (
        "ok", "Done: moved to the 9:00 flight.", True, 4)
    assert [(e.kind, e.turn) for e in trace.events] == [
        ("user", 1), ("tool_call", 1), ("tool_result", 1), ("message", 1), ("reply", 1),
        ("user", 2), ("tool_call", 2), ("tool_result", 2), ("message", 2), ("reply", 2)]
    assert [e.text for e in trace.events if e.kind == "user"] == [FIRST, SECOND]
    assert [e.result for e in trace.events if e.kind == "reply"] == [
        "Which flight on Friday: 9am or 5pm?", "Done: moved to the 9:00 flight."]
    # The second turn was sent with the whole conversation before it, the system first.
    last = server.seen[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant",
                                         "user", "assistant", "tool"]
    assert last[0]["content"] == "You are a booking agent." and last[5]["content"] == SECOND


def test_a_refusal_ends_the_conversation_in_its_turn(stub: Any) -> None:  # noqa: F811
    server = stub({FIRST: [{"content": "Which flight?"}, {"refusal": "I cannot do that."}]})
    case = Case(id="move", turns=[FIRST, SECOND, "And a third thing."])
    [trace] = run(target_for(server.url), _talk(case))
    assert (trace.status, trace.output, trace.settled) == ("refused", "I cannot do that.", True)
    assert [(e.kind, e.turn) for e in trace.events][-2:] == [("user", 2), ("message", 2)]
    assert len(server.seen) == 2  # the third message was never sent


def test_the_step_limit_applies_to_each_turn(stub: Any, tools: tuple[Path, Any]) -> None:  # noqa: F811
    # Two calls then an answer in each turn: a limit of 3 steps is enough per turn, though
    # the conversation takes 6 model calls in all.
    turn = [_call("crm.lookup", customer="C-1"), _call("crm.lookup", customer="C-2")]
    server = stub({FIRST: [*turn, {"content": "first"}, *turn, {"content": "second"}]})
    case = Case(id="move", turns=[FIRST, SECOND])
    request = _talk(case, tools)
    request = TrialRequest(case=case, n=1, timeout_s=10.0, fixture=request.fixture,
                           tools=request.tools, call={"max_steps": 3})
    [trace] = run(target_for(server.url), request)
    assert (trace.status, trace.output, trace.steps) == ("ok", "second", 6)

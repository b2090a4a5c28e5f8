"""A conversation's turns as every surface reads them from a trace (SPEC §16): grouped by
turn, an unnumbered event kept in the turn it follows, and the report's summary of each."""

from __future__ import annotations

from assay.grading import fold_trial
from assay.model import Event, Trace
from assay.model.turns import TURN_CHARS, TurnSummary, summary, turns_of


def _talk() -> list[Event]:
    return [
        Event(kind="user", text="Move ABC123 to Friday.", turn=1),
        Event(kind="tool_call", name="update_booking", arguments={"booking": "ABC123"}, turn=1),
        Event(kind="tool_result", name="update_booking", result={"ok": True}, turn=1),
        Event(kind="message", text="9am or 5pm?", turn=1),
        Event(kind="reply", result="9am or 5pm?", turn=1),
        Event(kind="user", text="9am.", turn=2),
        Event(kind="ask", name="ask_user", text="Pay the fee?", turn=2),
        Event(kind="answer", name="ask_user", result="yes", turn=2),
        Event(kind="reply", result={"booked": "9:00"}, turn=2),
    ]


def test_events_are_grouped_by_turn_in_order() -> None:
    turns = turns_of(_talk())
    assert [(t.n, [e.kind for e in t.events]) for t in turns] == [
        (1, ["user", "tool_call", "tool_result", "message", "reply"]),
        (2, ["user", "ask", "answer", "reply"])]
    assert turns[0].user is not None and turns[0].user.text == "Move ABC123 to Friday."
    assert turns[1].reply is not None and turns[1].reply.result == {"booked": "9:00"}


def test_a_turn_the_agent_never_answered_keeps_what_happened_in_it() -> None:
    # A refusal (or the step limit, or a timeout) in turn 2: its events carry no number.
    events = [*_talk()[:5], Event(kind="user", text="Cancel it.", turn=2),
              Event(kind="tool_call", name="cancel"), Event(kind="message", text="I won't.")]
    turns = turns_of(events)
    assert [(t.n, len(t.events)) for t in turns] == [(1, 5), (2, 3)]
    assert turns[1].reply is None
    [_, second] = summary(Trace(events=events)) or []
    assert second == TurnSummary(turn=2, user="Cancel it.", calls=["cancel"], reply=None)


def test_a_user_message_without_a_number_opens_the_next_turn() -> None:
    events = [Event(kind="user", text="a"), Event(kind="reply", result="b"),
              Event(kind="user", text="c"), Event(kind="reply", result="d")]
    assert [(t.n, t.user.text if t.user else None) for t in turns_of(events)] == [
        (1, "a"), (2, "c")]


def test_a_trace_without_turns_is_not_a_conversation() -> None:
    single = Trace(output="4", events=[Event(kind="message", text="4"),
                                       Event(kind="tool_call", name="calc")])
    assert turns_of(single.events) == [] and summary(single) is None
    assert summary(None) is None
    trial = fold_trial(1, [], trace=single)
    assert trial.turns is None and "turns" not in trial.model_dump(mode="json")


def test_the_summary_names_the_calls_and_cuts_long_texts() -> None:
    long = "x" * (TURN_CHARS + 250)
    events = [*_talk(), Event(kind="user", text=long, turn=3),
              Event(kind="reply", result=long, turn=3)]
    turns = summary(Trace(events=events))
    assert turns is not None
    assert [t.model_dump() for t in turns[:2]] == [
        {"turn": 1, "user": "Move ABC123 to Friday.", "calls": ["update_booking"],
         "reply": "9am or 5pm?"},
        # A question to a person is a call; a reply that is not text is its compact JSON.
        {"turn": 2, "user": "9am.", "calls": ["ask_user"], "reply": '{"booked":"9:00"}'}]
    assert turns[2].user == "x" * TURN_CHARS + "… (250 more characters)"
    assert turns[2].reply == turns[2].user


def test_a_folded_trial_carries_its_turns_into_the_report() -> None:
    trial = fold_trial(1, [], trace=Trace(output={"booked": "9:00"}, events=_talk()))
    dumped = trial.model_dump(mode="json")
    assert [t["turn"] for t in dumped["turns"]] == [1, 2]
    assert dumped["turns"][0]["calls"] == ["update_booking"]

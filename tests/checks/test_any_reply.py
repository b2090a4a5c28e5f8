"""``turn: any`` (docs/decisions/0079): an output check on each reply of a conversation,
passing when one reply passes — what tau-bench's "the agent communicated X" asks."""

from __future__ import annotations

from typing import Any

from assay.checks.apply import grade_trace
from assay.model import Assertion, Event, Evidence, Trace


def _talk(*replies: Any) -> Trace:
    events: list[Event] = []
    for turn, reply in enumerate(replies, 1):
        events += [Event(kind="user", text=f"message {turn}", turn=turn),
                   Event(kind="reply", result=reply, turn=turn)]
    return Trace(output=replies[-1] if replies else None, events=events,
                 evidence={"output": Evidence.OBSERVED})


def _one(data: dict[str, Any], trace: Trace) -> tuple[str, str | None]:
    [verdict] = grade_trace([Assertion.from_mapping(data)], trace)
    return verdict.outcome, verdict.note


def test_a_check_on_any_reply_passes_when_an_earlier_reply_passes() -> None:
    trace = _talk("The refund is $1,628.", "Anything else?")
    outcome, note = _one({"turn": "any", "regex": "(?i)1,*6,*2,*8"}, trace)
    assert (outcome, note) == ("pass", "reply 1: matches /(?i)1,*6,*2,*8/")
    # Without turn: the check reads the last reply only, which does not say it.
    assert _one({"regex": "(?i)1,*6,*2,*8"}, trace)[0] == "fail"


def test_it_fails_when_no_reply_passes_and_says_how_many_there_were() -> None:
    outcome, note = _one({"turn": "any", "contains": "1628"},
                         _talk("one", {"total": 16}, "three"))
    assert outcome == "fail"
    assert note == 'none of the 3 replies passes; the last: does not contain "1628"'


def test_each_reply_is_read_alone_never_joined() -> None:
    # tau2 looks for the string within one message: split over two replies it is not said.
    assert _one({"turn": "any", "contains": "16 28"}, _talk("16", "28"))[0] == "fail"


def test_the_users_messages_are_not_read() -> None:
    trace = _talk("What total?")
    trace = trace.model_copy(update={"events": [
        Event(kind="user", text="The total is 1628", turn=1), *trace.events[1:]]})
    assert _one({"turn": "any", "contains": "1628"}, trace)[0] == "fail"


def test_a_conversation_with_no_reply_fails() -> None:
    assert _one({"turn": "any", "contains": "x"}, _talk()) == (
        "fail", "the conversation has no reply")


def test_a_path_reads_into_each_reply() -> None:
    trace = _talk({"booked": "Friday"}, "done")
    assert _one({"turn": "any", "path": "$.booked", "equals": "Friday"}, trace)[0] == "pass"


def test_the_label_says_the_check_reads_any_turn() -> None:
    [verdict] = grade_trace([Assertion.from_mapping({"turn": "any", "contains": "x"})],
                            _talk("x"))
    assert verdict.assertion == "contains (turn any)"

"""``scripted:FILE.jsonl``: recorded traces replayed by case and trial."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from assay.errors import HarnessFailure
from assay.model import FACTS, Evidence, Trace
from assay.targets import TrialBroken

if TYPE_CHECKING:
    from conftest import Workspace


def record(ws: Workspace, *lines: dict[str, Any] | str, name: str = "rec.jsonl") -> str:
    """Write a recording (dicts as JSON, strings as they are); returns its URI."""
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    (ws.root / name).write_text(text + "\n", encoding="utf-8")
    return f"scripted:{name}"


def outputs(ws: Workspace, uri: str, case_id: str, trials: int) -> list[Any]:
    traces = ws.run(uri, *(ws.trial(case_id=case_id, n=n) for n in range(1, trials + 1)))
    return [t.output for t in traces]


def test_replays_the_line_recorded_for_the_case(ws: Workspace) -> None:
    uri = record(
        ws,
        {"case": "a", "output": {"rows": [1, 2]}, "steps": 3, "status": "ok",
         "events": [{"kind": "tool_call", "name": "erp.refund", "arguments": {"order": "A1"}}],
         "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5}},
        {"case": "b", "output": "bee", "status": "refused"},
    )
    a, b = ws.run(uri, ws.trial(case_id="a"), ws.trial(case_id="b"))
    assert isinstance(a, Trace)
    assert a.output == {"rows": [1, 2]}
    assert a.steps == 3
    assert a.events[0].name == "erp.refund"
    assert a.events[0].arguments == {"order": "A1"}
    assert a.usage.cost_usd == 0.5
    assert (b.output, b.status) == ("bee", "refused")
    assert a.facets["harness"] == "scripted"


def test_several_lines_of_a_case_are_used_in_turn_cycling(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "output": "x"}, {"case": "b", "output": "other"},
                 {"case": "a", "output": "y"}, {"case": "a", "output": "z"})
    assert outputs(ws, uri, "a", 7) == ["x", "y", "z", "x", "y", "z", "x"]
    assert outputs(ws, uri, "b", 2) == ["other", "other"]


def test_trial_pins_a_line_to_a_trial_number(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "output": "any"}, {"case": "a", "trial": 2, "output": "two"})
    assert outputs(ws, uri, "a", 3) == ["any", "two", "any"]


def test_a_pinned_line_answers_only_its_trial(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "trial": 2, "output": "two"}, {"case": "a", "output": "any"})
    assert outputs(ws, uri, "a", 3) == ["any", "two", "any"]


def test_a_broken_line_breaks_the_trial_with_its_reason(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "output": "fine"},
                 {"case": "a", "trial": 2, "broken": "the agent crashed mid-answer"})
    target = ws.target(uri)

    async def go() -> tuple[Trace, str]:
        await target.start()
        first = await target.run(ws.trial(case_id="a", n=1))
        try:
            await target.run(ws.trial(case_id="a", n=2))
        except TrialBroken as exc:
            return first, str(exc)
        finally:
            await target.close()
        raise AssertionError("trial 2 did not break")

    first, reason = asyncio.run(go())
    assert first.output == "fine"
    assert reason == "the agent crashed mid-answer"


def test_a_case_with_no_recording_breaks_the_trial(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "output": 1})
    with pytest.raises(TrialBroken, match="no recorded trace"):
        ws.run(uri, ws.trial(case_id="not-recorded"))


@pytest.mark.parametrize(
    ("lines", "line_no", "words"),
    [
        (['{"case": "a", "output": 1}', "", '{"case": "b", "output": '], 3, "JSON"),
        (['{"case": "a", "output": 1}', '{"output": 2}'], 2, "case"),
        (['{"case": "a"}', '{"case": 5, "output": 2}'], 2, "case"),
        (['["case", "a"]'], 1, "case"),
        (['{"case": "a"}', '{"case": "a"}', '{"case": "a", "steps": "many"}'], 3, "steps"),
        (['{"case": "a", "status": "great"}'], 1, "status"),
        (['{"case": "a", "surprise": true}'], 1, "surprise"),
    ],
)
def test_a_malformed_recording_cannot_start_and_names_the_line(
    ws: Workspace, lines: list[str], line_no: int, words: str
) -> None:
    uri = record(ws, *lines)
    target = ws.target(uri)
    with pytest.raises(HarnessFailure) as caught:
        asyncio.run(target.start())
    message = str(caught.value)
    assert f"rec.jsonl:{line_no}:" in message
    assert words in message


def test_a_missing_recording_cannot_start(ws: Workspace) -> None:
    with pytest.raises(HarnessFailure, match="cannot read"):
        asyncio.run(ws.target("scripted:nowhere.jsonl").start())


def test_evidence_defaults_to_observed_and_a_line_may_override_it(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "output": 1},
                 {"case": "b", "output": 2, "evidence": {"output": "inferred",
                                                         "tool_calls": "unavailable"}})
    a, b = ws.run(uri, ws.trial(case_id="a"), ws.trial(case_id="b"))
    # A line with no usage reports none: its tokens and cost are unavailable, not 0.
    assert all(a.evidence_for(fact) == Evidence.OBSERVED for fact in FACTS
               if fact not in ("tokens", "cost"))
    assert a.evidence_for("tokens") == a.evidence_for("cost") == Evidence.UNAVAILABLE
    assert b.evidence_for("output") == Evidence.INFERRED
    assert b.evidence_for("tool_calls") == Evidence.UNAVAILABLE


def test_facets_of_a_line_join_the_harness_facet(ws: Workspace) -> None:
    uri = record(ws, {"case": "a", "output": 1, "facets": {"model": "m-1"}})
    (trace,) = ws.run(uri, ws.trial(case_id="a"))
    assert trace.facets == {"harness": "scripted", "model": "m-1"}


def test_digest_names_the_recording(ws: Workspace) -> None:
    first = ws.target(record(ws, {"case": "a", "output": 1})).digest()
    again = ws.target(record(ws, {"case": "a", "output": 1})).digest()
    other = ws.target(record(ws, {"case": "a", "output": 2})).digest()
    assert first == again
    assert first != other


def test_a_pin_is_recorded_as_not_honoured_by_a_replay(ws: Workspace) -> None:
    from assay.model import Case
    from assay.targets import TrialRequest

    uri = record(ws, {"case": "a", "output": 1, "facets": {"model": "m-1"}})
    pinned = TrialRequest(case=Case(id="a", model="m-2", invocation="none"), n=1,
                          timeout_s=5.0)
    (trace,) = ws.run(uri, pinned)
    assert trace.facets == {
        "harness": "scripted", "model": "m-1", "invocation": "none",
        "model_pin": "m-2 (not honoured: a scripted trace is replayed as it was recorded)"}

"""A trace holds only what the store, the ledger and the reports can take: no lone
surrogate, no nesting deeper than MAX_DEPTH (the rest kept as JSON text)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.canonical import digest
from assay.checks import grade_trace
from assay.grading import fold_trial
from assay.model import Assertion, Event, Evidence, Trace, TrialResult
from assay.model.storable import (
    CUT_NOTE,
    MAX_DEPTH,
    NotPlain,
    plain_copy,
    storable_json,
    storable_text,
)
from assay.store.runs.trials import trial_record

from ..fuzz_corpus import HOSTILE, MEGABYTE, nested


def depth(value: Any) -> int:
    level, frontier = 0, [value]
    while frontier:
        frontier = [child for item in frontier if isinstance(item, dict | list)
                    for child in (item.values() if isinstance(item, dict) else item)]
        level += 1
    return level - 1


def test_lone_surrogates_become_replacement_characters() -> None:
    assert storable_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert storable_json({"k\ud800": ["\udc00", 1, None]}) == {"k\ufffd": ["\ufffd", 1, None]}
    # A surrogate pair written as a real astral character is left alone.
    assert storable_text("\U0001f600") == "\U0001f600"


def test_ordinary_values_are_returned_as_they_are() -> None:
    value = {"rows": [{"total": "42.00", "n": 1.5}, "café"], "ok": True}
    assert storable_json(value) is value
    text = "plain text, ünïcode"
    assert storable_text(text) is text


def test_nesting_past_the_limit_is_kept_as_json_text() -> None:
    deep = nested(2000)
    kept = storable_json(deep)
    assert depth(kept) == MAX_DEPTH
    cut = kept
    for _ in range(MAX_DEPTH):
        cut = cut["a"]
    assert isinstance(cut, str) and cut.startswith(CUT_NOTE)
    assert cut[len(CUT_NOTE):] == '{"a":' * (2000 - MAX_DEPTH) + '"leaf"' + "}" * (2000 - MAX_DEPTH)
    lists = storable_json([[[["x\ud800", {"k": (1, 2)}]]]], depth=2)
    assert lists == [[CUT_NOTE + '[["x\ufffd",{"k":[1,2]}]]']]


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(codec=None)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(st.characters(codec=None), max_size=3), inner, max_size=3),
    max_leaves=20))
def test_any_value_becomes_utf8_json(value: Any) -> None:
    kept = storable_json(value, depth=2)
    json.dumps(kept, ensure_ascii=False).encode("utf-8")
    assert depth(kept) <= 2


def _round_trip(value: Any) -> Any:
    return json.loads(json.dumps(storable_json(value), allow_nan=False))


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None)),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(
        st.text(st.characters(codec=None), max_size=3), inner, max_size=3),
    max_leaves=30))
def test_a_plain_copy_is_what_the_json_round_trip_gives(value: Any) -> None:
    copied = plain_copy(value)
    assert copied == _round_trip(value)
    assert json.dumps(copied) == json.dumps(_round_trip(value))  # same types: tuples are lists


def test_a_plain_copy_shares_nothing_with_the_agents_value() -> None:
    value = {"rows": [{"a": 1}], "pair": ("x", 2.5)}
    copied = plain_copy(value)
    value["rows"][0]["a"] = 2
    assert copied == {"rows": [{"a": 1}], "pair": ["x", 2.5]}


class _Text(str):
    pass


@pytest.mark.parametrize("value", [
    float("nan"), [float("inf")], {"x": -float("inf")},  # JSON has none: the round trip refuses
    {1: "a"}, {None: "a"}, {("t",): 1},  # keys the round trip turns into text, or refuses
    _Text("sub"), {"k": _Text("v")}, {"k": {1, 2}}, object(),  # subclasses, other types
    nested(MAX_DEPTH + 1),  # deeper than a trace keeps: cut by storable_json
], ids=["nan", "inf", "-inf", "int-key", "none-key", "tuple-key", "str-subclass",
        "str-subclass-value", "set", "object", "too-deep"])
def test_anything_but_plain_json_is_left_to_the_round_trip(value: Any) -> None:
    with pytest.raises(NotPlain):
        plain_copy(value)


def test_nesting_up_to_the_limit_is_copied() -> None:
    assert plain_copy(nested(MAX_DEPTH)) == _round_trip(nested(MAX_DEPTH))


def _trace() -> Trace:
    return Trace(
        output={"out": HOSTILE, HOSTILE: nested(3000), "big": MEGABYTE},
        error=HOSTILE, stdout=HOSTILE, facets={"model": HOSTILE},
        events=[Event(kind="tool_call", name=HOSTILE, arguments={"q": HOSTILE, "d": nested(3000)}),
                Event(kind="tool_result", name="x", result=nested(3000), text=HOSTILE)],
    )


def test_a_hostile_trace_is_stored_read_back_and_digested() -> None:
    trace = _trace()
    result = fold_trial(1, [], trace=trace)
    record = trial_record("case", "public", result)
    assert record.trace is not None
    again = Trace.model_validate_json(record.trace)
    assert again == trace
    assert "\ufffd" in again.output["out"] and "\ud800" not in record.trace.decode("utf-8")
    assert digest(json.loads(record.trace)).startswith("sha256:")


def test_checks_read_a_deep_output_without_recursion_errors() -> None:
    trace = Trace(output=nested(5000), evidence={"output": Evidence.OBSERVED})
    expect = [Assertion(check="type", arg="object", path="$.a.a.a"),
              Assertion(check="contains", arg="leaf"),
              Assertion(check="type", arg="string", path="$..a")]
    verdicts = grade_trace(expect, trace)
    assert [v.outcome for v in verdicts[:2]] == ["pass", "pass"]
    # Recursive descent walks the whole kept trace: a decision, not "recursion limit".
    assert verdicts[2].outcome in ("pass", "fail"), verdicts[2].note


def test_a_broken_trials_reason_is_storable() -> None:
    result = TrialResult(n=1, outcome="broken", reason="agent raised ValueError: \ud800")
    assert result.reason == "agent raised ValueError: \ufffd"
    result.model_dump_json().encode("utf-8")

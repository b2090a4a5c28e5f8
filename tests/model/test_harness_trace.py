"""A trace the harness makes without validation is the trace validation would make.

``harness_trace`` and ``message_event`` skip pydantic's validation on the
``python:`` target's hot path; they must give what ``Trace(...)`` and
``Event(...)`` give for the same arguments — values, the fields counted as
given, the JSON — or a stored trace would change with the speed-up.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from assay.model import Event, Evidence, Trace, Usage
from assay.model.trace import harness_trace, message_event, no_usage

# Every code point: lone surrogates (st.text leaves them out by default), NUL, controls.
texts = st.text(alphabet=st.characters(exclude_categories=()), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=40)
deep = st.integers(1, 80).map(lambda depth: _nested(depth))  # past storable_json's depth cap
events = st.lists(st.builds(Event, kind=st.sampled_from(["message", "tool_call", "tool_result"]),
                            name=st.none() | texts, arguments=json_values, text=st.none() | texts),
                  max_size=3)
fields = st.fixed_dictionaries({
    "output": json_values | deep, "status": st.sampled_from(["ok", "error", "refused", "timeout"]),
    "error": st.none() | texts, "events": events,
    "usage": st.builds(Usage, input_tokens=st.none() | st.integers(0, 10**9),
                       cost_usd=st.none() | st.floats(0, 10)),
    "steps": st.none() | st.integers(0, 50), "settled": st.none() | st.booleans(),
    "duration_s": st.floats(0, 1e4), "stdout": texts,
    "facets": st.dictionaries(texts, texts, max_size=3),
    "evidence": st.dictionaries(st.sampled_from(["output", "tool_calls", "tokens", "cost"]),
                                st.sampled_from(list(Evidence)), max_size=4),
    "state": st.none() | json_values})


def _nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@settings(max_examples=400, deadline=None)
@given(fields)
def test_a_harness_trace_is_the_validated_trace(given_fields: dict[str, object]) -> None:
    made = harness_trace(**given_fields)  # type: ignore[arg-type]
    validated = Trace(**given_fields)  # type: ignore[arg-type]
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set
    assert made.model_dump_json(fallback=repr) == validated.model_dump_json(fallback=repr)
    # Its maps and lists are its own, as a validated trace's are.
    assert made.facets is not given_fields["facets"]
    assert made.evidence is not given_fields["evidence"]
    assert made.events is not given_fields["events"]


@given(st.none() | texts)
def test_a_message_event_is_the_validated_event(text: str | None) -> None:
    made = message_event(text)
    validated = Event(kind="message", text=text)
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set
    assert made.model_dump_json() == validated.model_dump_json()


def test_no_usage_is_the_validated_empty_usage() -> None:
    made, validated = no_usage(), Usage()
    assert made == validated and made is not no_usage()
    assert made.model_fields_set == validated.model_fields_set == set()
    assert made.model_dump_json() == validated.model_dump_json()
    assert made.tokens is None and made.add(Usage(input_tokens=3)) == Usage(input_tokens=3)

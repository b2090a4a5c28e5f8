"""A trace's bytes as the store keeps them: ``trace_json`` writes what pydantic writes.

What a trial's trace is stored as, and hashed for its ledger entry, is
``Trace.model_dump_json(fallback=repr)`` (docs/decisions/0017). ``trace_json``
writes it with orjson where orjson writes the same bytes, and through pydantic
where it would not (docs/decisions/0081-fast-json.md). Generated traces, with
every kind of value a field can hold, must come out byte for byte as pydantic
writes them; each thing orjson refuses must reach pydantic and come out the
same; and an ordinary trace must take the fast path, or the property would
hold only because everything went through pydantic.
"""

from __future__ import annotations

import enum
import json
import math
import pickle
import re
import warnings
from collections.abc import Callable
from typing import Any, get_args

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from assay.model import Event, Evidence, Trace, Usage, compact
from assay.model.changes import ChangeSet, CommandRun, FileChange, FileRead, WorkspaceFacts
from assay.model.compact import fast_json, trace_json, usage_json
from assay.model.conversation import SimulatorUse
from assay.model.trace import EventKind, Status

# --- values -------------------------------------------------------------------------------

#: Characters JSON writers disagree on, mixed into every generated text.
ODD_CHARACTERS = ["\u2028", "\u2029", "\x00", "\x01", "\x1f", "\x7f", "\x85", '"', "\\", "/",
                  "é", "日", "\U0001f600", "\ufeff", "\ufffd", "\t", "\n", "\r"]
#: Integers at and past the edges orjson writes (it refuses outside [-2**63, 2**64)).
EDGE_INTEGERS = [0, -1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1,
                 2**70, -2**70, 10**30]
#: Floats whose text differs between JSON writers (``1e+16`` against ``1e16``, a small
#: duration written out in full or as an exponent), and the ones JSON has no form for.
EDGE_FLOATS = [0.0, -0.0, 1e16, 1e15, 1e-5, 1e-7, 3.0517578125e-05, 5e-324,
               2.2250738585072014e-308, 1.7976931348623157e308, 0.1 + 0.2, 1 / 3, 123456789.0,
               1.5e300, -1e-300, math.nan, math.inf, -math.inf]


class Shade(enum.Enum):
    """An enum an agent might hand over inside its output (written by its value)."""

    DARK = "dark"
    NUMBER = 3


class Level(enum.IntEnum):
    LOW = 1


class Text(str):
    """A subclass of str: orjson is told to refuse it, so pydantic writes it."""


class Opaque:
    """Not JSON at all: pydantic writes its repr (``fallback=repr``)."""

    def __repr__(self) -> str:
        return "Opaque<\u2028é>"


texts = st.text(st.one_of(st.characters(), st.sampled_from(ODD_CHARACTERS)), max_size=12)
#: Texts with lone surrogates too (the fields validated as storable replace them).
raw_texts = st.text(st.one_of(st.characters(exclude_categories=()),
                              st.sampled_from(ODD_CHARACTERS)), max_size=8)
integers = st.one_of(st.integers(), st.sampled_from(EDGE_INTEGERS))
floats = st.one_of(st.floats(), st.floats(min_value=0, max_value=1e-3),
                   st.sampled_from(EDGE_FLOATS))
durations = st.one_of(st.floats(min_value=0, max_value=1e-3), st.floats(min_value=0),
                      st.sampled_from([1e-7, 3.0517578125e-05, 0.0]))
scalars = st.one_of(st.none(), st.booleans(), integers, floats, texts)
#: Keys that are not strings: the model allows any value in ``Any``; pydantic writes
#: them as text, orjson refuses them.
odd_keys = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
exotic = st.one_of(st.sampled_from([Shade.DARK, Shade.NUMBER, Level.LOW, Evidence.INFERRED]),
                   texts.map(Text), st.builds(Opaque), st.tuples(scalars, scalars))


def json_values(*, odd: bool = True) -> st.SearchStrategy[Any]:
    """JSON-like values nested a few levels; with ``odd``, also what JSON is not."""
    leaves = st.one_of(scalars, exotic) if odd else scalars
    keys = st.one_of(texts, odd_keys) if odd else texts
    return st.recursive(leaves, lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=4)), max_leaves=12)


plain_values = json_values(odd=False)
any_values = st.one_of(plain_values, json_values())


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


# --- models -------------------------------------------------------------------------------


def events_of(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Event]:
    return st.builds(
        Event,
        kind=st.sampled_from(get_args(EventKind)), name=optional(texts), arguments=values,
        result=values, text=optional(texts), call_id=optional(texts),
        is_error=st.booleans(), t=optional(floats), turn=optional(integers))


events = events_of(any_values)
usages = st.builds(Usage, input_tokens=optional(integers), output_tokens=optional(integers),
                   cost_usd=optional(floats))
evidence_maps = st.dictionaries(st.one_of(st.sampled_from(["output", "tool_calls", "tokens",
                                                           "cost", "state", "workspace"]),
                                          texts), st.sampled_from(list(Evidence)), max_size=9)
workspaces = st.builds(
    WorkspaceFacts,
    changes=st.builds(ChangeSet, files=st.lists(st.builds(
        FileChange, path=texts, change=st.sampled_from(["created", "modified", "deleted"]),
        size=optional(integers), sha256=optional(texts), link=optional(texts),
        binary=st.booleans()), max_size=3), diff=texts, diff_truncated=st.booleans()),
    files=st.lists(st.builds(FileRead, path=texts, exists=st.booleans(), text=optional(texts),
                             binary=st.booleans(), truncated=st.booleans(),
                             error=optional(texts)), max_size=2),
    commands=st.lists(st.builds(
        CommandRun, command=st.one_of(texts, st.lists(texts, max_size=3)),
        timeout_s=st.one_of(floats, st.integers(0, 600)), exit_code=optional(integers),
        stdout=texts, stderr=texts, stdout_truncated=st.booleans(), duration_s=durations,
        error=optional(texts)), max_size=2),
    found=st.dictionaries(texts, st.lists(texts, max_size=2), max_size=2),
    path=optional(texts))
simulators = st.builds(
    SimulatorUse, model=texts, template=texts, instructions=texts, seed=optional(integers),
    calls=integers, cached=integers, input_tokens=optional(integers),
    output_tokens=optional(integers), cost_usd=optional(floats))
traces = st.builds(
    Trace,
    output=any_values, status=st.sampled_from(get_args(Status)), error=optional(texts),
    events=st.lists(events, max_size=4), usage=usages, steps=optional(integers),
    settled=optional(st.booleans()), exit_code=optional(integers), duration_s=durations,
    stdout=texts, facets=st.dictionaries(texts, texts, max_size=3), evidence=evidence_maps,
    partial=st.booleans(), workspace=optional(workspaces), state=optional(any_values),
    simulator=optional(simulators))


def pydantic_bytes(trace: Trace) -> bytes:
    return trace.model_dump_json(fallback=repr).encode()


def same_bytes_or_same_error(trace: Trace) -> None:
    """``trace_json`` writes pydantic's bytes, or raises what pydantic raises."""
    try:
        expected = pydantic_bytes(trace)
    except PydanticSerializationError as exc:
        with pytest.raises(PydanticSerializationError) as raised:
            trace_json(trace)
        assert str(raised.value) == str(exc)
        return
    assert trace_json(trace) == expected


# --- the property -------------------------------------------------------------------------


@settings(max_examples=400)
@given(traces)
def test_a_trace_is_written_as_pydantic_writes_it(trace: Trace) -> None:
    same_bytes_or_same_error(trace)


@settings(max_examples=200)
@given(st.builds(Trace, output=plain_values, events=st.lists(events_of(plain_values), max_size=3),
                 usage=usages, duration_s=durations, evidence=evidence_maps,
                 workspace=optional(workspaces), state=optional(plain_values),
                 simulator=optional(simulators)))
def test_a_trace_of_plain_json_values_within_64_bits_takes_the_fast_path(trace: Trace) -> None:
    """What most traces are: orjson writes them (else the property holds vacuously).

    Text UTF-8 cannot hold (a lone surrogate in a field not made storable, which
    pydantic refuses, or writes as U+FFFD in a key of a typed map) and integers
    past 64 bits are left to the other tests."""
    assume(SURROGATE.search(repr(trace)) is None)
    expected = pydantic_bytes(trace)
    assume(all(-2**63 <= n < 2**64 for n in _integers(expected)))
    data = compact._trace_data(trace)
    assert data is not None
    encoded = fast_json(data)
    assert encoded is not None and encoded == trace_json(trace) == expected


#: A lone surrogate as ``repr`` shows it (or a text that merely looks like one).
SURROGATE = re.compile(r"\\ud[89a-f][0-9a-f]{2}")


def _integers(text: bytes) -> list[int]:
    """Every integer a JSON text holds (strings included: enough to rule out big ones)."""
    found: list[int] = []

    def hook(value: str) -> int:
        found.append(int(value))
        return int(value)

    json.loads(text, parse_int=hook)
    return found


@settings(max_examples=200)
@given(traces, st.data())
def test_fields_holding_another_type_than_declared_are_written_as_pydantic_writes_them(
        trace: Trace, data: st.DataObject) -> None:
    """``model_copy(update=...)`` does not validate: an int or a bool where a float is
    declared, a bool where an int is, a dict where a model is, a str subclass, a key
    the model does not have. pydantic converts some of these and not others."""
    other = st.one_of(st.integers(-3, 3), st.booleans(), floats, st.none(), texts.map(Text),
                      st.sampled_from([Evidence.OBSERVED, Shade.NUMBER]), plain_values)
    fields = data.draw(st.lists(st.sampled_from(
        ["duration_s", "steps", "exit_code", "settled", "partial", "status", "error",
         "stdout", "output", "state", "facets", "evidence", "usage", "workspace",
         "simulator", "events", "not_a_field"]), min_size=1, max_size=3, unique=True))
    update = {name: data.draw(other) for name in fields}
    if "evidence" in update and data.draw(st.booleans()):
        update["evidence"] = {"output": data.draw(other)}
    if "usage" in update and data.draw(st.booleans()):
        update["usage"] = Usage().model_copy(update={
            "cost_usd": data.draw(other), "input_tokens": data.draw(other)})
    if "events" in update and data.draw(st.booleans()):
        event = Event(kind="message").model_copy(update={
            "t": data.draw(other), "turn": data.draw(other), "is_error": data.draw(other)})
        update["events"] = [event]
    with warnings.catch_warnings():  # pydantic warns of what it did not expect
        warnings.simplefilter("ignore")
        same_bytes_or_same_error(trace.model_copy(update=update))


@settings(max_examples=300)
@given(usages)
def test_usage_is_written_as_pydantic_writes_it(usage: Usage) -> None:
    assert usage_json(usage) == usage.model_dump_json()


# --- each refusal reaches pydantic --------------------------------------------------------


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, 10**40],
                         ids=["2**64", "-2**63-1", "10**40"])
def test_an_integer_past_64_bits_reaches_pydantic(value: int) -> None:
    assert fast_json(value) is None
    assert fast_json([2**64 - 1, -2**63]) == b"[18446744073709551615,-9223372036854775808]"
    trace = Trace(output={"n": value}, events=[Event(kind="message", result=[value])])
    assert trace_json(trace) == pydantic_bytes(trace)
    assert str(value).encode() in trace_json(trace)


@pytest.mark.parametrize("key", [1, 2.5, True, None], ids=["int", "float", "bool", "None"])
def test_a_key_that_is_not_a_string_reaches_pydantic(key: Any) -> None:
    assert fast_json({key: 1}) is None
    trace = Trace(output={key: "value"}, state={"nested": {key: [1]}})
    assert trace_json(trace) == pydantic_bytes(trace)
    assert b'"output":{"' in trace_json(trace)  # written as text, as pydantic writes keys


def test_a_lone_surrogate_reaches_pydantic() -> None:
    assert fast_json("a\ud800b") is None
    # Where a trace is made storable, a lone surrogate is already U+FFFD: both write that.
    trace = Trace(output="a\ud800b")
    assert trace_json(trace) == pydantic_bytes(trace) and "\ufffd".encode() in trace_json(trace)
    # In a key of a typed map (the evidence map), pydantic writes each of its three
    # bytes as U+FFFD; orjson refuses it, so trace_json writes the same.
    keyed = Trace(evidence={"k\ud800": Evidence.OBSERVED})
    assert trace_json(keyed) == pydantic_bytes(keyed)
    assert '"k\ufffd\ufffd\ufffd":"observed"'.encode() in trace_json(keyed)
    # Where it is not (a call id), pydantic refuses the text, and so does trace_json.
    kept = Trace(events=[Event(kind="tool_call", call_id="c\udc00")])
    with pytest.raises(PydanticSerializationError, match="surrogates not allowed"):
        trace_json(kept)


def test_an_object_that_is_not_json_is_written_as_its_repr() -> None:
    assert fast_json(Opaque()) is None and fast_json({1, 2}) is None
    trace = Trace(output=[Opaque(), {1}, b"bytes"], events=[Event(kind="tool_call",
                                                                  arguments=Opaque())])
    assert trace_json(trace) == pydantic_bytes(trace)
    assert '"Opaque<\u2028é>"'.encode() in trace_json(trace)


def test_a_subclass_of_str_reaches_pydantic() -> None:
    assert fast_json(Text("x")) is None and fast_json({"k": Text("x")}) is None
    trace = Trace(output={"k": Text("value")}, facets={"harness": Text("python")})
    assert trace_json(trace) == pydantic_bytes(trace)


def test_nan_and_infinities_are_null_in_both() -> None:
    trace = Trace(output=[math.nan, math.inf, -math.inf], duration_s=math.inf,
                  usage=Usage(cost_usd=math.nan))
    assert compact._trace_data(trace) is not None
    assert trace_json(trace) == pydantic_bytes(trace)
    assert b'"output":[null,null,null]' in trace_json(trace)


def test_every_model_is_written_as_the_encoder_knows_it() -> None:
    """A field added to Trace, Event or Usage (or an alias, a serializer) turns the fast
    path off rather than writing other bytes: this fails until the encoder learns it."""
    assert compact._MODELS_KNOWN


EXCLUDED: list[tuple[str, Callable[[], Trace]]] = [
    ("turn", lambda: Trace(events=[Event(kind="user", text="hi", turn=1),
                                   Event(kind="reply", result="yo", turn=None)])),
    ("workspace", lambda: Trace(workspace=WorkspaceFacts(path="/tmp/gone"))),
    ("state", lambda: Trace(state={"items": []})),
    ("simulator", lambda: Trace(simulator=SimulatorUse(model="m", template="t",
                                                       instructions="i"))),
]


@pytest.mark.parametrize("field,make", EXCLUDED, ids=[name for name, _ in EXCLUDED])
def test_fields_left_out_when_none_are_written_when_set(field: str,
                                                        make: Callable[[], Trace]) -> None:
    trace = make()
    written = trace_json(trace)
    assert written == pydantic_bytes(trace)
    assert f'"{field}":'.encode() in written and b'"path"' not in written
    assert f'"{field}":'.encode() not in trace_json(Trace())
    assert orjson.loads(trace_json(Trace())) == orjson.loads(pydantic_bytes(Trace()))


def _with_event(**update: Any) -> Trace:
    return Trace(events=[Event(kind="message").model_copy(update=update)])


def _with_usage(**update: Any) -> Trace:
    return Trace().model_copy(update={"usage": Usage().model_copy(update=update)})


#: Values ``model_copy(update=...)`` leaves unconverted that pydantic converts when it
#: writes them, and what it writes: each must reach pydantic.
CONVERTED: list[tuple[str, Callable[[], Trace], bytes]] = [
    ("int duration", lambda: Trace().model_copy(update={"duration_s": 3}), b'"duration_s":3.0'),
    ("bool duration", lambda: Trace().model_copy(update={"duration_s": True}),
     b'"duration_s":1.0'),
    ("bool steps", lambda: Trace().model_copy(update={"steps": True}), b'"steps":1,'),
    ("bool exit code", lambda: Trace().model_copy(update={"exit_code": False}),
     b'"exit_code":0,'),
    ("int t", lambda: _with_event(t=2), b'"t":2.0'),
    ("bool turn", lambda: _with_event(turn=True), b'"turn":1}'),
    ("int cost", lambda: _with_usage(cost_usd=1), b'"cost_usd":1.0'),
    ("bool tokens in", lambda: _with_usage(input_tokens=True), b'"input_tokens":1,'),
    ("bool tokens out", lambda: _with_usage(output_tokens=False), b'"output_tokens":0,'),
    ("a key no field has", lambda: Trace().model_copy(update={"extra": 1}), b'"partial":false}'),
    ("an event that is a dict", lambda: Trace().model_copy(update={"events": [{"kind": 1}]}),
     b'"events":[{"kind":1}]'),
]


@pytest.mark.parametrize("make,written", [(make, written) for _, make, written in CONVERTED],
                         ids=[name for name, _, _ in CONVERTED])
def test_a_value_pydantic_converts_reaches_pydantic(make: Callable[[], Trace],
                                                    written: bytes) -> None:
    trace = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert trace_json(trace) == pydantic_bytes(trace)
        assert written in trace_json(trace)


def test_a_trace_made_any_way_pydantic_makes_one_is_written_alike() -> None:
    """The encoder reads each model's ``__dict__`` in its order: validated, constructed
    without validation, copied and unpickled, a trace keeps its fields in field order."""
    made = Trace(output={"b": 1, "a": [1.5, "é"]}, events=[Event(kind="message", text="x",
                                                               turn=2)],
                 usage=Usage(input_tokens=3, cost_usd=0.25), state={"z": 1}, duration_s=1e-6)
    constructed = Trace.model_construct(
        simulator=None, state={"z": 1}, output=made.output, duration_s=1e-6,
        usage=Usage.model_construct(cost_usd=0.25, input_tokens=3),
        events=[Event.model_construct(turn=2, text="x", kind="message")])
    expected = pydantic_bytes(made)
    for trace in (made, constructed, made.model_copy(), made.model_copy(deep=True),
                  pickle.loads(pickle.dumps(made))):
        assert compact._trace_data(trace) is not None
        assert trace_json(trace) == pydantic_bytes(trace) == expected

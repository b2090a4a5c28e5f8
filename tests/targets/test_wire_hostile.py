"""The wire readers on hostile input: reading never raises, and what it keeps stays storable.

Random bytes, random JSON, JSON built from the APIs' own keys with any
values in them, and real streams cut at any byte: ``read_exchange`` and
``read_exchanges`` must give facts (or say they could not) for every one,
the events must make a trace the store takes, and no note may grow with
the body or carry a key from a URL.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.model import Trace
from assay.targets.wire import Exchange, read_exchange, read_exchanges, sse_events
from assay.targets.wire.read import MAX_NOTE

from .wire_bodies import CHAT_URL, GEMINI_BASE, MESSAGES_URL, PLAYERS, RESPONSES_URL

URLS = [CHAT_URL, RESPONSES_URL, MESSAGES_URL, GEMINI_BASE + ":generateContent?key=AIza-SECRET",
        GEMINI_BASE + ":streamGenerateContent?alt=sse&key=AIza-SECRET",
        "https://api.example/other?token=AIza-SECRET"]

#: Keys the four APIs use, so that random JSON reaches deep into each reader.
KEYS = ["choices", "delta", "message", "tool_calls", "function", "function_call", "arguments",
        "index", "id", "name", "content", "refusal", "role", "type", "usage", "prompt_tokens",
        "completion_tokens", "model", "finish_reason", "messages", "tool_call_id", "error",
        "input", "output", "call_id", "item", "output_index", "response", "status",
        "input_tokens", "output_tokens", "incomplete_details", "reason", "text",
        "content_block", "partial_json", "tool_use_id", "is_error", "stop_reason",
        "cache_read_input_tokens", "contents", "parts", "functionCall", "functionResponse",
        "function_response", "args", "candidates", "finishReason", "usageMetadata",
        "promptTokenCount", "candidatesTokenCount", "modelVersion", "thought",
        "previous_response_id", "stream"]
TYPES = ["message", "function_call", "function_call_output", "tool_use", "tool_result", "text",
         "text_delta", "input_json_delta", "message_start", "content_block_start",
         "content_block_delta", "message_delta", "message_stop", "error", "response.completed",
         "response.output_item.added", "response.function_call_arguments.delta",
         "response.output_text.delta", "output_text", "custom_tool_call", "refusal"]

scalars = (st.none() | st.booleans() | st.integers(min_value=-2, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from(TYPES + KEYS) | st.text(max_size=12))
shaped_json = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=6),
    max_leaves=40)


def dump(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def check(facts_of: list[Exchange]) -> None:
    """Read them all: no exception, a storable trace, bounded notes, no key from a URL."""
    facts = read_exchanges(facts_of)
    trace = Trace(events=facts.events, usage=facts.usage, steps=facts.steps,
                  evidence=facts.evidence, facets={"model": facts.model} if facts.model else {})
    stored = trace.model_dump_json()
    assert Trace.model_validate_json(stored) == trace
    assert "AIza-SECRET" not in stored
    for event in facts.events:
        if event.kind == "http":
            assert len(event.text or "") <= MAX_NOTE
    assert facts.steps <= len(facts_of)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(url=st.sampled_from(URLS), request=st.binary(max_size=200),
       response=st.binary(max_size=400), status=st.none() | st.sampled_from([200, 204, 404, 500]),
       streamed=st.booleans(), complete=st.booleans(), cut=st.booleans())
def test_random_bytes_never_break_reading(url: str, request: bytes, response: bytes,
                                          status: int | None, streamed: bool, complete: bool,
                                          cut: bool) -> None:
    kind = "text/event-stream" if streamed else "application/json"
    ex = Exchange(method="POST", url=url, request_body=request, status=status,
                  response_headers=(("content-type", kind),), response_body=response,
                  complete=complete, response_truncated=cut, request_truncated=cut)
    read_exchange(ex)
    check([ex])


@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(url=st.sampled_from(URLS), request=shaped_json, responses=st.lists(shaped_json,
       min_size=1, max_size=4), streamed=st.booleans())
def test_json_in_the_apis_words_with_any_values_never_breaks_reading(
        url: str, request: Any, responses: list[Any], streamed: bool) -> None:
    if isinstance(request, dict):  # reach the readers: give the request its API's shape
        request.setdefault("messages", [request.get("input")])
        request.setdefault("contents", [request.get("content")])
        request.setdefault("input", request.get("messages"))
    if streamed:
        body = "".join(f"event: {r.get('type') if isinstance(r, dict) else 'x'}\n"
                       f"data: {json.dumps(r, allow_nan=True)}\n\n" for r in responses).encode()
    else:
        body = dump(responses[0])
    kind = "text/event-stream" if streamed else "application/json"
    ex = Exchange(method="POST", url=url, request_body=dump(request), status=200,
                  response_headers=(("content-type", kind),), response_body=body)
    check([ex, replace(ex, started=1.0)])


STREAMS = [(api, n) for api in PLAYERS for n in range(3)]


@cache
def played(api: str, streamed: bool) -> tuple[Exchange, ...]:
    """A conversation's exchanges, made once (the SDKs' serializers are not free)."""
    return tuple(PLAYERS[api](streamed=streamed).exchanges)


def mutated(data: st.DataObject, value: Any, depth: int = 0) -> Any:
    """``value`` with some of its parts replaced by any JSON, dropped, or left as they are."""
    action = data.draw(st.sampled_from(["keep", "inside", "inside", "inside", "replace"]
                                       if depth < 8 else ["keep", "replace"]))
    if action == "replace":
        return data.draw(shaped_json)
    if action == "keep" or not isinstance(value, dict | list):
        return value
    if isinstance(value, list):
        kept = [mutated(data, item, depth + 1) for item in value]
        return [item for item in kept if not data.draw(st.integers(0, 9)) == 0]
    return {key: mutated(data, item, depth + 1) for key, item in value.items()
            if data.draw(st.integers(0, 9)) != 0}


@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(STREAMS), streamed=st.booleans(), data=st.data())
def test_real_bodies_with_any_part_changed_never_break_reading(
        which: tuple[str, int], streamed: bool, data: st.DataObject) -> None:
    api, n = which
    exchanges = played(api, streamed)
    ex = exchanges[n]
    request = dump(mutated(data, json.loads(ex.request_body)))
    if streamed:
        response = "".join(f"event: {e.event}\ndata: "
                           f"{json.dumps(mutated(data, json.loads(e.data)), allow_nan=True)}\n\n"
                           if e.data != "[DONE]" else "data: [DONE]\n\n"
                           for e in sse_events(ex.response_body.decode())).encode()
    else:
        response = dump(mutated(data, json.loads(ex.response_body)))
    changed = replace(ex, request_body=request, response_body=response)
    check([*exchanges[:n], changed, *exchanges[n + 1:]])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(STREAMS), at=st.floats(min_value=0, max_value=1),
       noise=st.binary(max_size=8))
def test_a_real_stream_cut_anywhere_gives_what_arrived(which: tuple[str, int], at: float,
                                                       noise: bytes) -> None:
    api, n = which
    exchanges = played(api, True)
    whole = exchanges[n].response_body
    cut = whole[: int(len(whole) * at)] + noise
    exchanges = (*exchanges[:n], replace(exchanges[n], response_body=cut, complete=False),
                 *exchanges[n + 1:])
    call = read_exchange(exchanges[n])
    assert call is not None and call.answered
    facts = read_exchanges(exchanges)
    if not call.whole:
        # What was cut is never presented as all there was.
        assert facts.evidence["tool_calls"] == "unavailable"
        assert any(e.kind == "http" for e in facts.events)
    if call.input_tokens is None:
        assert facts.usage.tokens is None and facts.evidence["tokens"] == "unavailable"
    # Whatever arrived was read: calls the cut left whole keep their names.
    names = {c.name for c in call.tool_calls}
    assert names <= {"crm.lookup", "orders.get", "ask_user", "erp.refund", "erp.transfer", ""}
    check(list(exchanges))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300))
def test_the_sse_decoder_takes_any_text(text: str) -> None:
    for event in sse_events(text):
        assert isinstance(event.event, str) and isinstance(event.data, str)


def test_nesting_deeper_than_the_interpreter_goes_is_a_note() -> None:
    deep = b'{"choices": [{"message": {"content": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}]}"
    ex = Exchange(method="POST", url=CHAT_URL, request_body=b'{"messages": []}', status=200,
                  response_body=deep)
    call = read_exchange(ex)
    assert call is not None and not call.whole and call.problem is not None
    deep_args = json.dumps({"choices": [{"message": {"tool_calls": [{"id": "x", "function": {
        "name": "f", "arguments": "[" * 50_000}}]}}]}).encode()
    call = read_exchange(replace(ex, response_body=deep_args))
    assert call is not None and call.tool_calls[0].parsed is False
    check([ex, replace(ex, response_body=deep_args)])


def test_a_huge_count_or_a_bool_is_no_token_count() -> None:
    body = {"choices": [{"message": {"content": "hi"}}],
            "usage": {"prompt_tokens": True, "completion_tokens": 10**30}}
    ex = Exchange(method="POST", url=CHAT_URL, request_body=b'{"messages": []}', status=200,
                  response_body=json.dumps(body).encode())
    call = read_exchange(ex)
    assert call is not None and call.input_tokens is None
    assert read_exchanges([ex]).usage.tokens is None


def test_an_observers_odd_clock_and_method_do_not_break_reading() -> None:
    ex = Exchange(method="post", url=CHAT_URL, request_body=b'{"messages": []}', status=200,
                  response_body=b'{"choices": [{"message": {"content": "hi"}}]}',
                  started=float("nan"), duration_s=float("inf"))
    facts = read_exchanges([ex, replace(ex, method="\x00", url="\ud800://x")])
    assert facts.steps == 1 and facts.events[0].t == 0.0
    check([ex])

"""The wire readers: model exchanges of four APIs, streamed and not, read into a trace's facts.

Each API plays the same conversation (``wire_bodies``): two tools at once,
then an ask and a refund, then a text answer with a transfer the agent
never runs. The fold must give the same events, pairing, steps and tokens
for every API and both ways of answering, and assay's own structural checks
must grade a trace made of them as they grade any target's.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from assay.checks import LoadContext, lookup, verdict
from assay.checks.arguments import calls_of
from assay.model import Assertion, Evidence, Trace
from assay.targets.base import evidence
from assay.targets.prices import Price, PriceTable
from assay.targets.wire import (
    MAX_HTTP_EVENTS,
    NEVER_ANSWERED,
    Exchange,
    WireFacts,
    api_of,
    read_exchange,
    read_exchanges,
    safe_url,
    sse_events,
)
from assay.targets.wire.fold import NOT_JSON
from assay.targets.wire.read import MAX_NOTE

from .wire_bodies import (
    ANSWERS,
    CHAT_URL,
    GEMINI_BASE,
    JSON,
    MESSAGES_URL,
    PLAYERS,
    RESPONSES_URL,
    SCRIPT,
    SSE,
    Turn,
    chat,
    exchange,
    gemini,
    messages,
    responses,
    sse,
)

#: Prices for every model the conversations are served by (the shipped table knows only OpenAI's).
PRICES = PriceTable({"gpt-4o-mini": Price(0.15, 0.60), "gpt-4.1-mini": Price(0.40, 1.60),
                     "claude-sonnet-4-5": Price(3.0, 15.0), "gemini-2.5-flash": Price(0.30, 2.50)})

TOKENS_IN = sum(turn.usage[0] for turn in SCRIPT)
TOKENS_OUT = sum(turn.usage[1] for turn in SCRIPT)

#: The conversation as events: (kind, name, what the event carries).
EXPECTED = [
    ("tool_call", "crm.lookup", {"customer": "C-1"}),
    ("tool_call", "orders.get", {"order": "A-1"}),
    ("tool_result", "crm.lookup", {"tier": "gold"}),
    ("tool_result", "orders.get", {"total": 30}),
    ("ask", "ask_user", "Refund A-1 for 30 EUR?"),
    ("tool_call", "erp.refund", {"order": "A-1", "amount": 30}),
    ("answer", "ask_user", "yes"),
    ("tool_result", "erp.refund", {"ok": True}),
    ("message", None, "Refunded 30 EUR on A-1."),
    ("tool_call", "erp.transfer", {"to": "ACC-9", "amount": 30}),
    ("error", "erp.transfer", NEVER_ANSWERED),
]

WAYS = [(api, streamed) for api in PLAYERS for streamed in (False, True)]


def carried(event: Any, api: str) -> Any:
    if event.kind in ("tool_call",):
        return event.arguments
    if event.kind in ("tool_result", "answer"):
        # Gemini's results are objects by its API's rule; the agent wrapped each in "result".
        return event.result["result"] if api == "gemini" else event.result
    return event.text


def trace_of(facts: WireFacts, output: Any = "done") -> Trace:
    """A trace as a target would make it of the wire's facts."""
    return Trace(output=output, events=facts.events, usage=facts.usage, steps=facts.steps,
                 facets={"model": facts.model} if facts.model else {},
                 evidence={**evidence(output="observed"), **facts.evidence})


def judged(name: str, arg: Any, trace: Trace, tmp_path: Path, *,
           minimum: str | None = None) -> str:
    check = lookup(name)
    assert check is not None
    prepared = check.prepare(arg, LoadContext(base_dir=tmp_path))
    assertion = Assertion(check=name, arg=prepared,
                          min_evidence=Evidence(minimum) if minimum else None)
    return str(verdict(assertion, trace).outcome)


# --- the conversation, every API, both ways ----------------------------------------------


@pytest.mark.parametrize(("api", "streamed"), WAYS)
def test_each_api_gives_the_conversations_events_in_order(api: str, streamed: bool) -> None:
    played = PLAYERS[api](streamed=streamed)
    facts = read_exchanges(played.exchanges, prices=PRICES)
    assert [(e.kind, e.name, carried(e, api)) for e in facts.events] == EXPECTED
    assert facts.steps == 3 and len(facts.model_calls) == 3
    assert facts.model == played.served
    assert (facts.usage.input_tokens, facts.usage.output_tokens) == (TOKENS_IN, TOKENS_OUT)
    assert facts.usage.cost_usd is not None and facts.usage.cost_usd > 0
    assert facts.evidence == {"tool_calls": "observed", "asks": "observed", "steps": "observed",
                              "tokens": "observed", "cost": "inferred"}
    assert facts.text == "Refunded 30 EUR on A-1."
    assert all(call.streamed is streamed for call in facts.model_calls)
    # The events' times: a result at its request, a call at the end of its answer.
    assert [e.t for e in facts.events[:4]] == [0.5, 0.5, 1.0, 1.0]


@pytest.mark.parametrize(("api", "streamed"), WAYS)
def test_grading_pairs_each_call_with_the_result_the_agent_sent_back(api: str,
                                                                     streamed: bool) -> None:
    facts = read_exchanges(PLAYERS[api](streamed=streamed).exchanges)
    calls = calls_of(facts.events)
    assert [c.event.name for c in calls] == ["crm.lookup", "orders.get", "erp.refund",
                                             "erp.transfer"]
    answers = [None if c.answer is None else carried(c.answer, api) for c in calls]
    assert answers == [{"tier": "gold"}, {"total": 30}, {"ok": True}, None]
    assert [c.denied for c in calls] == [False, False, False, True]
    assert calls[3].denial == NEVER_ANSWERED
    # Ids: the API's own; Gemini gives none, so the fold's own pair call and result.
    ids = [c.event.call_id for c in calls]
    assert ids == (["wire-1", "wire-2", "wire-4", "wire-5"] if api == "gemini"
                   else ["call_1", "call_2", "call_4", "call_5"])
    assert [c.answer.call_id for c in calls[:3] if c.answer is not None] == ids[:3]


@pytest.mark.parametrize(("api", "streamed"), WAYS)
def test_structural_checks_read_the_wire_as_any_target(api: str, streamed: bool,
                                                       tmp_path: Path) -> None:
    trace = trace_of(read_exchanges(PLAYERS[api](streamed=streamed).exchanges, prices=PRICES))
    total = TOKENS_IN + TOKENS_OUT
    expected = [
        ("calls", {"tool": "erp.refund", "args": {"order": "A-1"}}, "pass"),
        ("calls", {"tool": "crm.*", "times": 1}, "pass"),
        ("calls", {"tool": "erp.transfer", "denied": True}, "pass"),
        ("calls", {"tool": "erp.refund", "denied": True}, "fail"),
        ("never_calls", {"tool": "erp.transfer", "denied": False}, "pass"),
        ("never_calls", "erp.transfer", "fail"),
        ("never_calls", {"tool": "erp.refund", "denied": False}, "fail"),
        ("calls_before", ["crm.lookup", "erp.refund"], "pass"),
        ("calls_before", ["erp.refund", "orders.get"], "fail"),
        ("asks", {"before": "erp.refund"}, "pass"),
        ("asks", {"before": "crm.lookup"}, "fail"),
        ("within_steps", 3, "pass"),
        ("within_steps", 2, "fail"),
        ("costs_at_most", {"tokens": total}, "pass"),
        ("costs_at_most", {"tokens": total - 1}, "fail"),
        # Cost is the price table's: inferred, so a budget in money needs min_evidence.
        ("costs_at_most", {"usd": 1.0}, "inconclusive"),
    ]
    got = [(name, arg, judged(name, arg, trace, tmp_path)) for name, arg, _ in expected]
    assert got == expected
    assert judged("costs_at_most", {"usd": 1.0}, trace, tmp_path, minimum="inferred") == "pass"
    assert judged("costs_at_most", {"usd": 1e-9}, trace, tmp_path, minimum="inferred") == "fail"


def test_a_trace_of_wire_facts_is_stored_and_read_back_the_same() -> None:
    facts = read_exchanges(gemini(streamed=True).exchanges)
    trace = trace_of(facts)
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace and again.events[-1].kind == "error"


# --- what each API leaves out, or says its own way ---------------------------------------


def test_a_chat_stream_without_usage_leaves_tokens_and_cost_unavailable(tmp_path: Path) -> None:
    facts = read_exchanges(chat(streamed=True, usage=False).exchanges)
    assert facts.usage.input_tokens is None and facts.usage.output_tokens is None
    assert facts.usage.cost_usd is None
    assert (facts.evidence["tokens"], facts.evidence["cost"]) == ("unavailable", "unavailable")
    # Never a partial sum: the calls that did report are not presented as the whole.
    played = chat(streamed=True)
    played.exchanges[1] = chat(streamed=True, usage=False).exchanges[1]
    partial = read_exchanges(played.exchanges)
    assert partial.usage.tokens is None and partial.evidence["tokens"] == "unavailable"
    # What the calls did is still observed; a token budget cannot pass on it.
    trace = trace_of(facts)
    assert facts.evidence["tool_calls"] == "observed" and facts.steps == 3
    assert judged("costs_at_most", {"tokens": 10_000}, trace, tmp_path) == "inconclusive"
    assert judged("within_steps", 3, trace, tmp_path) == "pass"


def test_a_model_missing_from_the_price_table_has_tokens_but_no_cost() -> None:
    facts = read_exchanges(messages().exchanges)  # the shipped table knows no Claude
    assert facts.usage.tokens == TOKENS_IN + TOKENS_OUT and facts.usage.cost_usd is None
    assert (facts.evidence["tokens"], facts.evidence["cost"]) == ("observed", "unavailable")
    priced = read_exchanges(chat().exchanges)  # gpt-4o-mini's dated snapshot is known
    assert priced.usage.cost_usd == pytest.approx((TOKENS_IN * 0.15 + TOKENS_OUT * 0.60) / 1e6)


def test_responses_kept_on_the_server_send_only_new_results_and_read_the_same() -> None:
    for streamed in (False, True):
        played = responses(streamed=streamed, stored=True)
        first = json.loads(played.exchanges[1].request_body)
        assert first["previous_response_id"] == "resp_0"
        assert {item["type"] for item in first["input"]} == {"function_call_output"}
        facts = read_exchanges(played.exchanges)
        assert [(e.kind, e.name, carried(e, "responses")) for e in facts.events] == EXPECTED


def test_an_anthropic_error_result_is_a_denial_and_not_a_call_left_unanswered(
        tmp_path: Path) -> None:
    for streamed in (False, True):
        facts = read_exchanges(messages(streamed=streamed, refused=True).exchanges)
        refusal = [e for e in facts.events if e.call_id == "call_5"]
        assert [(e.kind, e.is_error) for e in refusal] == [("tool_call", False),
                                                           ("tool_result", True)]
        assert refusal[1].result == "transfers are not allowed"
        assert facts.steps == 4 and not any(e.kind == "error" for e in facts.events)
        transfer = calls_of(facts.events)[-1]
        assert transfer.denied and transfer.denial == "transfers are not allowed"
        trace = trace_of(facts)
        assert judged("calls", {"tool": "erp.transfer", "denied": True}, trace, tmp_path) == \
            "pass"


def test_anthropic_input_tokens_count_what_the_cache_served() -> None:
    first = messages().exchanges[0]
    assert json.loads(first.response_body)["usage"]["cache_read_input_tokens"] == 40
    call = read_exchange(first)
    assert call is not None
    assert (call.input_tokens, call.output_tokens) == SCRIPT[0].usage


def test_a_streamed_anthropic_call_is_counted_only_once_its_final_usage_came() -> None:
    played = messages(streamed=True)
    body = played.exchanges[0].response_body
    cut = body[: body.index(b"event: message_delta")]
    call = read_exchange(_replace(played.exchanges[0], response_body=cut, complete=False))
    assert call is not None and call.answered and not call.whole
    # message_start's output count is a placeholder: no count at all rather than a wrong one.
    assert (call.input_tokens, call.output_tokens) == (None, None)
    assert [c.name for c in call.tool_calls] == ["crm.lookup", "orders.get"]


def test_gemini_results_without_ids_answer_calls_of_their_tool_in_order() -> None:
    url = GEMINI_BASE + ":generateContent"
    asked = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}},
        {"functionCall": {"name": "weather", "args": {"city": "Rome"}}},
        {"functionCall": {"name": "clock", "args": {}}}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "hi"}]}]
    first = exchange(url, {"contents": contents}, json.dumps(asked).encode(),
                     streamed=False, at=0)
    contents = [*contents, asked["candidates"][0]["content"], {"role": "user", "parts": [
        {"functionResponse": {"name": "weather", "response": {"output": "cold"}}},
        {"functionResponse": {"name": "weather", "response": {"output": "warm"}}},
        {"function_response": {"name": "clock", "response": {"error": "no clock"}}}]}]
    done = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Cold and warm."}]},
                            "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 30}}  # proto3 JSON leaves a 0 count out
    second = exchange(url, {"contents": contents}, json.dumps(done).encode(),
                      streamed=False, at=1)
    facts = read_exchanges([first, second])
    calls = calls_of(facts.events)
    assert [(c.event.arguments, c.answer and c.answer.result) for c in calls] == [
        ({"city": "Oslo"}, {"output": "cold"}), ({"city": "Rome"}, {"output": "warm"}),
        ({}, {"error": "no clock"})]
    assert [c.denied for c in calls] == [False, False, True]  # the API's "error" key
    assert (facts.usage.input_tokens, facts.usage.output_tokens) == (40, 5)
    assert facts.model == "gemini-2.5-flash"  # from the path: the answers named none


def test_a_gemini_stream_sent_as_one_json_array_is_read_too() -> None:
    played = gemini(streamed=True)
    chunks = [json.loads(e.data) for e in sse_events(played.exchanges[2].response_body.decode())]
    arrayed = _replace(played.exchanges[2],
                       url=GEMINI_BASE + ":streamGenerateContent",
                       response_headers=JSON, response_body=json.dumps(chunks).encode())
    call = read_exchange(arrayed)
    assert call is not None and call.whole
    assert call.text == "Refunded 30 EUR on A-1."
    assert [c.name for c in call.tool_calls] == ["erp.transfer"]
    assert (call.input_tokens, call.output_tokens) == SCRIPT[2].usage


def test_ids_a_model_reuses_across_turns_still_pair_each_result_with_its_own_call() -> None:
    script = (Turn(None, (("call_0", "lookup", {"q": "a"}),), (10, 1)),
              Turn(None, (("call_0", "lookup", {"q": "b"}),), (20, 1)),
              Turn("done", (), (30, 1)))
    answers = {"call_0": {"hit": True}}
    original = dict(ANSWERS)
    ANSWERS.update(answers)
    try:
        facts = read_exchanges(chat(script=script).exchanges)
    finally:
        ANSWERS.clear()
        ANSWERS.update(original)
    kinds = [(e.kind, e.call_id) for e in facts.events]
    assert kinds == [("tool_call", "call_0"), ("tool_result", "call_0"),
                     ("tool_call", "call_0"), ("tool_result", "call_0"), ("message", None)]
    assert all(c.answer is not None and not c.denied for c in calls_of(facts.events))


def test_arguments_that_are_not_json_are_kept_as_sent_and_marked(tmp_path: Path) -> None:
    completion = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                  "choices": [{"index": 0, "finish_reason": "length", "message": {
                      "role": "assistant", "content": None, "tool_calls": [
                          {"id": "t1", "type": "function",
                           "function": {"name": "erp.refund", "arguments": '{"order": "A-'}},
                          {"id": "t2", "type": "function",
                           "function": {"name": "erp.note", "arguments": ""}}]}}],
                  "usage": {"prompt_tokens": 5, "completion_tokens": 5}}
    ex = exchange(CHAT_URL, {"model": "m", "messages": []}, json.dumps(completion).encode(),
                  streamed=False, at=0)
    facts = read_exchanges([ex])
    refund, note = [e for e in facts.events if e.kind == "tool_call"]
    assert (refund.arguments, refund.text) == ('{"order": "A-', NOT_JSON)
    assert (note.arguments, note.text) == ({}, None)  # empty arguments are no arguments
    trace = trace_of(facts)
    # A pattern on arguments cannot read text: the refund is not taken for {order: A-1}...
    assert judged("calls", {"tool": "erp.refund", "args": {"order": "A-1"}}, trace,
                  tmp_path) == "fail"
    # ...but the call was asked for, and a rule against the tool sees it.
    assert judged("never_calls", "erp.refund", trace, tmp_path) == "fail"


def test_several_served_models_are_named_in_the_order_they_answered() -> None:
    played = chat()
    body = json.loads(played.exchanges[1].response_body)
    body["model"] = "gpt-4.1-mini-2025-04-14"
    played.exchanges[1] = _replace(played.exchanges[1], response_body=json.dumps(body).encode())
    body = json.loads(played.exchanges[2].response_body)
    del body["model"]  # an answer that does not say: the model asked for stands
    played.exchanges[2] = _replace(played.exchanges[2], response_body=json.dumps(body).encode())
    facts = read_exchanges(played.exchanges)
    assert facts.model == "gpt-4o-mini-2024-07-18, gpt-4.1-mini-2025-04-14, gpt-4o-mini"


def test_exchanges_are_read_in_the_order_they_began() -> None:
    played = chat()
    facts = read_exchanges(list(reversed(played.exchanges)))
    assert [(e.kind, e.name, carried(e, "chat")) for e in facts.events] == EXPECTED


def test_ask_tools_are_the_targets_to_name() -> None:
    facts = read_exchanges(chat().exchanges, ask_tools=("crm.lookup",))
    kinds = [(e.kind, e.name) for e in facts.events][:4]
    assert kinds == [("ask", "crm.lookup"), ("tool_call", "orders.get"),
                     ("answer", "crm.lookup"), ("tool_result", "orders.get")]
    # An ask's question: the one text argument when there is no "question".
    assert facts.events[0].text == "C-1"
    assert [e.kind for e in facts.events].count("ask") == 1  # ask_user is a tool call now


def test_a_gzip_answer_is_inflated() -> None:
    played = chat()
    zipped = _replace(played.exchanges[0], response_body=gzip.compress(
        played.exchanges[0].response_body),
        response_headers=(*JSON, ("content-encoding", "gzip")))
    call = read_exchange(zipped)
    assert call is not None and call.whole and len(call.tool_calls) == 2


# --- each API's other dialects ----------------------------------------------------------


def _chat_exchange(request: dict[str, Any], response: Any, *, at: float = 0,
                   streamed: bool = False) -> Exchange:
    body = sse([(None, r) for r in response]) if streamed else json.dumps(response).encode()
    return exchange(CHAT_URL, request, body, streamed=streamed, at=at)


def test_chats_deprecated_function_calls_pair_by_name_in_order() -> None:
    asked = {"model": "m", "choices": [{"index": 0, "finish_reason": "function_call", "message": {
        "role": "assistant", "content": None,
        "function_call": {"name": "lookup", "arguments": '{"q": "x"}'}}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    messages_ = [{"role": "user", "content": "hi"},
                 {"role": "assistant", "function_call": asked["choices"][0]["message"][
                     "function_call"]},
                 {"role": "function", "name": "lookup",
                  "content": [{"type": "text", "text": '{"hit": '}, {"type": "text",
                                                                      "text": "1}"}]}]
    answer = {"model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "found it"}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    facts = read_exchanges([_chat_exchange({"model": "m", "messages": messages_[:1]}, asked),
                            _chat_exchange({"model": "m", "messages": messages_}, answer, at=1)])
    assert [(e.kind, e.call_id, e.arguments if e.kind == "tool_call" else e.result or e.text)
            for e in facts.events] == [("tool_call", "wire-1", {"q": "x"}),
                                       ("tool_result", "wire-1", {"hit": 1}),
                                       ("message", None, "found it")]


def test_a_chat_stream_that_reports_an_error_is_not_read_as_whole() -> None:
    chunks = [{"model": "m", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
              {"error": {"message": "model overloaded"}}]
    call = read_exchange(_chat_exchange({"model": "m", "messages": [], "stream": True}, chunks,
                                        streamed=True))
    assert call is not None and not call.whole and call.text == "Hel"
    assert call.problem == "the stream reported an error: model overloaded"


def test_a_chat_stream_of_a_server_without_tool_call_indexes_is_read_call_by_call() -> None:
    chunks = [{"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
                  {"id": "a", "function": {"name": "one", "arguments": {"k": 1}}}]}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
                  {"id": "b", "function": {"name": "two", "arguments": "{}"}}]}}]},
              {"model": "m", "choices": [{"index": 1, "delta": {"content": "other choice"}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    call = read_exchange(_chat_exchange({"model": "m", "messages": [], "stream": True}, chunks,
                                        streamed=True))
    assert call is not None and call.whole and call.text is None
    assert [(c.call_id, c.name, c.arguments) for c in call.tool_calls] == [
        ("a", "one", {"k": 1}), ("b", "two", {})]


def _responses_exchange(response: Any, *, streamed: bool = False) -> Exchange:
    body = sse([(r["type"], r) for r in response]) if streamed else json.dumps(response).encode()
    return exchange(RESPONSES_URL, {"model": "m", "input": "hi"}, body, streamed=streamed, at=0)


def test_responses_free_form_tools_failures_and_background_runs() -> None:
    custom = {"object": "response", "model": "m", "status": "completed", "output": [
        {"type": "reasoning", "id": "rs", "summary": []},
        {"type": "custom_tool_call", "call_id": "c", "name": "shell", "input": "ls -la"},
        {"type": "web_search_call", "id": "ws", "status": "completed"}],
        "usage": {"input_tokens": 4, "output_tokens": 2}}
    call = read_exchange(_responses_exchange(custom))
    assert call is not None and call.whole
    assert [(c.call_id, c.name, c.arguments, c.parsed) for c in call.tool_calls] == [
        ("c", "shell", "ls -la", True)]  # the server's own tools are not the agent's calls
    failed = {**custom, "status": "failed", "error": {"code": "server_error",
                                                      "message": "boom"}}
    call = read_exchange(_responses_exchange(failed))
    assert call is not None and not call.whole
    assert call.problem == "the model reported an error: boom"
    queued = {**custom, "status": "queued", "output": []}
    call = read_exchange(_responses_exchange(queued))
    assert call is not None and not call.whole and "queued" in (call.problem or "")


def test_a_responses_stream_cut_before_its_end_keeps_the_text_and_calls_that_arrived() -> None:
    events = [
        {"type": "response.created", "response": {"model": "gpt-x", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "id": "m", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Half an "},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "answer"},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "custom_tool_call", "call_id": "c", "name": "shell", "input": ""}},
        {"type": "response.custom_tool_call_input.delta", "output_index": 1, "delta": "rm -"},
        {"type": "error", "code": "server_error", "message": "stream died"},
    ]
    call = read_exchange(_responses_exchange(events, streamed=True))
    assert call is not None and not call.whole
    assert (call.served_model, call.text) == ("gpt-x", "Half an answer")
    assert [(c.name, c.arguments) for c in call.tool_calls] == [("shell", "rm -")]
    assert call.problem == "the model reported an error: stream died"


def test_an_anthropic_stream_overloaded_mid_way_is_a_note() -> None:
    played = messages(streamed=True)
    body = played.exchanges[0].response_body
    cut = body[: body.index(b"event: message_delta")] + sse([("error", {
        "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})])
    facts = read_exchanges([_replace(played.exchanges[0], response_body=cut)])
    note = next(e for e in facts.events if e.kind == "http")
    assert (note.text or "").endswith("→ 200: the model reported an error: Overloaded")
    assert facts.evidence["tool_calls"] == "unavailable"


def test_a_gemini_stream_that_reports_an_error_is_a_note() -> None:
    played = gemini(streamed=True)
    body = played.exchanges[0].response_body.split(b"\r\n\r\n")[0] + b"\r\n\r\n" + sse(
        [(None, {"error": {"code": 503, "message": "The model is overloaded."}})])
    call = read_exchange(_replace(played.exchanges[0], response_body=body))
    assert call is not None and not call.whole
    assert call.problem == "the model reported an error: The model is overloaded."


# --- the SSE decoder ---------------------------------------------------------------------


def test_sse_lines_comments_and_an_unended_last_event() -> None:
    text = ("\ufeff: keep-alive\r\nevent: a\r\ndata: {\"x\":\r\ndata:1}\r\n\r\n"
            "data:no space\rid: 7\rretry: 10\r\r"
            "event: only-a-name\n\n"
            "data: last, unended")
    events = sse_events(text)
    assert [(e.event, e.data) for e in events] == [
        ("a", '{"x":\n1}'), ("message", "no space"), ("only-a-name", ""),
        ("message", "last, unended")]
    assert sse_events("") == [] and sse_events(": only a comment\n\n") == []


def test_a_json_string_holding_a_line_separator_stays_one_line() -> None:
    data = json.dumps({"text": "a\u2028b\x85c"}, ensure_ascii=False)
    assert sse_events(f"data: {data}\n\n")[0].data == data


# --- recognising a model API -------------------------------------------------------------


@pytest.mark.parametrize(("method", "url", "api"), [
    ("POST", "https://api.openai.com/v1/chat/completions", "openai.chat"),
    ("POST", "http://127.0.0.1:8000/trial/7/openai/v1/chat/completions/", "openai.chat"),
    ("POST", "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=1",
     "openai.chat"),
    ("POST", "https://api.openai.com/v1/responses", "openai.responses"),
    ("POST", "https://api.anthropic.com/v1/messages", "anthropic.messages"),
    ("POST", "https://api.anthropic.com/v1/messages/count_tokens", None),
    ("POST", "https://api.openai.com/v1/threads/t/messages", None),
    ("GET", "https://api.openai.com/v1/responses", None),
    ("GET", "https://api.openai.com/v1/models", None),
    ("POST", GEMINI_BASE + ":generateContent?key=K", "gemini"),
    ("POST", "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/"
             "publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini"),
    ("POST", "http://[::1", None),
])
def test_the_api_is_told_by_method_and_path_never_by_host(method: str, url: str,
                                                          api: str | None) -> None:
    assert api_of(method, url)[0] == api


def test_a_json_post_of_another_kind_on_a_model_path_is_no_model_call() -> None:
    survey = Exchange(method="POST", url="https://forms.example/api/survey/responses",
                      request_body=b'{"answers": [1, 2]}', status=201,
                      response_body=b'{"id": 9}')
    assert read_exchange(survey) is None
    unread = Exchange(method="POST", url="https://forms.example/api/survey/responses",
                      request_body=b"\x00binary", status=200, response_body=b"ok")
    assert read_exchange(unread) is None
    facts = read_exchanges([survey, *chat().exchanges])
    assert facts.events[0].kind == "http" and facts.events[0].name is None
    assert "not a model API" in (facts.events[0].text or "")
    assert facts.evidence["tool_calls"] == "observed" and facts.steps == 3


# --- bad input ---------------------------------------------------------------------------


def test_a_stream_cut_mid_call_gives_what_arrived_and_makes_calls_unavailable(
        tmp_path: Path) -> None:
    played = chat(streamed=True)
    body = played.exchanges[1].response_body
    # After the event with erp.refund's third piece of arguments: '{"order": "A-1", "amo'.
    cut_at = body.index(b"\n\n", body.index(b"amo", body.index(b"erp.refund"))) + 2
    played.exchanges[1] = _replace(played.exchanges[1], response_body=body[:cut_at],
                                   complete=False, error="RemoteProtocolError: peer closed")
    facts = read_exchanges(played.exchanges[:2])
    http = [e for e in facts.events if e.kind == "http"]
    assert len(http) == 1 and "stopped before its end (RemoteProtocolError" in (http[0].text
                                                                               or "")
    assert http[0].result == {"method": "POST", "url": CHAT_URL, "status": 200}
    refund = next(e for e in facts.events if e.name == "erp.refund")
    assert refund.text == NOT_JSON and isinstance(refund.arguments, str)
    assert facts.steps == 2
    assert facts.evidence["tool_calls"] == "unavailable" == facts.evidence["asks"]
    assert facts.evidence["tokens"] == "unavailable" and facts.usage.tokens is None
    trace = trace_of(facts)
    # Not seeing the rest, assay cannot say the agent never made a call...
    assert judged("never_calls", "erp.transfer", trace, tmp_path) == "inconclusive"
    # ...and cannot pass one it did see either, however plain.
    assert judged("calls", "crm.lookup", trace, tmp_path) == "inconclusive"


def test_a_stream_that_ended_after_its_last_event_is_whole_whatever_the_socket_said() -> None:
    played = messages(streamed=True)
    closed = _replace(played.exchanges[0], complete=False, error="ReadError")
    call = read_exchange(closed)
    assert call is not None and call.whole and call.problem is None


def test_a_response_cut_at_max_body_is_a_note_not_a_guess() -> None:
    played = responses()
    big = played.exchanges[0].response_body[:200]
    played.exchanges[0] = _replace(played.exchanges[0], response_body=big,
                                   response_truncated=True)
    facts = read_exchanges(played.exchanges)
    note = next(e for e in facts.events if e.kind == "http")
    assert "the response was cut at 200 bytes" in (note.text or "")
    assert not note.is_error  # the model answered; assay could not read all of it
    assert facts.evidence["tool_calls"] == "unavailable" and facts.usage.tokens is None
    assert facts.steps == 3  # it was a model call all the same
    # Its calls are unknown, so the results the next request carries have no call to
    # answer, and nothing is said to be unanswered for them.
    assert [e.kind for e in facts.events[:3]] == ["http", "tool_result", "tool_result"]


def test_an_unreadable_request_leaves_earlier_calls_unjudged() -> None:
    played = messages()
    played.exchanges[2] = _replace(played.exchanges[2],
                                   request_body=played.exchanges[2].request_body[:100],
                                   request_truncated=True)
    facts = read_exchanges(played.exchanges)
    note = next(e for e in facts.events if e.kind == "http")
    assert "the request was cut at 100 bytes" in (note.text or "")
    # call_3 and call_4 may have been answered by the request assay could not read.
    errors = [e.call_id for e in facts.events if e.kind == "error"]
    assert errors == ["call_5"]
    assert facts.evidence["tool_calls"] == "unavailable"
    assert facts.evidence["tokens"] == "observed"  # its answer was read: it was counted


@pytest.mark.parametrize("body", [
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
    "{\"model\": \"caf\u00e9\"}".encode("latin-1"),
    b"",
    b"<html><body>Bad gateway</body></html>",
    b"[1, 2, 3]",
    b"[" * 100_000,
])
def test_an_answer_that_is_not_json_is_kept_as_a_note(body: bytes) -> None:
    played = chat()
    played.exchanges[0] = _replace(played.exchanges[0], response_body=body)
    facts = read_exchanges(played.exchanges)
    note = facts.events[0]
    assert note.kind == "http" and note.name == "openai.chat"
    assert len(note.text or "") <= MAX_NOTE and "PNG" not in (note.text or "")
    assert facts.evidence["tool_calls"] == "unavailable" and facts.usage.tokens is None
    assert facts.steps == 3


def test_an_error_status_is_a_bounded_note_no_step_and_the_trial_goes_on() -> None:
    played = chat()
    secret_message = "Rate limit reached. " + "x" * 100_000
    limited = _replace(played.exchanges[0], status=429, started=-1.0,
                       response_body=json.dumps({"error": {"message": secret_message}}).encode())
    facts = read_exchanges([limited, *played.exchanges])
    note = facts.events[0]
    assert note.kind == "http" and note.is_error and note.result["status"] == 429
    assert (note.text or "").startswith(
        f"POST {CHAT_URL} → 429: the model answered 429 Too Many Requests: Rate limit reached.")
    assert len(note.text or "") <= MAX_NOTE
    # An error answer gave nothing: no step, no tokens, nothing unavailable because of it.
    assert facts.steps == 3 and facts.usage.tokens == TOKENS_IN + TOKENS_OUT
    assert facts.evidence["tool_calls"] == "observed"


def test_no_answer_at_all_is_a_note_with_the_reason() -> None:
    down = Exchange(method="POST", url=MESSAGES_URL, request_body=b'{"messages": []}',
                    error="ConnectError: [Errno 111] Connection refused")
    facts = read_exchanges([down])
    assert facts.steps == 0 and len(facts.model_calls) == 1
    assert facts.events[0].text == (f"POST {MESSAGES_URL} → no answer: no answer: ConnectError: "
                                    "[Errno 111] Connection refused")


def test_a_gemini_error_note_keeps_no_key() -> None:
    played = gemini()
    failed = _replace(played.exchanges[0], status=400, response_body=json.dumps(
        [{"error": {"code": 400, "message": "API key not valid.", "status":
                    "INVALID_ARGUMENT"}}]).encode())
    facts = read_exchanges([failed])
    text = facts.events[0].text or ""
    assert "API key not valid." in text and "AIza" not in text and "key=" not in text
    assert "AIza" not in json.dumps(facts.events[0].result)


def test_other_services_exchanges_are_notes_and_their_secrets_stay_out() -> None:
    other = Exchange(method="GET", url="https://user:pw@api.example/v1/data?q=1&access_token=T"
                                       "&X-Amz-Signature=S&sig=s#frag", status=200)
    facts = read_exchanges([other])
    assert facts.events[0].text == "GET https://api.example/v1/data?q=1 → 200 (not a model " \
                                   "API's exchange)"
    assert facts.steps == 0 and facts.model is None and facts.usage.tokens == 0


def test_http_notes_are_bounded_in_number() -> None:
    many = [Exchange(method="GET", url=f"https://api.example/{n}", status=200, started=n)
            for n in range(MAX_HTTP_EVENTS + 7)]
    facts = read_exchanges(many)
    assert len(facts.events) == MAX_HTTP_EVENTS + 1
    assert facts.events[-1].text == "7 more exchanges are not shown"


@pytest.mark.parametrize(("url", "kept"), [
    (GEMINI_BASE + ":streamGenerateContent?alt=sse&key=AIza",
     GEMINI_BASE + ":streamGenerateContent?alt=sse"),
    ("https://h/p?api_key=1&apiKey=2&access_token=3&token=4&client_secret=5&Authorization=6",
     "https://h/p"),
    ("https://h:8443/p?api-version=2024-10-21", "https://h:8443/p?api-version=2024-10-21"),
    ("http://[::1]:9/p?password=x", "http://[::1]:9/p"),
    ("http://h:99999/p", "(a URL assay could not read)"),
])
def test_urls_keep_no_credentials(url: str, kept: str) -> None:
    assert safe_url(url) == kept


def test_another_services_url_keeps_no_token_in_its_path_either() -> None:
    bot = "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage"
    assert safe_url(bot, opaque_path=True) == "https://api.telegram.org/…/sendMessage"
    assert safe_url("https://api.example/v1/items/42", opaque_path=True) == \
        "https://api.example/v1/items/42"
    facts = read_exchanges([Exchange(method="POST", url=bot, status=401)])
    assert "AAHdq" not in (facts.events[0].text or "") and facts.events[0].is_error
    # A model API's path is kept whole: it names the model.
    assert safe_url(GEMINI_BASE + ":generateContent") == GEMINI_BASE + ":generateContent"


# --- surfaces that show events -----------------------------------------------------------


def test_the_review_screen_shows_an_http_event_as_one_line() -> None:
    from assay.review.detail import Whole, detail
    from assay.review.queue import Shown
    from assay.store.reviews.items import ItemEvidence

    played = chat()
    failed = _replace(played.exchanges[0], status=500, response_body=b'{"error": '
                      b'{"message": "upstream\\nexploded [bold]"}}')
    trace = trace_of(read_exchanges([failed]))
    shown = Shown(item=1, source="run", run_id="r", case="c", trial=1, hidden=False,
                  outcome="fail", reason=None, added_at="2026-01-01", verdict=None, note=None,
                  reviewer=None, decided_at=None)
    text = detail(Whole(shown, ItemEvidence(trace.model_dump_json().encode(), []))).plain
    line = next(line for line in text.splitlines() if line.startswith("⇄ http"))
    assert "500: the model answered 500 Internal Server Error: upstream exploded [bold]" in line


# --- the shapes are the SDKs' ------------------------------------------------------------


def test_the_anthropic_bodies_are_what_the_anthropic_sdk_reads() -> None:
    anthropic = pytest.importorskip("anthropic")
    from pydantic import TypeAdapter

    stream: TypeAdapter[Any] = TypeAdapter(anthropic.types.RawMessageStreamEvent)
    params: TypeAdapter[Any] = TypeAdapter(anthropic.types.MessageCreateParams)
    for streamed in (False, True):
        for ex in messages(streamed=streamed, refused=True).exchanges:
            params.validate_python(json.loads(ex.request_body))
            if streamed:
                for event in sse_events(ex.response_body.decode()):
                    if event.event != "ping":
                        stream.validate_json(event.data)
            else:
                anthropic.types.Message.model_validate_json(ex.response_body)


def test_the_gemini_bodies_are_what_google_genai_reads() -> None:
    pytest.importorskip("google.genai")
    from google.genai import types

    for streamed in (False, True):
        for ex in gemini(streamed=streamed).exchanges:
            request = json.loads(ex.request_body)
            for content in request["contents"]:
                types.Content.model_validate(content)  # the SDK forbids unknown keys
            chunks = [e.data for e in sse_events(ex.response_body.decode())] if streamed \
                else [ex.response_body.decode()]
            for chunk in chunks:
                types.GenerateContentResponse.model_validate_json(chunk)


def test_the_openai_requests_are_what_the_openai_sdk_sends() -> None:
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    message: TypeAdapter[Any] = TypeAdapter(ChatCompletionMessageParam)
    item: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)
    for ex in chat().exchanges:
        for m in json.loads(ex.request_body)["messages"]:
            message.validate_python(m)
    for ex in responses().exchanges:
        for i in json.loads(ex.request_body)["input"]:
            item.validate_python(i)
    assert SSE[0][1].startswith("text/event-stream")


def _replace(ex: Exchange, **changes: Any) -> Exchange:
    from dataclasses import replace

    return replace(ex, **changes)


@pytest.mark.parametrize(("url", "body", "problem"), [
    (CHAT_URL, {"error": {"message": "bad key"}}, "the model reported an error: bad key"),
    (CHAT_URL, {"object": "list"}, "the answer has no choices"),
    (RESPONSES_URL, {"error": {"message": "no"}}, "the model reported an error: no"),
    (MESSAGES_URL, {"type": "error", "error": {"type": "api_error", "message": "oops"}},
     "the model reported an error: oops"),
    (MESSAGES_URL, {"id": "msg"}, "the answer has no content"),
    (GEMINI_BASE + ":generateContent", {"usageMetadata": {"promptTokenCount": 1}},
     "the answer has no candidates"),
])
def test_a_200_without_the_apis_answer_in_it_is_not_an_empty_answer(
        url: str, body: dict[str, Any], problem: str) -> None:
    request = {"model": "m", "messages": [], "input": "x", "contents": []}
    call = read_exchange(exchange(url, request, json.dumps(body).encode(), streamed=False, at=0))
    assert call is not None and call.answered and not call.whole and call.problem == problem

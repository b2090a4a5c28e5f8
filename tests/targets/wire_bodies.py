"""Model exchanges as the four APIs write them, for the wire readers' tests.

One conversation, played in each API's own shapes: the model asks for two
tools at once, then asks the user and refunds, then answers in text and
asks for a transfer the agent never runs (the conversation ends there).

The OpenAI bodies are the ``openai`` SDK's own types, validated and then
serialized by the SDK (``model_dump_json``: every optional field written,
null when unset, as the API does). The Anthropic and Gemini bodies are
written here from their SDKs' types (anthropic-sdk-python ``types/``,
google-genai ``types.py``); ``test_wire_read`` checks them against those
SDKs when they are installed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from assay.targets.wire import Exchange

SSE = (("content-type", "text/event-stream; charset=utf-8"),)
JSON = (("content-type", "application/json"),)


@dataclass(frozen=True)
class Turn:
    """One model reply: its text, its tool calls ``(id, name, arguments)``, its usage."""

    text: str | None
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    usage: tuple[int, int] = (0, 0)


USER = "Refund order A-1 for customer C-1"

SCRIPT = (
    Turn(None, (("call_1", "crm.lookup", {"customer": "C-1"}),
                ("call_2", "orders.get", {"order": "A-1"})), (100, 20)),
    Turn(None, (("call_3", "ask_user", {"question": "Refund A-1 for 30 EUR?"}),
                ("call_4", "erp.refund", {"order": "A-1", "amount": 30})), (150, 25)),
    Turn("Refunded 30 EUR on A-1.", (("call_5", "erp.transfer", {"to": "ACC-9", "amount": 30}),),
         (200, 30)),
)

#: What the agent sent back for each call it ran (``call_5`` it never ran).
ANSWERS: dict[str, Any] = {"call_1": {"tier": "gold"}, "call_2": {"total": 30},
                           "call_3": "yes", "call_4": {"ok": True}}

TOOLS = ("crm.lookup", "orders.get", "ask_user", "erp.refund", "erp.transfer")


@dataclass
class Played:
    """The exchanges of one conversation, and what the fold should make of them."""

    exchanges: list[Exchange] = field(default_factory=list)
    served: str = ""


def pieces(text: str, size: int = 7) -> list[str]:
    """``text`` in pieces, as a stream sends it."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def sse(events: list[tuple[str | None, Any]], *, crlf: bool = False) -> bytes:
    """A server-sent-event body: ``event:`` lines when named, ``data:`` JSON, blank lines."""
    end = "\r\n" if crlf else "\n"
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}{end}" if name else "") + f"data: {text}{end}{end}")
    return "".join(out).encode()


def exchange(url: str, request: dict[str, Any], response: bytes, *, streamed: bool,
             at: float, status: int = 200) -> Exchange:
    return Exchange(method="POST", url=url,
                    request_headers=(("content-type", "application/json"),),
                    request_body=json.dumps(request).encode(), status=status,
                    response_headers=SSE if streamed else JSON, response_body=response,
                    started=at, duration_s=0.5)


# --- OpenAI Chat Completions -------------------------------------------------------------


CHAT_URL = "https://api.openai.com/v1/chat/completions"
CHAT_SERVED = "gpt-4o-mini-2024-07-18"


def chat(*, streamed: bool = False, usage: bool = True,
         script: tuple[Turn, ...] = SCRIPT) -> Played:
    """The conversation with Chat Completions."""
    from openai.types.chat import ChatCompletion

    messages: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    played = Played(served=CHAT_SERVED)
    for n, turn in enumerate(script):
        request: dict[str, Any] = {"model": "gpt-4o-mini", "messages": list(messages),
                                   "tools": [_chat_tool(t) for t in TOOLS]}
        if streamed:
            request["stream"] = True
            if usage:
                request["stream_options"] = {"include_usage": True}
        calls = [{"id": i, "type": "function",
                  "function": {"name": name, "arguments": json.dumps(args)}}
                 for i, name, args in turn.calls]
        if streamed:
            body = sse([(None, c) for c in _chat_chunks(turn, n, usage)] + [(None, "[DONE]")])
        else:
            completion = {
                "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1_760_000_000 + n,
                "model": CHAT_SERVED, "system_fingerprint": "fp_1",
                "choices": [{"index": 0, "logprobs": None,
                             "finish_reason": "tool_calls" if calls else "stop",
                             "message": {"role": "assistant", "content": turn.text,
                                         "refusal": None, "tool_calls": calls or None}}],
                "usage": {"prompt_tokens": turn.usage[0], "completion_tokens": turn.usage[1],
                          "total_tokens": sum(turn.usage)} if usage else None,
            }
            body = ChatCompletion.model_validate(completion).model_dump_json().encode()
        played.exchanges.append(exchange(CHAT_URL, request, body, streamed=streamed, at=n))
        messages.append({"role": "assistant", "content": turn.text, "tool_calls": calls})
        messages.extend({"role": "tool", "tool_call_id": i, "content": _text(ANSWERS[i])}
                        for i, _, _ in turn.calls if i in ANSWERS)
    return played


def _chat_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def _chat_chunks(turn: Turn, n: int, usage: bool) -> list[str]:
    from openai.types.chat import ChatCompletionChunk

    def chunk(delta: dict[str, Any] | None, finish: str | None = None,
              tokens: tuple[int, int] | None = None) -> str:
        data = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk",
                "created": 1_760_000_000 + n, "model": CHAT_SERVED, "system_fingerprint": "fp_1",
                "choices": [] if delta is None else
                [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                "usage": None if tokens is None else
                {"prompt_tokens": tokens[0], "completion_tokens": tokens[1],
                 "total_tokens": sum(tokens)}}
        return ChatCompletionChunk.model_validate(data).model_dump_json()

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": piece}) for piece in pieces(turn.text or "") if piece]
    for index, (call_id, name, args) in enumerate(turn.calls):
        out.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in pieces(json.dumps(args))]
    out.append(chunk({}, "tool_calls" if turn.calls else "stop"))
    if usage:
        out.append(chunk(None, tokens=turn.usage))
    return out


# --- OpenAI Responses --------------------------------------------------------------------


RESPONSES_URL = "https://api.openai.com/v1/responses"
RESPONSES_SERVED = "gpt-4.1-mini-2025-04-14"


def responses(*, streamed: bool = False, stored: bool = False) -> Played:
    """The conversation with Responses; ``stored``: the server keeps it (previous_response_id)."""
    from openai.types.responses import Response

    history: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    new: list[dict[str, Any]] = list(history)
    played = Played(served=RESPONSES_SERVED)
    for n, turn in enumerate(SCRIPT):
        request: dict[str, Any] = {"model": "gpt-4.1-mini", "input": new if stored else history,
                                   "tools": [{"type": "function", "name": t, "parameters": {},
                                              "strict": False} for t in TOOLS]}
        if stored and n:
            request["previous_response_id"] = f"resp_{n - 1}"
        if streamed:
            request["stream"] = True
        output = _responses_output(turn, n)
        response = {"id": f"resp_{n}", "object": "response", "created_at": 1_760_000_000,
                    "model": RESPONSES_SERVED, "status": "completed", "output": output,
                    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                    "usage": {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1],
                              "total_tokens": sum(turn.usage),
                              "input_tokens_details": {"cached_tokens": 0,
                                                       "cache_write_tokens": 0},
                              "output_tokens_details": {"reasoning_tokens": 0}}}
        whole = Response.model_validate(response)
        if streamed:
            body = sse(_responses_events(whole.model_dump(mode="json", by_alias=True), output))
        else:
            body = whole.model_dump_json(by_alias=True).encode()
        played.exchanges.append(exchange(RESPONSES_URL, request, body, streamed=streamed, at=n))
        said = [{"type": "function_call", "call_id": i, "name": name,
                 "arguments": json.dumps(args), "id": f"fc_{i}", "status": "completed"}
                for i, name, args in turn.calls]
        answers = [{"type": "function_call_output", "call_id": i, "output": _text(ANSWERS[i])}
                   for i, _, _ in turn.calls if i in ANSWERS]
        history += said + answers
        new = answers
    return played


def _responses_output(turn: Turn, n: int) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if turn.text:
        output.append({"type": "message", "id": f"msg_{n}", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": turn.text,
                                    "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": name,
                "arguments": json.dumps(args), "status": "completed"}
               for i, name, args in turn.calls]
    return output


def _responses_events(response: dict[str, Any],
                      output: list[dict[str, Any]]) -> list[tuple[str | None, Any]]:
    from openai.types.responses import ResponseStreamEvent

    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    events: list[dict[str, Any]] = [
        {"type": "response.created",
         "response": {**response, "status": "in_progress", "output": [], "usage": None}}]
    for at, item in enumerate(output):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append({"type": "response.output_item.added", "output_index": at,
                           "item": {**item, "status": "in_progress", "content": []}})
            events += [{"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": at, "content_index": 0, "delta": piece, "logprobs": []}
                       for piece in pieces(text)]
            events.append({"type": "response.output_text.done", "item_id": item["id"],
                           "output_index": at, "content_index": 0, "text": text,
                           "logprobs": []})
        else:
            events.append({"type": "response.output_item.added", "output_index": at,
                           "item": {**item, "arguments": "", "status": "in_progress"}})
            events += [{"type": "response.function_call_arguments.delta", "item_id": item["id"],
                        "output_index": at, "delta": piece}
                       for piece in pieces(item["arguments"])]
            events.append({"type": "response.function_call_arguments.done",
                           "item_id": item["id"], "output_index": at,
                           "arguments": item["arguments"]})
        events.append({"type": "response.output_item.done", "output_index": at, "item": item})
    events.append({"type": "response.completed", "response": response})
    out: list[tuple[str | None, Any]] = []
    for number, event in enumerate(events):
        typed = adapter.validate_python({**event, "sequence_number": number})
        out.append((event["type"], typed.model_dump_json(by_alias=True)))
    return out


# --- Anthropic Messages ------------------------------------------------------------------


MESSAGES_URL = "https://api.anthropic.com/v1/messages"
MESSAGES_SERVED = "claude-sonnet-4-5-20250929"


def messages(*, streamed: bool = False, refused: bool = False) -> Played:
    """The conversation with Messages; ``refused``: the agent answers the transfer with an error.

    Each call reports part of its input as read from the prompt cache, which
    counts as input (the API's documented total).
    """
    sent: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    played = Played(served=MESSAGES_SERVED)
    script = SCRIPT + ((Turn("I did not transfer anything.", (), (250, 10)),) if refused else ())
    for n, turn in enumerate(script):
        request: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                                   "messages": list(sent),
                                   "tools": [{"name": t, "input_schema": {"type": "object"}}
                                             for t in TOOLS]}
        if streamed:
            request["stream"] = True
        blocks = ([{"type": "text", "text": turn.text}] if turn.text else []) + [
            {"type": "tool_use", "id": i, "name": name, "input": args}
            for i, name, args in turn.calls]
        usage = {"input_tokens": turn.usage[0] - 40, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 40, "output_tokens": turn.usage[1]}
        message = {"id": f"msg_{n}", "type": "message", "role": "assistant",
                   "model": MESSAGES_SERVED, "content": blocks,
                   "stop_reason": "tool_use" if turn.calls else "end_turn",
                   "stop_sequence": None, "usage": usage}
        body = sse(_messages_events(message)) if streamed else json.dumps(message).encode()
        played.exchanges.append(exchange(MESSAGES_URL, request, body, streamed=streamed, at=n))
        sent.append({"role": "assistant", "content": blocks})
        results = [{"type": "tool_result", "tool_use_id": i, "content": _text(ANSWERS[i])}
                   for i, _, _ in turn.calls if i in ANSWERS]
        if refused and any(i == "call_5" for i, _, _ in turn.calls):
            results.append({"type": "tool_result", "tool_use_id": "call_5", "is_error": True,
                            "content": [{"type": "text", "text": "transfers are not allowed"}]})
        if results:
            sent.append({"role": "user", "content": results})
    return played


def _messages_events(message: dict[str, Any]) -> list[tuple[str | None, Any]]:
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            events.append({"type": "ping"})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": piece}}
                       for piece in pieces(block["text"])]
        else:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {**block, "input": {}}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}
                       for piece in [""] + pieces(json.dumps(block["input"]))]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": usage["output_tokens"]}})
    events.append({"type": "message_stop"})
    return [(event["type"], event) for event in events]


# --- Gemini ------------------------------------------------------------------------------


GEMINI_SERVED = "gemini-2.5-flash"
GEMINI_BASE = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"


def gemini(*, streamed: bool = False) -> Played:
    """The conversation with Gemini: no call ids, results matched by name and order."""
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": USER}]}]
    played = Played(served=GEMINI_SERVED)
    for n, turn in enumerate(SCRIPT):
        request = {"contents": list(contents),
                   "tools": [{"functionDeclarations": [{"name": t} for t in TOOLS]}],
                   "generationConfig": {"temperature": 0}}
        parts = ([{"text": turn.text}] if turn.text else []) + [
            {"functionCall": {"name": name, "args": args}} for _, name, args in turn.calls]
        usage = {"promptTokenCount": turn.usage[0] - 5, "toolUsePromptTokenCount": 5,
                 "candidatesTokenCount": turn.usage[1] - 3, "thoughtsTokenCount": 3,
                 "totalTokenCount": sum(turn.usage)}
        answer = {"candidates": [{"content": {"role": "model", "parts": parts},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": usage, "modelVersion": GEMINI_SERVED,
                  "responseId": f"r{n}"}
        if streamed:
            url = GEMINI_BASE + ":streamGenerateContent?alt=sse&key=AIza-SECRET"
            body = sse([(None, chunk) for chunk in _gemini_chunks(answer)], crlf=True)
        else:
            url = GEMINI_BASE + ":generateContent?key=AIza-SECRET"
            body = json.dumps(answer).encode()
        played.exchanges.append(exchange(url, request, body, streamed=streamed, at=n))
        contents.append({"role": "model", "parts": parts})
        results = [{"functionResponse": {"name": name, "response": {"result": ANSWERS[i]}}}
                   for i, name, _ in turn.calls if i in ANSWERS]
        if results:
            contents.append({"role": "user", "parts": results})
    return played


def _gemini_chunks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A stream of the answer: text in pieces, function calls whole, running usage."""
    parts = answer["candidates"][0]["content"]["parts"]
    usage = answer["usageMetadata"]
    chunks = []
    running = {"promptTokenCount": usage["promptTokenCount"]}
    for part in parts:
        for piece in pieces(part["text"]) if "text" in part else [None]:
            given = {"text": piece} if piece is not None else part
            chunks.append({"candidates": [{"content": {"role": "model", "parts": [given]},
                                           "index": 0}],
                           "usageMetadata": running, "modelVersion": GEMINI_SERVED})
    chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                   "finishReason": "STOP", "index": 0}],
                   "usageMetadata": usage, "modelVersion": GEMINI_SERVED})
    return chunks


def _text(value: Any) -> str:
    """A tool result as the text an agent sends it back as."""
    return value if isinstance(value, str) else json.dumps(value)


PLAYERS = {"chat": chat, "responses": responses, "messages": messages, "gemini": gemini}

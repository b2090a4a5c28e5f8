"""A scripted model on loopback that speaks four APIs, for agents built with frameworks.

OpenAI Chat Completions (``POST …/chat/completions``), OpenAI Responses
(``POST …/responses``), Anthropic Messages (``POST …/v1/messages``) and Gemini
(``POST …/models/M:generateContent``, ``…:streamGenerateContent?alt=sse``), each
streamed or not, as the request asks. What the model does is written in the
conversation's first user message after ``SCRIPT:``, as JSON: a list of turns,
each ``{"call": NAME, "args": {...}}`` (one tool call), ``{"calls": [[NAME,
{...}], ...]}`` (parallel calls) or ``{"say": TEXT}`` (the final answer). The
turn played is the number of model turns already in the conversation (tool
results the agent sent back), so a framework's own loop walks the script.

A conversation with no ``SCRIPT:`` is played by a rule instead, the one
docs/your-agent.md states for its support agents (tools ``lookup_order``,
``refund_order``, ``ask_user``, each taking ``order_id`` or ``question``):

- no order number (``A-1``) in the message: it asks which order, calling nothing;
- an order and the word "refund" and "anyway": it calls ``refund_order`` at
  once, then answers with what that returned;
- an order and "refund": it calls ``lookup_order``; when that says "lost", it
  asks the customer (``ask_user``), calls ``refund_order`` and answers with its
  result, else it answers with the lookup's;
- an order: it calls ``lookup_order`` and answers with what that returned.

Every answer reports usage (11 in, 7 out per turn) and the model
``served-model-1``. A request for the model ``REFUSING`` is refused with 401,
its message quoting the credential it came with, as a careless gateway's
does. Used in-process (``ModelServer`` as a context manager, on a free port
or the one given) and as a process (``python tests/model_server.py [PORT]``
prints its base URL, then serves).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SERVED = "served-model-1"
#: The model this server refuses, quoting the key it was sent.
REFUSING = "refuse-quoting-the-key"
USAGE_IN, USAGE_OUT = 11, 7
_SCRIPT = re.compile(r"SCRIPT:(\[.*\])", re.S)
_ORDER = re.compile(r"\b[A-Z]-\d+\b")


def script_of(text: str) -> list[dict[str, Any]]:
    found = _SCRIPT.search(text)
    if not found:
        return [{"say": "no script"}]
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return [{"say": "bad script"}]
    return value if isinstance(value, list) and value else [{"say": "empty script"}]


def rule_of(prompt: str, results: list[str]) -> list[dict[str, Any]]:
    """The turns the rule plays for ``prompt``, given the tool results sent back so far."""
    found = _ORDER.search(prompt)
    if not found:
        return [{"say": "Which order is it about? Please give me its number."}]
    order = {"order_id": found.group()}
    answer = {"say": results[-1] if results else "(no tool answered)"}
    asked = prompt.lower()
    if "refund" in asked and "anyway" in asked:
        return [{"call": "refund_order", "args": order}, answer]
    turns: list[dict[str, Any]] = [{"call": "lookup_order", "args": order}]
    if "refund" in asked and results and "lost" in results[0].lower():
        turns += [{"call": "ask_user",
                   "args": {"question": f"May I refund order {found.group()}?"}},
                  {"call": "refund_order", "args": order}]
    return [*turns, answer]


def _step(prompt: str, results: list[str], turn: int) -> dict[str, Any]:
    """The turn to play: the script's when the prompt has one, else the rule's."""
    plan = script_of(prompt) if _SCRIPT.search(prompt) else rule_of(prompt, results)
    return plan[min(turn, len(plan) - 1)]


def _text(content: Any) -> str:
    """A message's or result's content as text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part)
                       for part in content)
    return json.dumps(content)


def _calls(turn: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if "call" in turn:
        return [(turn["call"], turn.get("args") or {})]
    return [(name, args) for name, args in turn.get("calls") or []]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client gone mid-answer is expected


class ModelServer:
    """The scripted model on 127.0.0.1 (a free port); ``requests`` keeps what it was asked."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = _Server(("127.0.0.1", port), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ModelServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def seen(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body, "headers": headers})


# --- the four APIs -------------------------------------------------------------------------

def _chat(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    messages = body.get("messages") or []
    first = next((m for m in messages if m.get("role") == "user"), {})
    content = first.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
    step = _step(text, results, turn)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if "say" in step:
        message["content"] = step["say"]
        finish = "stop"
    else:
        message["tool_calls"] = [
            {"id": f"call_{turn}_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(_calls(step))]
        finish = "tool_calls"
    reply = {"id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 1,
             "model": SERVED, "choices": [{"index": 0, "message": message,
                                           "finish_reason": finish, "logprobs": None}],
             "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                       "total_tokens": USAGE_IN + USAGE_OUT}}
    # The stream: role, then content or each tool call (name, then arguments in two
    # pieces), then the finish, then usage when asked for.
    base = {"id": reply["id"], "object": "chat.completion.chunk", "created": 1, "model": SERVED}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                    "finish_reason": None}]}]
    if message["content"] is not None:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": message["content"]},
                                            "finish_reason": None}]})
    for i, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        half = len(args) // 2
        chunks.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {
            "tool_calls": [{"index": i, "id": call["id"], "type": "function",
                            "function": {"name": call["function"]["name"],
                                         "arguments": args[:half]}}]}}]})
        chunks.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {
            "tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]}}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": reply["usage"]})
    return reply, chunks


def _responses(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    texts = []
    for item in items:
        if item.get("role") == "user":
            content = item.get("content")
            texts.append(content if isinstance(content, str) else json.dumps(content))
    # Turns already played, read from the call ids this server gave (call_TURN_I).
    played = {int(found.group(1)) for item in items if item.get("type") == "function_call_output"
              for found in [re.fullmatch(r"call_(\d+)_\d+", str(item.get("call_id")))]
              if found}
    turn = max(played) + 1 if played else 0
    results = [_text(item.get("output")) for item in items
               if item.get("type") == "function_call_output"]
    step = _step(" ".join(texts), results, turn)
    output: list[dict[str, Any]] = []
    if "say" in step:
        output.append({"type": "message", "id": f"msg_{turn}", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": step["say"],
                                    "annotations": []}]})
    else:
        for i, (name, args) in enumerate(_calls(step)):
            output.append({"type": "function_call", "id": f"fc_{turn}_{i}",
                           "call_id": f"call_{turn}_{i}", "name": name,
                           "arguments": json.dumps(args), "status": "completed"})
    usage = {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
             "total_tokens": USAGE_IN + USAGE_OUT,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}
    reply = {"id": f"resp_{turn}", "object": "response", "created_at": 1, "model": SERVED,
             "status": "completed", "output": output, "usage": usage, "parallel_tool_calls": True,
             "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
             "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
             "text": {"format": {"type": "text"}}}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0,
         "response": {**reply, "status": "in_progress", "output": [], "usage": None}}]
    for index, item in enumerate(output):
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "status": "in_progress"}})
        if item["type"] == "function_call":
            events.append({"type": "response.function_call_arguments.delta",
                           "output_index": index, "item_id": item["id"],
                           "delta": item["arguments"]})
            events.append({"type": "response.function_call_arguments.done",
                           "output_index": index, "item_id": item["id"],
                           "arguments": item["arguments"]})
        else:
            events.append({"type": "response.output_text.delta", "output_index": index,
                           "item_id": item["id"], "content_index": 0,
                           "delta": item["content"][0]["text"]})
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    events.append({"type": "response.completed", "response": reply})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return reply, events


def _anthropic(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    messages = body.get("messages") or []
    first = next((m for m in messages if m.get("role") == "user"), {})
    content = first.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    results = [_text(block.get("content")) for m in messages if m.get("role") == "user"
               and isinstance(m.get("content"), list) for block in m["content"]
               if isinstance(block, dict) and block.get("type") == "tool_result"]
    step = _step(text, results, turn)
    blocks: list[dict[str, Any]] = []
    if "say" in step:
        blocks.append({"type": "text", "text": step["say"]})
        stop = "end_turn"
    else:
        blocks = [{"type": "tool_use", "id": f"toolu_{turn}_{i}", "name": name, "input": args}
                  for i, (name, args) in enumerate(_calls(step))]
        stop = "tool_use"
    reply = {"id": f"msg_{turn}", "type": "message", "role": "assistant", "model": SERVED,
             "content": blocks, "stop_reason": stop, "stop_sequence": None,
             "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **reply, "content": [], "stop_reason": None,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": 1}}}]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            whole = json.dumps(block["input"])
            for piece in (whole[:len(whole) // 2], whole[len(whole) // 2:]):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": piece}})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop,
                                                       "stop_sequence": None},
                   "usage": {"output_tokens": USAGE_OUT}})
    events.append({"type": "message_stop"})
    return reply, events


def _gemini(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    contents = body.get("contents") or []
    first = next((c for c in contents if c.get("role") in ("user", None)), {})
    text = " ".join(str(p.get("text", "")) for p in first.get("parts") or [])
    turn = sum(1 for c in contents if c.get("role") == "model")
    results = [_text(part["functionResponse"].get("response")) for c in contents
               for part in c.get("parts") or [] if "functionResponse" in part]
    step = _step(text, results, turn)
    if "say" in step:
        parts: list[dict[str, Any]] = [{"text": step["say"]}]
    else:
        parts = [{"functionCall": {"name": name, "args": args}} for name, args in _calls(step)]
    reply = {"candidates": [{"content": {"role": "model", "parts": parts},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": USAGE_IN, "candidatesTokenCount": USAGE_OUT,
                               "totalTokenCount": USAGE_IN + USAGE_OUT},
             "modelVersion": SERVED}
    return reply, [reply]


def _handler(model: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?")[0]
            model.seen(self.path, body, {k.lower(): v for k, v in self.headers.items()})
            if isinstance(body, dict) and body.get("model") == REFUSING:
                sent = self.headers.get("authorization") or self.headers.get("x-api-key")
                self._send(401, json.dumps({"error": {
                    "message": f"Incorrect API key provided: {sent}",
                    "type": "invalid_request_error", "code": "invalid_api_key"}}).encode())
                return
            if path.endswith("/chat/completions"):
                reply, stream = _chat(body)
                sse = bool(body.get("stream"))
                lines = [f"data: {json.dumps(c)}\n\n" for c in stream] + ["data: [DONE]\n\n"]
            elif path.endswith("/responses"):
                reply, stream = _responses(body)
                sse = bool(body.get("stream"))
                lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in stream]
            elif path.endswith("/messages"):
                reply, stream = _anthropic(body)
                sse = bool(body.get("stream"))
                lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in stream]
            elif ":generateContent" in path or ":streamGenerateContent" in path:
                reply, stream = _gemini(body)
                sse = ":streamGenerateContent" in path
                lines = [f"data: {json.dumps(c)}\n\n" for c in stream]
            else:
                self._send(404, b'{"error": {"message": "no such API here"}}')
                return
            if not sse:
                self._send(200, json.dumps(reply).encode())
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for line in lines:
                data = line.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def serving() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def main() -> None:
    with ModelServer(int(sys.argv[1]) if len(sys.argv) > 1 else 0) as server:
        print(server.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    sys.exit(main())

"""A scripted OpenAI Responses API on loopback, for the real ``codex`` CLI.

Codex talks to a custom provider over the Responses API (``POST
/v1/responses``, ``stream: true``), sending the whole conversation each time
(``store: false``). The stub answers with the server-sent events Codex reads:
``response.created``, ``response.output_item.added`` / ``.done`` per message
or ``function_call`` item, text deltas, and ``response.completed`` with usage.

Which scripted turn it plays is read from the conversation: every item the
stub produces carries ``stubturnN`` in its id, and Codex sends those items
back, so the next turn is one past the highest it finds.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TURN = re.compile(r"stubturn(\d+)")


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-stream (a CLI killed at its timeout) is expected here."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def say(value: str) -> dict[str, Any]:
    """An assistant message item."""
    return {"type": "message", "text": value}


def call(name: str, namespace: str | None = None, **arguments: Any) -> dict[str, Any]:
    """A ``function_call`` item; MCP tools are in a namespace (``mcp__SERVER``)."""
    item: dict[str, Any] = {"type": "function_call", "name": name, "arguments": arguments}
    if namespace:
        item["namespace"] = namespace
    return item


def custom(name: str, text: str, namespace: str | None = None) -> dict[str, Any]:
    """A ``custom_tool_call`` item: a freeform tool (``apply_patch``, code mode's ``exec``)."""
    item: dict[str, Any] = {"type": "custom_tool_call", "name": name, "input": text}
    if namespace:
        item["namespace"] = namespace
    return item


@dataclass
class Reply:
    """One model response: its items and the usage it reports."""

    items: list[dict[str, Any]]
    input_tokens: int = 100
    output_tokens: int = 20
    #: Seconds to wait before answering (a model that hangs).
    delay_s: float = 0.0
    #: Answer with this HTTP error status instead (and ``items[0]["text"]`` as message).
    error_status: int | None = None


@dataclass
class Seen:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        """The request's JSON body (None when it had none)."""
        return json.loads(self.raw) if self.raw else None


@dataclass
class ResponsesStub:
    """The script to play and what was asked; ``base_url`` (ending in /v1) once started."""

    script: list[Reply] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, *turns: Reply | list[dict[str, Any]] | str) -> None:
        """Set the script: a string is a text answer, a list of items one response."""
        self.script = [t if isinstance(t, Reply) else Reply([say(t)] if isinstance(t, str) else t)
                       for t in turns]

    def model_calls(self) -> list[Any]:
        """The bodies of the ``/v1/responses`` requests (the model calls)."""
        return [s.body for s in self.seen if s.method == "POST"
                and s.path.split("?")[0].endswith("/responses")]

    def turn_for(self, body: Any) -> int:
        """The number of the turn to play for a conversation."""
        found = [int(n) for n in _TURN.findall(json.dumps(body.get("input", [])))]
        return max(found) + 1 if found else 0


def _events(reply: Reply, turn: int, model: str) -> Iterator[dict[str, Any]]:
    rid = f"resp_stubturn{turn}"
    yield {"type": "response.created", "response": {"id": rid, "status": "in_progress",
                                                    "model": model, "output": []}}
    for index, item in enumerate(reply.items):
        if item["type"] == "message":
            done: dict[str, Any] = {
                "type": "message", "id": f"msg_stubturn{turn}_{index}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": item["text"], "annotations": []}]}
            started = {**done, "status": "in_progress", "content": []}
            yield {"type": "response.output_item.added", "output_index": index, "item": started}
            yield {"type": "response.output_text.delta", "output_index": index,
                   "content_index": 0, "item_id": done["id"], "delta": item["text"]}
        elif item["type"] == "custom_tool_call":
            done = {"type": "custom_tool_call", "id": f"ctc_stubturn{turn}_{index}",
                    "call_id": f"call_stubturn{turn}_{index}", "name": item["name"],
                    "input": item["input"], "status": "completed"}
            if "namespace" in item:
                done["namespace"] = item["namespace"]
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**done, "input": "", "status": "in_progress"}}
        else:
            done = {"type": "function_call", "id": f"fc_stubturn{turn}_{index}",
                    "call_id": f"call_stubturn{turn}_{index}", "name": item["name"],
                    "arguments": json.dumps(item["arguments"]), "status": "completed"}
            if "namespace" in item:
                done["namespace"] = item["namespace"]
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**done, "arguments": "", "status": "in_progress"}}
        yield {"type": "response.output_item.done", "output_index": index, "item": done}
    yield {"type": "response.completed", "response": {
        "id": rid, "status": "completed", "model": model, "output": [],
        "usage": {"input_tokens": reply.input_tokens,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": reply.output_tokens,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": reply.input_tokens + reply.output_tokens}}}


def _handler(stub: ResponsesStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _record(self, raw: bytes) -> Seen:
            seen = Seen(self.command, self.path, dict(self.headers.items()), raw)
            with stub.lock:
                stub.seen.append(seen)
            return seen

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._record(b"")
            if self.path.split("?")[0].endswith("/models"):
                self._json(200, {"object": "list", "data": []})
            else:
                self._json(404, {"error": {"message": "stub", "type": "not_found"}})

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen = self._record(raw)
            if not self.path.split("?")[0].endswith("/responses"):
                self._json(404, {"error": {"message": self.path, "type": "not_found"}})
                return
            body = seen.body
            turn = stub.turn_for(body)
            reply = stub.script[turn] if turn < len(stub.script) else Reply(
                [say("(the script has ended)")])
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.error_status is not None:
                message = reply.items[0].get("text", "stub error") if reply.items else "stub"
                self._json(reply.error_status, {"error": {
                    "message": message, "type": "invalid_request_error", "code": None}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in _events(reply, turn, str(body.get("model", "stub"))):
                self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    return Handler


@contextmanager
def serve(port: int = 0) -> Iterator[ResponsesStub]:
    """A stub on a loopback port (a free one unless given), for the duration of the block."""
    stub = ResponsesStub()
    httpd = _QuietServer(("127.0.0.1", port), _handler(stub))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    stub.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield stub
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()

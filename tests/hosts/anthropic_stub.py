"""A scripted Anthropic Messages API on loopback, for the real ``claude`` CLI.

It answers ``POST /v1/messages`` the way the API does when Claude Code asks
for a stream (``stream: true``): server-sent events ``message_start``,
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` per
text or ``tool_use`` block, ``message_delta`` (stop reason, final usage) and
``message_stop``. Which scripted turn it plays is the number of assistant
messages already in the conversation it is sent, so a retried request gets
the same answer and the script reads as the conversation will.

Every request is recorded (path, headers, raw body) so that a test can see
what the CLI sent, and prove what it did not.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-stream (a CLI killed at its timeout) is expected here."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def text(value: str) -> dict[str, Any]:
    """A text block of a scripted turn."""
    return {"type": "text", "text": value}


def tool(name: str, call_id: str | None = None, **arguments: Any) -> dict[str, Any]:
    """A ``tool_use`` block of a scripted turn."""
    return {"type": "tool_use", "id": call_id or f"toolu_{name.lower()[:20]}",
            "name": name, "input": arguments}


@dataclass
class Turn:
    """One model reply: its blocks and the usage the API reports for it."""

    blocks: list[dict[str, Any]]
    input_tokens: int = 100
    output_tokens: int = 20
    #: Seconds to wait before answering (a model that hangs).
    delay_s: float = 0.0
    #: The model the reply says answered (None: the one the request asked for).
    model: str | None = None


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
class AnthropicStub:
    """The script to play and what was asked; ``base_url`` once started."""

    script: list[Turn] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, *turns: Turn | list[dict[str, Any]] | str) -> None:
        """Set the script: a string is a text answer, a list of blocks one turn."""
        self.script = [t if isinstance(t, Turn) else Turn([text(t)] if isinstance(t, str) else t)
                       for t in turns]

    def model_calls(self) -> list[Any]:
        """The bodies of the ``/v1/messages`` requests (the model calls)."""
        return [s.body for s in self.seen
                if s.method == "POST" and s.path.split("?")[0] == "/v1/messages"]

    def turn_for(self, body: Any) -> Turn:
        """The scripted turn for a conversation: the one after its last assistant message."""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        done = sum(1 for m in messages if m.get("role") == "assistant")
        if done < len(self.script):
            return self.script[done]
        return Turn([text("(the script has ended)")])


def _events(turn: Turn, model: str, number: int) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "message_start", {"type": "message_start", "message": {
        "id": f"msg_stub_{number}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        # A snapshot, as the real API sends: output_tokens grows in message_delta.
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}
    for index, block in enumerate(turn.blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": start}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": json.dumps(block["input"])}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    uses_tool = any(b["type"] == "tool_use" for b in turn.blocks)
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": "tool_use" if uses_tool else "end_turn",
                                      "stop_sequence": None},
                            "usage": {"output_tokens": turn.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


def _handler(stub: AnthropicStub) -> type[BaseHTTPRequestHandler]:
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
            self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                        "message": "stub"}})

        def do_HEAD(self) -> None:  # noqa: N802
            self._record(b"")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen = self._record(raw)
            route = self.path.split("?")[0]
            if route == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": 100})
                return
            if route != "/v1/messages":
                self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                            "message": route}})
                return
            body = seen.body
            with stub.lock:
                turn = stub.turn_for(body)
                number = len(stub.seen)
            model = turn.model or body.get("model", "stub")
            if turn.delay_s:
                time.sleep(turn.delay_s)
            if not body.get("stream"):
                self._json(200, {
                    "id": f"msg_stub_{number}", "type": "message", "role": "assistant",
                    "model": model, "content": turn.blocks, "stop_sequence": None,
                    "stop_reason": "tool_use" if any(b["type"] == "tool_use"
                                                     for b in turn.blocks) else "end_turn",
                    "usage": {"input_tokens": turn.input_tokens,
                              "output_tokens": turn.output_tokens}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in _events(turn, model, number):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    return Handler


@contextmanager
def serve(port: int = 0) -> Iterator[AnthropicStub]:
    """A stub on a loopback port (a free one unless given), for the duration of the block."""
    stub = AnthropicStub()
    httpd = _QuietServer(("127.0.0.1", port), _handler(stub))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    stub.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield stub
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()

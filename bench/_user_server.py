"""A simulated user that answers at once: the loopback model of bench/conversation_turns.py.

    python bench/_user_server.py        # prints its base URL (http://127.0.0.1:PORT/v1)

An OpenAI-compatible ``POST /v1/chat/completions`` on plain asyncio (one
event loop, keep-alive HTTP/1.1 connections, ``Content-Length`` framing
only): as little as a server can do, so that what the bench measures is
assay's side of each turn, not this server's. It plays the user of
assay's simulator prompt: the private instructions hold ``TURNS=N``, and
the answer is ``message K`` while the simulator has said fewer than N
messages (K counted from its own ``assistant`` messages in the request, the
roles flipped as assay sends them), then ``###STOP###``. Every answer
reports usage (20 prompt, 3 completion tokens).

``GET /stats`` answers ``{"calls": C, "busy_s": S}``: the completions asked
so far and the seconds this server spent inside them, from a request read
whole to its answer written — the simulator's own latency, which the bench
takes out of assay's figure. It runs in a process of its own, so it never
takes the measured process's GIL.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from typing import Any

_TURNS = re.compile(r"TURNS=(\d+)")
STOP = "###STOP###"


class _Stats:
    calls = 0
    busy_s = 0.0


def answer(body: dict[str, Any]) -> bytes:
    """The completion for one request: the next scripted message, or the stop word."""
    messages = body.get("messages") or []
    system = messages[0].get("content", "") if messages else ""
    found = _TURNS.search(system if isinstance(system, str) else "")
    turns = int(found.group(1)) if found else 1
    said = sum(1 for m in messages if m.get("role") == "assistant")
    text = f"message {said + 1}" if said < turns else STOP
    return json.dumps({
        "id": "sim", "object": "chat.completion", "model": body.get("model", "sim"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23},
    }, separators=(",", ":")).encode()


def _response(status: int, data: bytes) -> bytes:
    return (b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (status, len(data))) + data


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            self._serve(head.split(" ", 2), body)

    def _serve(self, request_line: list[str], body: bytes) -> None:
        assert self.transport is not None
        began = time.perf_counter()
        if request_line[0] == "GET":
            data = json.dumps({"calls": _Stats.calls, "busy_s": _Stats.busy_s}).encode()
            self.transport.write(_response(200, data))
            return
        try:
            reply = answer(json.loads(body))
            status = 200
        except (ValueError, TypeError, AttributeError):
            reply, status = b'{"error":{"message":"bad request"}}', 400
        self.transport.write(_response(status, reply))
        _Stats.calls += 1
        _Stats.busy_s += time.perf_counter() - began


async def serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Protocol, "127.0.0.1", 0, backlog=512)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        sys.exit(0)

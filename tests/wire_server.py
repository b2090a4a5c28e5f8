"""A loopback model server for wire-capture tests and bench/wire_capture.py.

An aiohttp web server on 127.0.0.1 (a free port), run in its own thread and
event loop. It answers the shapes the model SDKs speak, echoing the last
user text so a test can tell whose exchange it sees:

- ``POST /v1/chat/completions``: OpenAI Chat Completions, JSON or (``stream``
  true) server-sent events ending in ``data: [DONE]``;
- ``POST /v1/messages``: Anthropic Messages, JSON or SSE;
- ``POST /{version}/models/{model}:generateContent`` and
  ``:streamGenerateContent?alt=sse``: Gemini.

A user text holding ``THINK:N`` is answered after N ms (a model's latency).
A user text holding ``HANG`` makes a stream send two events and then wait
until the client goes away (a stream the agent abandons). Other routes:
``GET /big?n=N`` (N bytes, streamed in 64 KiB chunks), ``GET /gzip`` (a
gzip-encoded JSON answer), ``GET /redirect`` (302 to ``/echo``), ``POST
/echo`` (the request body back), ``GET /cut`` (says 1000 bytes, sends 100,
hangs up: a body broken mid-way), ``GET /status/{code}`` and ``POST
/fail/{code}/chat/completions`` (that status, ``retry-after-ms: 1``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import threading
from typing import Any

from aiohttp import web

MODEL = "wire-model-1"
#: ``THINK:N`` in a chat's user text: the answer waits N ms first.
_THINK = re.compile(r"THINK:(\d+)")


def _last_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    for item in reversed(body.get("contents") or []):
        return " ".join(part.get("text", "") for part in item.get("parts", []))
    return ""


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {text}\n\n".encode()


class WireServer:
    """The server; ``base`` is its root URL (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self.base = ""
        #: What was answered to each request body: the bytes sent back, whole.
        self.answers: dict[bytes, bytes] = {}
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="wire-server", daemon=True)

    def __enter__(self) -> WireServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        future = asyncio.run_coroutine_threadsafe(self._stop(), self._loop)
        future.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/{version}/models/{call}", self._gemini)
        app.router.add_get("/big", self._big)
        app.router.add_get("/gzip", self._gzip)
        app.router.add_get("/redirect", self._redirect)
        app.router.add_route("*", "/echo", self._echo)
        app.router.add_get("/cut", self._cut)
        app.router.add_get("/status/{code}", self._status)
        app.router.add_post("/fail/{code}/chat/completions", self._status)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1,
                                     handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _json(self, request: web.Request, value: Any) -> web.Response:
        response = web.json_response(value)
        assert isinstance(response.body, bytes)
        self.answers[await request.read()] = response.body
        return response

    async def _stream(self, request: web.Request, events: list[bytes],
                      hang: bool) -> web.StreamResponse:
        self.answers[await request.read()] = b"".join(events)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, event in enumerate(events):
            await response.write(event)
            if hang and i == 1:
                await asyncio.Event().wait()  # until the client hangs up (cancelled)
        await response.write_eof()
        return response

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = _last_text(body)
        answer = f"echo: {text}"
        think = _THINK.search(text)
        if think:  # a model that takes its time before answering (bench/wire_proxy.py)
            await asyncio.sleep(int(think.group(1)) / 1000)
        if not body.get("stream"):
            return await self._json(request, {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                 "model": MODEL}
        events = [_sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                    "content": ""}}]})]
        events += [_sse({**chunk, "choices": [{"index": 0, "delta": {"content": word + " "}}]})
                   for word in answer.split()]
        events.append(_sse({**chunk, "choices": [{"index": 0, "delta": {},
                                                  "finish_reason": "stop"}]}))
        events.append(_sse("[DONE]"))
        return await self._stream(request, events, "HANG" in text)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = _last_text(body)
        answer = f"echo: {text}"
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
                   "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": {"input_tokens": 7, "output_tokens": 3}}
        if not body.get("stream"):
            content = [{"type": "text", "text": answer}]
            return await self._json(request, {**message, "content": content})
        events = [
            _sse({"type": "message_start", "message": {**message, "content": [],
                                                       "stop_reason": None}}, "message_start"),
            _sse({"type": "content_block_start", "index": 0,
                  "content_block": {"type": "text", "text": ""}}, "content_block_start"),
            _sse({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": answer}}, "content_block_delta"),
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                     "stop_sequence": None},
                  "usage": {"output_tokens": 3}}, "message_delta"),
            _sse({"type": "message_stop"}, "message_stop"),
        ]
        return await self._stream(request, events, "HANG" in text)

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        answer = f"echo: {_last_text(body)}"
        result = {"candidates": [{"content": {"role": "model", "parts": [{"text": answer}]},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3,
                                    "totalTokenCount": 10},
                  "modelVersion": MODEL}
        if request.match_info["call"].endswith(":streamGenerateContent"):
            return await self._stream(request, [_sse(result)], False)
        return await self._json(request, result)

    async def _big(self, request: web.Request) -> web.StreamResponse:
        size = int(request.query["n"])
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = size
        await response.prepare(request)
        block = b"x" * 65536
        sent = 0
        while sent < size:
            part = block[: min(len(block), size - sent)]
            await response.write(part)
            sent += len(part)
        await response.write_eof()
        return response

    async def _gzip(self, request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b'{"packed": true}'),
                            headers={"Content-Type": "application/json",
                                     "Content-Encoding": "gzip"})

    async def _redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/echo")

    async def _echo(self, request: web.Request) -> web.Response:
        return web.Response(body=await request.read(),
                            headers={"Content-Type": "application/octet-stream"})

    async def _cut(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b"y" * 100)
        assert request.transport is not None
        request.transport.close()
        return response

    async def _status(self, request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        # retry-after-ms: an SDK that retries does so at once, not after its backoff.
        return web.json_response({"error": {"message": f"status {code}", "type": "test"}},
                                 status=code, headers={"retry-after-ms": "1"})


if __name__ == "__main__":
    with WireServer() as server:
        print(server.base, flush=True)
        threading.Event().wait()

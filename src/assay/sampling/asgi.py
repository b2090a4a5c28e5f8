"""Online evaluation as ASGI middleware: ``assay.online(...).asgi(app)`` (SPEC §10).

A sampled HTTP request is recorded as it passes: the request's method, path
and body as the app reads them, the response's status and body as the app
sends them. Each message is handed on at once, after its bytes are noted
(up to ``max_body`` each way): nothing is buffered before it is sent, so a
streaming response still streams and the client sees the same bytes, in the
same messages, as without the middleware. The body is decoded (JSON when it
parses, else text) by the grader thread, not here.

Headers and the query string are not recorded: they carry credentials
(``Authorization``, cookies, ``?api_key=``), which are not ours to keep
(PRINCIPLES 10). Non-HTTP scopes (websockets) pass through untouched; on
lifespan shutdown the buffered samples are graded before the server is told
the app has stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Protocol

from .samples import Recorded, Sample, describe

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The bytes of a request's and of a response's body kept for a sample.
MAX_BODY = 256 * 1024
#: How long lifespan shutdown waits for the buffered samples to be graded.
SHUTDOWN_WAIT_S = 10.0


class Sampling(Protocol):
    """What the middleware asks of the sampler it is given (``online.Online``)."""

    def draw(self) -> int | None:
        """Count a call; its number if it is sampled, else None."""

    def submit(self, sample: Sample) -> None:
        """Offer a finished sample to be graded off the hot path."""

    def count_cancelled(self) -> None:
        """A sampled call ended without an answer."""

    def close(self, timeout: float | None = None) -> bool:
        """Grade what is buffered and stop; False if ``timeout`` ran out first."""


class HttpSample:
    """One sampled request and its response, as the bytes went by."""

    __slots__ = ("_request", "_request_size", "_response", "_response_size", "error", "index",
                 "max_body", "method", "path", "started", "status", "took")

    def __init__(self, index: int, scope: Scope, max_body: int) -> None:
        self.index = index
        self.method = str(scope.get("method", ""))
        self.path = str(scope.get("path", ""))
        self.max_body = max_body
        self.status: int | None = None
        self.error: str | None = None
        self._request: list[bytes] = []
        self._request_size = 0
        self._response: list[bytes] = []
        self._response_size = 0
        self.started = time.perf_counter()
        self.took = 0.0

    def received(self, message: Message) -> None:
        """Note a request body chunk the app read."""
        if message.get("type") == "http.request":
            self._request_size = _keep(self._request, self._request_size,
                                       message.get("body", b""), self.max_body)

    def sent(self, message: Message) -> None:
        """Note the response's start or a body chunk the app sent."""
        kind = message.get("type")
        if kind == "http.response.start":
            self.status = int(message.get("status", 0))
        elif kind == "http.response.body":
            self._response_size = _keep(self._response, self._response_size,
                                        message.get("body", b""), self.max_body)

    def done(self, error: str | None = None) -> HttpSample:
        """The app returned (or raised ``error``)."""
        self.took = time.perf_counter() - self.started
        self.error = error
        return self

    def recorded(self) -> Recorded:
        """The exchange as the trace records it (decoded here, off the request's path)."""
        given: dict[str, Any] = {"method": self.method, "path": self.path,
                                 "body": _decoded(b"".join(self._request))}
        if self._request_size > self.max_body:
            given["body_cut_at"] = self.max_body
        body = b"".join(self._response)
        unseen = None
        if self._response_size > self.max_body:
            unseen = (f"the response body ({self._response_size} bytes) is over the "
                      f"{self.max_body}-byte cap")
            output: Any = body.decode("utf-8", "replace")
        else:
            output = _decoded(body)
        where = f"{self.method} {self.path}"
        if self.error is not None:
            return Recorded(given, output, "error", self.error, self.took, unseen, where)
        if self.status is None:
            return Recorded(given, None, "error", "the app sent no response", self.took,
                            unseen, where)
        ok = 200 <= self.status < 300
        return Recorded(given, output, "ok" if ok else "error",
                        None if ok else f"HTTP {self.status}", self.took, unseen, where)


def _keep(chunks: list[bytes], size: int, body: Any, cap: int) -> int:
    """Append what fits under ``cap`` of ``body``; the running size (past the cap too)."""
    if body:
        room = cap - size
        if room > 0:
            chunks.append(bytes(body[:room]))
        size += len(body)
    return size


def _decoded(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return body.decode("utf-8", "replace")


class OnlineASGI:
    """ASGI middleware: samples HTTP requests to ``app`` for ``online`` (see the module)."""

    def __init__(self, app: ASGIApp, online: Sampling, *, paths: Iterable[str] | None = None,
                 max_body: int = MAX_BODY) -> None:
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 0:
            raise ValueError(f"max_body is a number of bytes (≥ 0), not {max_body!r}")
        prefixes = None if paths is None else tuple(paths)
        if prefixes is not None and (not prefixes or not all(
                isinstance(p, str) and p.startswith("/") for p in prefixes)):
            raise ValueError("paths are URL path prefixes such as '/agent' (each starts with "
                             f"'/'), and at least one; not {paths!r}")
        self.app = app
        self.online = online
        self.paths = prefixes
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request to the app; if it is sampled, note its bytes as they pass."""
        kind = scope.get("type")
        if kind != "http":
            if kind == "lifespan":
                await self._lifespan(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        if self.paths is not None and not str(scope.get("path", "")).startswith(self.paths):
            await self.app(scope, receive, send)
            return
        index = self.online.draw()
        if index is None:
            await self.app(scope, receive, send)
            return
        sample = HttpSample(index, scope, self.max_body)

        async def receive_noted() -> Message:
            message = await receive()
            sample.received(message)
            return message

        async def send_noted(message: Message) -> None:
            sample.sent(message)
            await send(message)

        try:
            await self.app(scope, receive_noted, send_noted)
        except Exception as exc:
            self.online.submit(sample.done(describe(exc)))
            raise
        except BaseException:
            self.online.count_cancelled()
            raise
        self.online.submit(sample.done())

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_after_grading(message: Message) -> None:
            if message.get("type") == "lifespan.shutdown.complete":
                import anyio.to_thread

                await anyio.to_thread.run_sync(self.online.close, SHUTDOWN_WAIT_S)
            await send(message)

        await self.app(scope, receive, send_after_grading)

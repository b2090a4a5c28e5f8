"""The recording proxy: an ``exec:`` agent's model traffic, seen on its way through (SPEC §15).

One loopback server per battery, on a port of its own, in a thread of its
own (a battery busy grading never holds a stream up). Each trial opens a
*route*, ``/t/TOKEN/API/…``, and its agent is pointed at it by the
variables of :meth:`Route.environment`: ``OPENAI_BASE_URL``,
``ANTHROPIC_BASE_URL`` and ``GOOGLE_GEMINI_BASE_URL``, each with a stand-in
key. A request on a route is forwarded to the real endpoint of its API
with the real key (which never leaves this process), the answer is streamed
back chunk by chunk as it arrives, and both are recorded, bounded, as an
:class:`~assay.targets.wire.exchange.Exchange` of that trial. A route whose
trial has ended answers 410 and records nothing.

An upstream that cannot be reached answers the agent 502 with the reason
(what the agent makes of it is its own business) and is recorded as an
exchange with no status, so the trial's report says the upstream failed.
The same server is an OTLP/HTTP receiver (``POST /v1/traces``, protobuf
or JSON): a span whose resource says ``assay.trial=TOKEN`` (set in the
agent's ``OTEL_RESOURCE_ATTRIBUTES``) is kept with that trial's route, in
OTLP/JSON form, for ``otel:``'s reader — so a tool the agent runs without
any model asking is still seen.

Built on Starlette, uvicorn and httpx, which assay already has through
``mcp``; no HTTP is parsed here by hand. docs/decisions/0069-recording-proxy.md.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from .exchange import MAX_BODY, Exchange, kept_headers

if TYPE_CHECKING:
    import httpx
    from starlette.requests import Request
    from starlette.responses import Response

#: The model APIs the proxy forwards, by the name in a route's path.
APIS = ("openai", "anthropic", "gemini")
#: Where each API is when nobody said otherwise.
DEFAULT_UPSTREAMS = {"openai": "https://api.openai.com/v1",
                     "anthropic": "https://api.anthropic.com",
                     "gemini": "https://generativelanguage.googleapis.com"}
#: The variable each API's SDK reads its base URL from (the agent gets a route in it).
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL",
                "gemini": "GOOGLE_GEMINI_BASE_URL"}
#: The settings' variables that name each API's upstream (``upstream_openai`` … in a
#: settings file; a variable set wins over the file, a flag over both).
UPSTREAM_ENV = {"openai": "ASSAY_UPSTREAM_OPENAI", "anthropic": "ASSAY_UPSTREAM_ANTHROPIC",
                "gemini": "ASSAY_UPSTREAM_GEMINI"}
#: The variables each API's key may be in: the proxy reads the real one, the agent gets
#: the stand-in in all of them.
KEY_ENV = {"openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
           "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
#: What the agent's SDK sends as its key: a word that opens nothing.
STAND_IN_KEY = "assay-stand-in-key"
#: How each API takes its key.
_KEY_HEADER = {"openai": ("authorization", "Bearer {}"), "anthropic": ("x-api-key", "{}"),
               "gemini": ("x-goog-api-key", "{}")}
#: Query parameters that carry a key (Gemini's ``?key=``): never forwarded from the
#: agent (it has only the stand-in), never recorded.
KEY_PARAMS = frozenset({"key", "api_key", "apikey", "access_token", "token"})
#: Headers that belong to one connection, or that the proxy sets itself.
_HOP = frozenset({"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding",
                  "te", "trailer", "upgrade", "content-length", "accept-encoding",
                  "authorization", "x-api-key", "x-goog-api-key", "api-key",
                  "proxy-authorization"})
#: The most spans one trial keeps, and the largest OTLP body taken (413 past it).
MAX_SPANS = 10_000
MAX_OTLP_BODY = 16 * 1024 * 1024
#: The resource attribute that names a span's trial (its route's token).
TRIAL_ATTRIBUTE = "assay.trial"
_HOP_BACK = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                       "trailer", "upgrade"})
#: What stands where the real key was, in an answer or an error that quoted it (ASCII: a
#: header value is Latin-1).
KEY_CUT = "***"
#: A key shorter than this is a placeholder a local server takes ("EMPTY", "dummy"), not a
#: secret: it is not cut out of answers, where it may be a word of the model's text.
MIN_SECRET = 8


@dataclass(frozen=True)
class Upstream:
    """Where one API's requests go, and the key they carry there (None: none)."""

    api: str
    base_url: str
    key: str | None = field(default=None, repr=False)


def upstreams_from(environ: Mapping[str, str], given: Mapping[str, str | None]
                   ) -> dict[str, Upstream]:
    """Each API's upstream: ``given`` (``--upstream-openai`` …, a settings file, or what a
    queued run carries), else ``$ASSAY_UPSTREAM_OPENAI`` …, else the base URL the
    environment named, else the API's own; its key from the environment, always."""
    found = {}
    for api in APIS:
        base = (given.get(api) or environ.get(UPSTREAM_ENV[api])
                or environ.get(BASE_URL_ENV[api]) or DEFAULT_UPSTREAMS[api])
        key = next((environ[name] for name in KEY_ENV[api] if environ.get(name)), None)
        found[api] = Upstream(api, base.rstrip("/"), key)
    return found


def credential_in(url: str) -> str | None:
    """What in ``url`` is a credential (a user and password, a key in the query), or None.

    A queued run keeps its upstream URLs in the store for its workers; a key
    must never be kept with them (docs/usage.md, the job queue).
    """
    from urllib.parse import urlsplit

    from .exchange import secret_param

    try:
        parts = urlsplit(url)
    except ValueError:
        return None  # not a URL at all: the proxy says so when it forwards
    if parts.username is not None or parts.password is not None:
        return "a user name or password (user:password@)"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in KEY_PARAMS or secret_param(name):
            return f"a credential in its query ({name}=)"
    return None


def clean_query(query: str) -> str:
    """A query string without the parameters that carry a key."""
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
             if k.lower() not in KEY_PARAMS]
    return urlencode(pairs)


class Route:
    """One trial's way through the proxy, and the exchanges recorded on it."""

    def __init__(self, proxy: RecordingProxy, token: str, start: float) -> None:
        self._proxy = proxy
        self.token = token
        #: ``time.perf_counter()`` at the trial's start: exchanges are timed from it.
        self.start = start
        self._exchanges: list[Exchange] = []
        self._spans: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._open = True

    def environment(self, resource_attributes: str | None = None) -> dict[str, str]:
        """What the agent's process gets: each API's base URL on this route, stand-in keys,
        the Agents SDK's trace upload off, and the OTLP receiver with this trial's name
        among ``resource_attributes`` (the value the agent's environment had, kept)."""
        origin = self._proxy.origin
        env = {}
        for api in APIS:
            env[BASE_URL_ENV[api]] = f"{origin}/t/{self.token}/{api}"
            for name in KEY_ENV[api]:
                env[name] = STAND_IN_KEY
        # The OpenAI Agents SDK uploads its own traces to OpenAI by default, whatever the
        # base URL: a trial's content (a hidden case's) must not leave the machine that way.
        env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = origin
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{origin}/v1/traces"
        mine = f"{TRIAL_ATTRIBUTE}={self.token}"
        env["OTEL_RESOURCE_ATTRIBUTES"] = f"{resource_attributes},{mine}" \
            if resource_attributes else mine
        return env

    @property
    def spans(self) -> list[dict[str, Any]]:
        """The spans the trial's agent exported, in OTLP/JSON form, as received."""
        with self._lock:
            return list(self._spans)

    def add_spans(self, spans: list[dict[str, Any]]) -> None:
        """Keep spans (bounded), unless the trial has ended."""
        with self._lock:
            if self._open:
                self._spans.extend(spans[:max(0, MAX_SPANS - len(self._spans))])

    @property
    def is_open(self) -> bool:
        """Whether the trial still runs (its requests are forwarded)."""
        return self._open

    def record(self, exchange: Exchange) -> None:
        """Keep an exchange, unless the trial has ended (a late one is dropped)."""
        with self._lock:
            if self._open:
                self._exchanges.append(exchange)

    def close(self) -> list[Exchange]:
        """End the route: later requests are refused; the exchanges recorded, in order."""
        with self._lock:
            self._open = False
            done = list(self._exchanges)
        self._proxy._forget(self.token)
        return sorted(done, key=lambda e: e.started)


class RecordingProxy:
    """The battery's loopback proxy (see the module doc): ``start``, routes, ``close``."""

    def __init__(self, upstreams: Mapping[str, Upstream]) -> None:
        self.upstreams = dict(upstreams)
        self._routes: dict[str, Route] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._client: httpx.AsyncClient | None = None
        self.port = 0

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    # --- life ------------------------------------------------------------------------------

    def start(self) -> None:
        """Bind a free loopback port and serve on it from a thread of its own."""
        import uvicorn

        # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on
        # connections whose socket says TCP, and with it on, an answer written in two
        # parts waits out the peer's delayed ACK — 40 ms a call.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="critical", lifespan="off",
                                access_log=False, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        # Bound already: connections wait in the backlog until the server takes them.
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            ready.set()
            try:
                loop.run_until_complete(self._server.serve(sockets=[sock]))
            finally:
                if self._client is not None:
                    loop.run_until_complete(self._client.aclose())
                loop.close()
                sock.close()

        self._thread = threading.Thread(target=serve, name="assay-proxy", daemon=True)
        self._thread.start()
        ready.wait()

    def close(self) -> None:
        """Stop serving; open streams are cut (their trials have ended by now)."""
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def open_route(self, start: float | None = None) -> Route:
        """A new route for one trial (timed from ``start``, ``time.perf_counter()``)."""
        token = secrets.token_urlsafe(12)
        route = Route(self, token, time.perf_counter() if start is None else start)
        with self._lock:
            self._routes[token] = route
        return route

    def _forget(self, token: str) -> None:
        with self._lock:
            self._routes.pop(token, None)

    def _route(self, token: str) -> Route | None:
        with self._lock:
            return self._routes.get(token)

    # --- serving ---------------------------------------------------------------------------

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route as Path

        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(routes=[Path("/t/{token}/{api}/{rest:path}", self._forward,
                                      methods=methods),
                                 Path("/v1/traces", self._traces, methods=["POST"])])

    async def _traces(self, request: Request) -> Response:
        """OTLP/HTTP: spans filed with the trial their resource names; others dropped."""
        from starlette.responses import JSONResponse, Response

        body = await request.body()
        if len(body) > MAX_OTLP_BODY:
            return JSONResponse({"message": "too large"}, status_code=413)
        kind = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        document = otlp_document(body, kind)
        if document is None:
            return JSONResponse({"message": "not OTLP traces (protobuf or JSON)"},
                                status_code=400)
        from ..otel import resource_spans

        filed: dict[str, list[dict[str, Any]]] = {}
        for attributes, span in resource_spans(document):
            token = attributes.get(TRIAL_ATTRIBUTE)
            if isinstance(token, str):
                filed.setdefault(token, []).append(span)
        for token, spans in filed.items():
            route = self._route(token)
            if route is not None:
                route.add_spans(spans)
        if kind == "application/json":
            return JSONResponse({})
        return Response(b"", media_type="application/x-protobuf")  # an empty response

    def _http(self) -> httpx.AsyncClient:
        import httpx

        if self._client is None:
            # No read timeout: a model may think for minutes, and the trial's own
            # timeout stops the agent; no pooled connection outlives a battery.
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None),
                                             follow_redirects=False, trust_env=False)
        return self._client

    async def _forward(self, request: Request) -> Response:
        from starlette.responses import JSONResponse, StreamingResponse

        token, api = request.path_params["token"], request.path_params["api"]
        route = self._route(token)
        if route is None or not route.is_open:
            return JSONResponse({"error": {"message": "this trial has ended: its route is "
                                           "closed"}}, status_code=410)
        upstream = self.upstreams.get(api)
        if upstream is None:
            return JSONResponse({"error": {"message": f"no API {api!r} here: one of "
                                           f"{', '.join(APIS)}"}}, status_code=404)
        started = time.perf_counter()
        body = await request.body()
        query = clean_query(request.url.query)
        url = f"{upstream.base_url}/{request.path_params['rest']}" + (f"?{query}" if query
                                                                      else "")
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        headers.append(("accept-encoding", "identity"))  # bodies recorded as sent
        if upstream.key is not None:
            name, form = _KEY_HEADER[api]
            headers.append((name, form.format(upstream.key)))
        # What was sent, the answer's fields filled in as it comes.
        sent = Exchange(method=request.method, url=url,
                        request_headers=kept_headers(request.headers.items()),
                        request_body=bytes(body[:MAX_BODY]),
                        request_truncated=len(body) > MAX_BODY, started=started - route.start)
        client = self._http()
        try:
            answer = await client.send(client.build_request(request.method, url,
                                                            headers=headers, content=body),
                                       stream=True)
        except Exception as error:  # the upstream down or refusing: said, and recorded
            why = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            why = KeyScrub(upstream.key).text(why)
            route.record(replace(sent, error=f"upstream {upstream.base_url} failed: {why}",
                                 complete=False, duration_s=time.perf_counter() - started))
            return JSONResponse({"error": {"message": f"assay's proxy could not reach "
                                           f"{upstream.base_url}: {why}",
                                           "type": "upstream_unreachable"}}, status_code=502)
        scrub = KeyScrub(upstream.key)
        answered = [(k, scrub.text(v)) for k, v in answer.headers.items()]
        back = [(k, v) for k, v in answered if k.lower() not in _HOP_BACK]
        return StreamingResponse(self._relay(answer, answered, scrub, route, sent, started),
                                 status_code=answer.status_code,
                                 headers=dict(_merged(back)))

    async def _relay(self, answer: httpx.Response, answered: list[tuple[str, str]],
                     scrub: KeyScrub, route: Route, sent: Exchange,
                     started: float) -> AsyncIterator[bytes]:
        """The upstream's body, chunk by chunk as it comes, the key cut out of it, kept
        (bounded) on the way: the record holds what the agent got."""
        kept = bytearray()
        cut = complete = False

        def keep(piece: bytes) -> bytes:
            nonlocal cut
            room = MAX_BODY - len(kept)
            if room > 0:
                kept.extend(piece[:room])
            cut = cut or len(piece) > room
            return piece

        try:
            async for chunk in answer.aiter_raw():
                piece = keep(scrub.piece(chunk))
                if piece:
                    yield piece
            rest = keep(scrub.rest())
            if rest:
                yield rest
            complete = True
        finally:
            # Recorded before the await below: a stream the agent abandoned is cancelled
            # here, and a cancelled await would lose the record.
            route.record(replace(
                sent, status=answer.status_code, response_headers=kept_headers(answered),
                response_body=bytes(kept), response_truncated=cut, complete=complete,
                duration_s=time.perf_counter() - started))
            await answer.aclose()


class KeyScrub:
    """Cuts one key out of a body that comes in pieces, wherever the pieces split it.

    An upstream may quote the key it was sent (a gateway's "Incorrect API key
    provided: Bearer sk-…"); the agent, which holds only the stand-in, must not
    learn it from the answer, nor the record keep it. Each piece is passed on at
    once, but for its end when that end could begin the key: those bytes (fewer
    than the key's length) wait for the next piece, or the body's end. A stream
    that holds no key is held up by nothing: an SSE event ends in a blank line,
    which begins no key.
    """

    def __init__(self, key: str | None) -> None:
        self._key = key.encode() if key is not None and len(key) >= MIN_SECRET else b""
        #: The bytes the key is made of: a piece ending in another begins no key.
        self._alphabet = frozenset(self._key)
        self._held = b""

    def text(self, value: str) -> str:
        """``value`` with the key replaced."""
        return value.replace(self._key.decode(), KEY_CUT) if self._key else value

    def piece(self, chunk: bytes) -> bytes:
        """What of ``chunk`` (after what was held) can go on now, the key replaced."""
        if not self._key:
            return chunk
        data = self._held + chunk if self._held else chunk
        if self._key in data:
            data = data.replace(self._key, KEY_CUT.encode())
        held = _key_begun(data, self._key) if data and data[-1] in self._alphabet else 0
        self._held = data[len(data) - held:] if held else b""
        return data[:len(data) - held]

    def rest(self) -> bytes:
        """The bytes still held at the body's end (they began no key after all)."""
        held, self._held = self._held, b""
        return held


def _key_begun(data: bytes, key: bytes) -> int:
    """How many bytes at the end of ``data`` are a beginning of ``key`` (0: none)."""
    at = data.find(key[:1], max(0, len(data) - len(key) + 1))
    while at != -1:
        if key.startswith(data[at:]):
            return len(data) - at
        at = data.find(key[:1], at + 1)
    return 0


def _merged(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Header pairs with repeated names joined (Starlette's response takes a mapping)."""
    joined: dict[str, str] = {}
    for name, value in pairs:
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    return list(joined.items())


def upstreams_here(given: Mapping[str, str | None]) -> dict[str, Upstream]:
    """:func:`upstreams_from` this process's environment."""
    return upstreams_from(os.environ, given)


def otlp_document(body: bytes, kind: str) -> dict[str, Any] | None:
    """An OTLP export request as its OTLP/JSON document; None when it is not one.

    Protobuf (the SDKs' default) is decoded with OpenTelemetry's own message
    types and turned into the JSON mapping, so one reader (``otel:``'s)
    serves files and live spans alike.
    """
    import json

    if kind == "application/json":
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        decoded: dict[str, Any] = MessageToDict(message)
    except Exception:  # an undecodable body is refused, whatever the decoder raised
        return None
    # The JSON mapping writes trace and span ids as base64; OTLP/JSON as hex.
    for resource in decoded.get("resourceSpans") or []:
        for scope in resource.get("scopeSpans") or []:
            for span in scope.get("spans") or []:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if isinstance(span.get(key), str):
                        span[key] = _hex(span[key])
    return decoded


def _hex(value: str) -> str:
    import base64
    import binascii

    try:
        return base64.b64decode(value).hex()
    except (binascii.Error, ValueError):
        return value

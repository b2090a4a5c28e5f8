"""See, per trial, every HTTP exchange a ``python:`` agent's own code makes (SPEC §15).

An agent built with a framework talks to its model through the HTTP client
its SDK uses: httpx2 under ``openai`` 3.x and ``anthropic`` 2.x (so under
the OpenAI Agents SDK, langchain-openai and pydantic-ai too), httpx, and
aiohttp for ``google-genai``'s async calls. :func:`install` hooks those
clients once per process; a trial sets its :class:`Recorder` in a context
variable (:func:`recording`), and a hooked client records an exchange only
when it runs in a context that carries a recorder. Everything else — code
outside a trial, assay's own judges and ``openai:`` target — finds no
recorder and goes straight through at the cost of one context-variable read.

Where the hooks sit, and why there:

- **httpx and httpx2**: ``Client._send_single_request`` and
  ``AsyncClient._send_single_request``. Every request a client sends on the
  wire passes there exactly once — each redirect hop, each retry the SDK
  makes (it calls ``send`` again), each auth round — and so does a request
  through a transport the user passed in (a custom, mounted, ASGI or
  aiohttp-backed one), which a hook on ``HTTPTransport`` would miss. ``send``
  would be wrong: google-genai's async client delegates ``send`` to an inner
  client, which would count every call twice.
- **aiohttp**: a client middleware (aiohttp >= 3.12), put innermost in the
  chain by a hook on ``ClientSession._request`` for requests made inside a
  trial. The middleware's handler sends one request on the wire, connect
  included (so a refused connection is seen), once per redirect hop and
  per retry. The response body is teed where aiohttp's ``StreamReader``
  hands bytes to its reader (``_read_nowait_chunk``), by giving that one
  reader a subclass with the same layout.

While a hooked request is on the wire the context variable is cleared, so
a client that sends through another (openai's aiohttp-backed httpx client,
a proxy transport built on a second client) is recorded once, at the outer
one.

Responses are recorded as the agent reads them, never ahead: the body is
teed chunk by chunk as the client hands it over, kept up to ``MAX_BODY``
(then cut and marked), and the exchange is finished when the body has been
read to its end (``complete``) or the response is closed first (an
abandoned stream, ``complete`` False) or breaks (``error``). A request that
gets no response (connection refused) is kept with ``status`` None and the
error. Nothing the agent sees changes: the same bytes in the same chunks,
the same exceptions, re-raised as they came.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.abc
import inspect
import sys
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .exchange import MAX_BODY, Exchange, kept_headers, secret_param

__all__ = ["Recorder", "current", "hooked", "install", "recording"]

#: The recorder of the trial whose code is running; None outside any trial.
current: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "assay_wire_recorder", default=None)

#: Why an exchange still under way when its trial ended has no response.
UNANSWERED = "the trial ended before the response came"


class Recorder:
    """The exchanges of one trial, in the order their requests were sent.

    ``started`` is the trial's start on ``time.perf_counter``'s clock; an
    exchange's ``started`` is counted from it. Once :meth:`close` has run
    the record is fixed: an exchange that finishes later (a background task
    that outlived its trial) is dropped, and new requests are not recorded.
    """

    __slots__ = ("started", "closed", "_calls", "_lock", "_final")

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.closed = False
        self._calls: list[_Call] = []
        self._lock = threading.Lock()
        self._final: list[Exchange] | None = None

    def exchanges(self) -> list[Exchange]:
        """Every exchange so far; one still under way as it stands now (``complete`` False)."""
        with self._lock:
            if self._final is not None:
                return list(self._final)
            calls = list(self._calls)
        now = time.perf_counter()
        return [call.now(now) for call in calls]

    def close(self) -> list[Exchange]:
        """Fix the record: what finished, and what was under way as it stood. Idempotent."""
        with self._lock:
            if self._final is not None:
                return list(self._final)
            self.closed = True
            calls = self._calls
            if not calls:  # the agent sent nothing (most trials): nothing to fix
                self._final = []
                return []
        now = time.perf_counter()
        final = [call.now(now) for call in calls]
        with self._lock:
            self._final = final
            self._calls = []
        for call in calls:
            if call.reader is not None:  # an aiohttp body nobody read to its end
                _readers.pop(call.reader, None)
        return list(final)

    def _begin(self, method: str, url: str, headers: Iterable[Any]) -> _Call | None:
        if self.closed:  # a finished trial's context: no work at all
            return None
        call = _Call(self, method, url, headers)
        with self._lock:
            if self.closed:
                return None
            self._calls.append(call)
        return call

    def _finished(self, call: _Call, exchange: Exchange) -> None:
        with self._lock:
            if call.done is None:
                call.done = exchange


@contextmanager
def recording(recorder: Recorder | None = None) -> Iterator[Recorder]:
    """Record the exchanges made in this context (and in tasks and threads it hands on).

    On leaving, the recorder is closed: its record is fixed (see :class:`Recorder`).
    """
    recorder = Recorder() if recorder is None else recorder
    token = current.set(recorder)
    try:
        yield recorder
    finally:
        current.reset(token)
        recorder.close()


class _Call:
    """One exchange under way: the request as sent, the response as read so far."""

    __slots__ = ("recorder", "method", "url", "request_headers", "request_body",
                 "request_truncated", "status", "response_headers", "body", "truncated",
                 "decoded", "t0", "last", "done", "reader")

    def __init__(self, recorder: Recorder, method: str, url: str,
                 headers: Iterable[Any]) -> None:
        self.recorder = recorder
        self.t0 = self.last = time.perf_counter()
        self.method = method
        self.url = _kept_url(url)
        self.request_headers = kept_headers(headers)
        self.request_body: bytes | bytearray = b""
        self.request_truncated = False
        self.status: int | None = None
        self.response_headers: tuple[tuple[str, str], ...] = ()
        self.body = bytearray()
        self.truncated = False
        #: The body was decoded by the client already (aiohttp's auto_decompress).
        self.decoded = False
        self.done: Exchange | None = None
        #: The id of the aiohttp StreamReader teed for this call, if any.
        self.reader: int | None = None

    def sent(self, content: bytes) -> None:
        """The whole request body, known before sending."""
        if len(content) > MAX_BODY:
            self.request_body, self.request_truncated = content[:MAX_BODY], True
        else:
            self.request_body = content

    def sending(self, chunk: bytes) -> None:
        """One chunk of a streamed request body."""
        body = self.request_body
        if not isinstance(body, bytearray):
            body = self.request_body = bytearray(body)
        room = MAX_BODY - len(body)
        if len(chunk) > room:
            self.request_truncated = True
            chunk = chunk[:room]
        body += chunk

    def responded(self, status: int, headers: Iterable[Any]) -> None:
        self.status = status
        self.response_headers = kept_headers(headers)
        self.last = time.perf_counter()

    def feed(self, chunk: bytes) -> None:
        """Bytes of the response body, as the client handed them to the agent."""
        self.last = time.perf_counter()
        body = self.body
        room = MAX_BODY - len(body)
        if len(chunk) <= room:
            body += chunk
        elif not self.truncated:
            self.truncated = True
            body += chunk[:room]

    def finish(self, complete: bool, error: BaseException | str | None = None) -> None:
        """The response ended (read to its end, closed first, or broken)."""
        if self.done is not None or self.recorder.closed:
            return  # finished already, or its trial is over and its record fixed
        if error is not None or complete:
            self.last = time.perf_counter()
        try:
            if isinstance(error, BaseException):
                error = _describe(error)
            exchange = self._exchange(complete, error, self.last)
        except Exception:  # noqa: BLE001 - the agent's read goes on; this one stays open
            return
        self.recorder._finished(self, exchange)

    def failed(self, exc: BaseException) -> None:
        """No response came: the request failed on the way (or was cancelled)."""
        self.finish(False, exc)

    def now(self, now: float) -> Exchange:
        """The exchange if finished; else as it stands, marked incomplete."""
        done = self.done
        if done is not None:
            return done
        error = UNANSWERED if self.status is None else None
        return self._exchange(False, error, self.last if self.status is not None else now)

    def _exchange(self, complete: bool, error: str | None, end: float) -> Exchange:
        body, headers, truncated = bytes(self.body), self.response_headers, self.truncated
        if body or self.decoded:
            body, headers, cut = _decoded(body, headers, already=self.decoded)
            truncated = truncated or cut
        return Exchange(
            method=self.method, url=self.url, request_headers=self.request_headers,
            request_body=bytes(self.request_body), status=self.status,
            response_headers=headers, response_body=body,
            request_truncated=self.request_truncated, response_truncated=truncated,
            complete=complete, error=error,
            started=round(self.t0 - self.recorder.started, 6),
            duration_s=round(max(0.0, end - self.t0), 6))


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception that cannot say itself is still named
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _kept_url(url: str) -> str:
    """The URL without a password or a key in its query (``?key=`` is Gemini's way)."""
    if "@" not in url and "?" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.partition("?")[0]
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_param(name) for name, _ in pairs):
            query = urlencode([(name, "redacted" if secret_param(name) else value)
                               for name, value in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _decoded(body: bytes, headers: tuple[tuple[str, str], ...], *,
             already: bool) -> tuple[bytes, tuple[tuple[str, str], ...], bool]:
    """The body with its content-encoding undone, as the agent's client reads it.

    An exchange's body is always the content (the readers parse it as it
    is); once decoded, the ``content-encoding`` header is left out so nobody
    decodes it twice. gzip and deflate are undone here, bounded by
    ``MAX_BODY`` (a small bomb cannot grow past it); an encoding this
    Python cannot undo (br, zstd without their modules) or a body that does
    not decode keeps its bytes and its header: a reader sees it for what it
    is and keeps it as an ``http`` event.
    """
    encoding = next((value for name, value in headers if name == "content-encoding"), None)
    if encoding is None:
        return body, headers, False
    stripped = tuple(pair for pair in headers if pair[0] != "content-encoding")
    if already:
        return body, stripped, False
    steps = [step.strip().lower() for step in encoding.split(",") if step.strip()]
    cut = False
    try:
        for step in reversed(steps):
            if step == "identity":
                continue
            if step in ("gzip", "x-gzip"):
                body, more = _inflate(body, zlib.MAX_WBITS | 32)
            elif step == "deflate":
                try:
                    body, more = _inflate(body, zlib.MAX_WBITS)
                except zlib.error:  # a raw deflate stream, as some servers send
                    body, more = _inflate(body, -zlib.MAX_WBITS)
            else:
                return body, headers, False
            cut = cut or more
    except zlib.error:
        return body, headers, False
    return body, stripped, cut


def _inflate(data: bytes, wbits: int) -> tuple[bytes, bool]:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(data, MAX_BODY)
    return out, bool(inflater.unconsumed_tail)


# --- httpx and httpx2 ----------------------------------------------------------------------

def _begin_httpx(recorder: Recorder, request: Any) -> _Call | None:
    call = recorder._begin(request.method, str(request.url), request.headers.raw)
    if call is not None:
        content = getattr(request, "_content", None)
        if isinstance(content, bytes):
            call.sent(content)
    return call


def _responded(call: _Call, response: Any, tee: Any) -> None:
    """Headers are in: tee the body (or take it whole, when the transport read it already)."""
    # Whatever goes wrong here is never the agent's problem: the exchange stays open.
    with contextlib.suppress(Exception):
        call.responded(response.status_code, response.headers.raw)
        if hasattr(response, "_content"):  # a transport that answered with the body read
            call.decoded = True  # httpx undid its encoding as it read it
            call.feed(response._content)
            call.finish(True)
        else:
            response.stream = tee(response.stream, call)


def _hook_httpx(module: Any) -> bool:
    """Hook one httpx-like library (httpx or httpx2: the same classes, two namespaces).

    False, and nothing hooked, when the library is not shaped as expected.
    """
    try:
        for cls in (module.Client, module.AsyncClient):
            if not callable(cls.__dict__.get("_send_single_request")):
                return False
    except AttributeError:
        return False
    sync_base: Any = module.SyncByteStream
    async_base: Any = module.AsyncByteStream

    class RequestTee(sync_base):  # type: ignore[misc]
        """A streamed request body, teed as the transport sends it."""

        def __init__(self, inner: Any, call: _Call) -> None:
            self.inner, self.call = inner, call

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                self.call.sending(chunk)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class AsyncRequestTee(async_base):  # type: ignore[misc]
        def __init__(self, inner: Any, call: _Call) -> None:
            self.inner, self.call = inner, call

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.inner:
                self.call.sending(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class ResponseTee(sync_base):  # type: ignore[misc]
        """A response body, teed chunk by chunk as the client reads it."""

        def __init__(self, inner: Any, call: _Call) -> None:
            self.inner, self.call = inner, call

        @property
        def elapsed(self) -> Any:  # httpx2 reads the response's elapsed time here
            return getattr(self.inner, "elapsed", None)

        def __iter__(self) -> Iterator[bytes]:
            call = self.call
            try:
                for chunk in self.inner:
                    call.feed(chunk)
                    yield chunk
            except GeneratorExit:
                call.finish(False)
                raise
            except BaseException as exc:
                call.finish(False, exc)
                raise
            call.finish(True)

        def close(self) -> None:
            try:
                self.inner.close()
            finally:
                self.call.finish(False)  # a no-op once the body was read to its end

    class AsyncResponseTee(async_base):  # type: ignore[misc]
        def __init__(self, inner: Any, call: _Call) -> None:
            self.inner, self.call = inner, call

        @property
        def elapsed(self) -> Any:
            return getattr(self.inner, "elapsed", None)

        async def __aiter__(self) -> AsyncIterator[bytes]:
            call = self.call
            chunks = self.inner.__aiter__()
            try:
                async for chunk in chunks:
                    call.feed(chunk)
                    yield chunk
            except GeneratorExit:
                call.finish(False)
                raise
            except BaseException as exc:
                call.finish(False, exc)
                raise
            else:
                call.finish(True)
            finally:
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:  # as httpx's own stream does: no generator left open
                    await aclose()

        async def aclose(self) -> None:
            try:
                await self.inner.aclose()
            finally:
                self.call.finish(False)

    def sync_hook(original: Any) -> Any:
        @functools.wraps(original)
        def _send_single_request(client: Any, request: Any) -> Any:
            recorder = current.get()
            if recorder is None:
                return original(client, request)
            try:
                call = _begin_httpx(recorder, request)
            except Exception:  # noqa: BLE001 - never the agent's problem
                call = None
            if call is None:
                return original(client, request)
            stream = request.stream
            teed = not hasattr(request, "_content") and isinstance(stream, sync_base)
            if teed:
                request.stream = RequestTee(stream, call)
            token = current.set(None)  # a client under this one records nothing
            try:
                response = original(client, request)
            except BaseException as exc:
                call.failed(exc)
                raise
            finally:
                current.reset(token)
                if teed:
                    request.stream = stream
            _responded(call, response, ResponseTee)
            return response

        _send_single_request.__assay_wire__ = True  # type: ignore[attr-defined]
        return _send_single_request

    def async_hook(original: Any) -> Any:
        @functools.wraps(original)
        async def _send_single_request(client: Any, request: Any) -> Any:
            recorder = current.get()
            if recorder is None:
                return await original(client, request)
            try:
                call = _begin_httpx(recorder, request)
            except Exception:  # noqa: BLE001 - never the agent's problem
                call = None
            if call is None:
                return await original(client, request)
            stream = request.stream
            teed = not hasattr(request, "_content") and isinstance(stream, async_base)
            if teed:
                request.stream = AsyncRequestTee(stream, call)
            token = current.set(None)
            try:
                response = await original(client, request)
            except BaseException as exc:
                call.failed(exc)
                raise
            finally:
                current.reset(token)
                if teed:
                    request.stream = stream
            _responded(call, response, AsyncResponseTee)
            return response

        _send_single_request.__assay_wire__ = True  # type: ignore[attr-defined]
        return _send_single_request

    for cls, hook in ((module.Client, sync_hook), (module.AsyncClient, async_hook)):
        original = cls.__dict__["_send_single_request"]
        if not getattr(original, "__assay_wire__", False):
            cls._send_single_request = hook(original)
    return True


# --- aiohttp ---------------------------------------------------------------------------------

#: aiohttp response readers being teed, by id (a StreamReader has slots and no weak references).
_readers: dict[int, _Call] = {}


def _hook_aiohttp(aiohttp: Any) -> bool:
    session: Any = aiohttp.ClientSession
    original = session.__dict__["_request"]
    if getattr(original, "__assay_wire__", False):
        return True
    if "middlewares" not in inspect.signature(original).parameters:
        return False  # before aiohttp 3.12: no middlewares, nowhere to see one request
    from aiohttp import client_reqrep
    from aiohttp.streams import StreamReader

    #: What aiohttp sets on a body the client closes or releases before its end.
    closed_by_client = getattr(client_reqrep, "_CONNECTION_CLOSED_EXCEPTION", None)

    class TeeReader(StreamReader):
        """The same reader with a tee where its bytes go to the agent (same slots, no state)."""

        __slots__ = ()

        def _read_nowait_chunk(self, n: int) -> bytes:
            data: bytes = super()._read_nowait_chunk(n)
            call = _readers.get(id(self))
            if call is not None:
                call.feed(data)
                if self._eof and not self._buffer:
                    _reader_ended(self, call)
            return data

        def feed_eof(self) -> None:
            super().feed_eof()
            call = _readers.get(id(self))
            if call is not None and not self._buffer:
                _reader_ended(self, call)

        def set_exception(self, exc: BaseException, *args: Any) -> None:
            super().set_exception(exc, *args)
            call = _readers.pop(id(self), None)
            if call is not None:  # broken, or closed by the agent first (not an error)
                call.finish(False, None if exc is closed_by_client else exc)

    def _reader_ended(reader: Any, call: _Call) -> None:
        _readers.pop(id(reader), None)
        call.finish(True)

    async def middleware(request: Any, handler: Any) -> Any:
        recorder = current.get()
        call = None
        if recorder is not None:
            try:
                call = recorder._begin(request.method, str(request.url), request.headers.items())
                if call is not None:
                    value = getattr(request.body, "_value", b"")
                    if isinstance(value, bytes):
                        call.sent(value)
                    else:  # a file or a stream: not teed, and said so
                        call.request_truncated = True
            except Exception:  # noqa: BLE001 - never the agent's problem
                call = None
        if call is None:
            return await handler(request)
        try:
            response = await handler(request)
        except BaseException as exc:
            call.failed(exc)
            raise
        # Never the agent's problem: the exchange stays open.
        with contextlib.suppress(Exception):
            tee(call, response)
        return response

    def tee(call: _Call, response: Any) -> None:
        call.responded(response.status, response.raw_headers)
        content = response.content
        # aiohttp undoes the content-encoding itself unless told not to.
        call.decoded = getattr(content, "total_compressed_bytes", None) is not None
        if type(content) is StreamReader:
            exception = content.exception()
            if exception is not None:
                call.finish(False, exception)
            elif content.at_eof():
                call.finish(True)
            else:
                content.__class__ = TeeReader
                call.reader = id(content)
                _readers[id(content)] = call
        elif content is None or content.at_eof():  # no body (HEAD, 204, 304)
            call.finish(True)
        else:
            call.finish(False, "the body was not observed (a reader aiohttp does not make)")

    @functools.wraps(original)
    async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        if current.get() is not None:
            given = kwargs.get("middlewares")
            chain = getattr(self, "_middlewares", ()) if given is None else given
            kwargs["middlewares"] = (*chain, middleware)  # innermost: one request on the wire
        return await original(self, method, str_or_url, **kwargs)

    _request.__assay_wire__ = True  # type: ignore[attr-defined]
    session._request = _request
    return True


# --- installing ------------------------------------------------------------------------------

#: How each client is hooked, by the name of its top-level module.
_HOOKS: dict[str, Callable[[Any], bool]] = {
    "httpx2": _hook_httpx, "httpx": _hook_httpx, "aiohttp": _hook_aiohttp}

_install_lock = threading.RLock()
_installed = False
_hooked: set[str] = set()


def _apply(name: str, module: Any) -> None:
    with _install_lock:
        if name in _hooked:
            return
        # A client shaped otherwise is left as it is.
        with contextlib.suppress(Exception):
            if _HOOKS[name](module):
                _hooked.add(name)


class _HookOnImport(importlib.abc.MetaPathFinder):
    """Hooks a client the moment it is first imported (an agent importing its SDK late).

    Importing every client up front would cost a battery ~0.2 s even when its
    agent uses none of them.
    """

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _HOOKS or fullname in _hooked:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module: Any) -> None:
            run(module)
            _apply(fullname, module)

        with contextlib.suppress(AttributeError, TypeError):
            loader.exec_module = exec_module  # type: ignore[method-assign,union-attr]
        return spec


def install() -> None:
    """Hook the HTTP clients; once per process, from any thread, idempotent.

    A client already imported is hooked now, one imported later as soon as
    it is (see :class:`_HookOnImport`). Outside a trial the hooks only call
    through; they stay for the life of the process.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
        later = False
        for name in _HOOKS:
            module = sys.modules.get(name)
            if module is not None:
                _apply(name, module)
            else:
                later = True
        if later:
            sys.meta_path.insert(0, _HookOnImport())


def hooked() -> frozenset[str]:
    """The clients hooked so far (``httpx2``, ``httpx``, ``aiohttp``)."""
    with _install_lock:
        return frozenset(_hooked)

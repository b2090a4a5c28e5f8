"""One exchange read: which model API it spoke, and what its request and response say.

The API is recognised by method and path — never by host: the same request
goes to OpenAI, to a local vLLM, to a gateway or through assay's recording
proxy — and then by the request body's shape, so that a ``POST
…/responses`` to a survey service is not taken for a model:

- ``POST …/chat/completions`` with ``messages``: OpenAI Chat Completions;
- ``POST …/responses`` with ``input`` (or ``previous_response_id``): OpenAI Responses;
- ``POST …/v1/messages`` with ``messages``: Anthropic Messages;
- ``POST …/models/MODEL:generateContent`` or ``:streamGenerateContent``
  with ``contents``: Gemini (Google AI and Vertex AI paths alike).

A request that is not JSON at all (cut at ``MAX_BODY``, binary) on one of
those paths is still a model call, read no further. The response is read
streamed when it says ``text/event-stream`` or begins like one, else as
JSON; a gzip or deflate body is inflated (to ``MAX_BODY`` at most). Reading
never raises: whatever could not be read is a ``problem`` on the
:class:`ModelCall`, in a few words and never the body itself.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable
from dataclasses import replace
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ...model.values import one_line
from . import chat_api, gemini_api, messages_api, responses_api
from .calls import (
    CHAT,
    GEMINI,
    MESSAGES,
    RESPONSES,
    STOPPED,
    Answered,
    Asked,
    ModelCall,
    loads,
    mapping,
)
from .exchange import MAX_BODY, Exchange, secret_param
from .sse import sse_events

#: The longest URL an event keeps, and the longest note.
MAX_URL = 300
MAX_NOTE = 300

_GEMINI_PATH = re.compile(r"/models/([^/]+):(generateContent|streamGenerateContent)$")

#: A path segment that may be a token: 16 or more characters of a token's alphabet, letters
#: and digits both.
_TOKEN = re.compile(r"(?=[^/]*[0-9])(?=[^/]*[A-Za-z])[A-Za-z0-9_\-:.~%+=]{16,}")

_SHAPED: dict[str, Callable[[dict[str, Any]], bool]] = {
    CHAT: chat_api.shaped, RESPONSES: responses_api.shaped, MESSAGES: messages_api.shaped,
    GEMINI: gemini_api.shaped,
}
_WHOLE: dict[str, Callable[[Any], Answered]] = {
    CHAT: chat_api.read_response, RESPONSES: responses_api.read_response,
    MESSAGES: messages_api.read_response, GEMINI: gemini_api.read_response,
}
_STREAM = {
    CHAT: chat_api.read_stream, RESPONSES: responses_api.read_stream,
    MESSAGES: messages_api.read_stream, GEMINI: gemini_api.read_stream,
}


def api_of(method: str, url: str) -> tuple[str | None, str | None]:
    """The model API a request's method and path speak, and the model a Gemini path names."""
    if not isinstance(method, str) or method.upper() != "POST" or not isinstance(url, str):
        return None, None
    try:
        path = urlsplit(url).path.rstrip("/")
    except ValueError:
        return None, None
    if path.endswith("/chat/completions"):
        return CHAT, None
    if path.endswith("/responses"):
        return RESPONSES, None
    if path.endswith("/v1/messages"):
        return MESSAGES, None
    gemini = _GEMINI_PATH.search(path)
    if gemini is not None:
        return GEMINI, unquote(gemini.group(1)) or None
    return None, None


def read_exchange(exchange: Exchange) -> ModelCall | None:
    """What a model exchange says; None when the exchange is not one of a model API."""
    try:
        return _read(exchange)
    except Exception as exc:  # noqa: BLE001 - reading never raises, whatever came in
        try:
            api, model = api_of(exchange.method, exchange.url)
        except Exception:  # noqa: BLE001
            return None
        if api is None:
            return None
        return ModelCall(api, str(exchange.method), safe_url(exchange.url), exchange.status,
                         requested_model=model, request_read=False, whole=False,
                         problem=f"assay could not read it ({type(exc).__name__})")


def _read(exchange: Exchange) -> ModelCall | None:
    api, path_model = api_of(exchange.method, exchange.url)
    if api is None:
        return None
    raw = _inflated(exchange.request_body, exchange.header("content-encoding", response=False))
    try:
        request: Any = loads(raw)
    except ValueError:
        request = None
    if isinstance(request, dict):
        if not _SHAPED[api](request):
            return None  # JSON of another kind on a path a model API also uses
    elif api == RESPONSES and not _responses_like(exchange.response_body):
        return None  # "…/responses" is a common path: unread, it must answer like the API
    notes: list[str] = []
    if isinstance(request, dict):
        asked = gemini_api.read_request(request, path_model) if api == GEMINI else \
            _read_request(api, request)
    else:
        asked = Asked(path_model)
        notes.append(f"the request was cut at {_size(len(exchange.request_body))}"
                     if exchange.request_truncated else "the request is not JSON")
    call = ModelCall(
        api=api, method="POST", url=safe_url(exchange.url), status=exchange.status,
        started=_seconds(exchange.started),
        ended=_seconds(exchange.started) + _seconds(exchange.duration_s),
        requested_model=asked.model, tool_results=asked.results, history=asked.history,
        request_read=isinstance(request, dict))
    if exchange.status is None:
        notes.append(f"no answer: {one_line(exchange.error or 'the connection failed', 160)}")
        return _noted(call, notes)
    if not call.answered:
        notes.append(_failure(exchange))
        return _noted(call, notes)
    answered, streamed = _read_response(api, exchange)
    call = replace(call, served_model=answered.model, text=answered.text,
                   tool_calls=answered.tool_calls, input_tokens=answered.input_tokens,
                   output_tokens=answered.output_tokens, finish_reason=answered.finish_reason,
                   whole=answered.whole, streamed=streamed)
    if answered.problem is not None:
        notes.append(answered.problem)
    return _noted(call, notes)


def _read_request(api: str, request: dict[str, Any]) -> Asked:
    if api == CHAT:
        return chat_api.read_request(request)
    if api == RESPONSES:
        return responses_api.read_request(request)
    return messages_api.read_request(request)


def _read_response(api: str, exchange: Exchange) -> tuple[Answered, bool]:
    """What the response says, and whether it was streamed."""
    cut = exchange.response_truncated or not exchange.complete
    raw = _inflated(exchange.response_body, exchange.header("content-encoding"))
    text = _text(raw, cut=cut)
    if text is None:
        return Answered(whole=False, problem=f"the response is not UTF-8 text "
                                             f"({_size(len(raw))})"), False
    kind = (exchange.header("content-type") or "").lower()
    start = text.lstrip()[:6]
    streamed = "text/event-stream" in kind or (
        not start.startswith(("{", "[")) and start.startswith(("data:", "event:", ":", "id:")))
    why = _cut_note(exchange)
    if streamed:
        answered = _STREAM[api](sse_events(text))
        if cut and answered.problem == STOPPED:  # the exchange knows why it stopped
            answered = replace(answered, problem=why)
        return answered, True
    if not text.strip():
        return Answered(whole=False, problem=why if cut else "the response is empty"), False
    try:
        data = loads(text)
    except ValueError:
        return Answered(whole=False, problem=why if cut else
                        f"the response is not JSON ({_size(len(raw))})"), False
    if not isinstance(data, dict) and not (api == GEMINI and isinstance(data, list)):
        return Answered(whole=False, problem="the response is not a JSON object"), False
    return _WHOLE[api](data), False


def _cut_note(exchange: Exchange) -> str:
    if exchange.response_truncated:
        return f"the response was cut at {_size(len(exchange.response_body))}"
    if exchange.error:
        return f"the response stopped before its end ({one_line(exchange.error, 120)})"
    return "the response stopped before its end"


def _noted(call: ModelCall, notes: list[str]) -> ModelCall:
    if not notes:
        return call
    return replace(call, problem=one_line("; ".join(notes), MAX_NOTE))


def _responses_like(body: bytes) -> bool:
    head = body[:65536]
    return b'"response.' in head or re.search(rb'"object"\s*:\s*"response"', head) is not None


def _inflated(body: bytes, encoding: str | None) -> bytes:
    """A gzip or deflate body inflated (to ``MAX_BODY`` at most); any other body as it is."""
    encoding = (encoding or "").lower()
    if not (body[:2] == b"\x1f\x8b" or "gzip" in encoding or "deflate" in encoding):
        return body
    for wbits in (47, -15):  # gzip or zlib (47 detects which), then raw deflate
        try:
            inflated = zlib.decompressobj(wbits).decompress(body, MAX_BODY)
        except zlib.error:
            continue
        if inflated:
            return inflated
    return body


def _text(raw: bytes, *, cut: bool) -> str | None:
    """The body as UTF-8 text; a character split by a cut is dropped. None when not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.reason == "unexpected end of data":
            try:
                return raw[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                return None
        return None


def _failure(exchange: Exchange) -> str:
    """An error answer in a few words: its status and the API's own message, never the body."""
    status = exchange.status or 0
    try:
        phrase = " " + HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    message = None
    try:
        data = loads(_inflated(exchange.response_body, exchange.header("content-encoding")))
    except ValueError:
        data = None
    if isinstance(data, list) and data:  # Gemini may wrap its error in an array
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error")
        message = mapping(error).get("message") if isinstance(error, dict) else error
        message = message if isinstance(message, str) else data.get("message")
    text = f"the model answered {status}{phrase}"
    if isinstance(message, str) and message.strip():
        text += ": " + one_line(message, 200)
    return text


def safe_url(url: str, *, opaque_path: bool = False) -> str:
    """``url`` with no credentials: no user or password, no secret query parameter, no fragment.

    ``https://generativelanguage.googleapis.com/v1beta/models/m:streamGenerateContent?alt=sse&key=K``
    becomes ``…:streamGenerateContent?alt=sse``. ``opaque_path`` also hides each
    path segment that looks like a token (16 characters or more, letters and
    digits): another service may take its key in the path (a chat bot's
    ``/bot<token>/``, a webhook's secret). Cut to ``MAX_URL`` characters.
    """
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        port = parts.port
        query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
                 if not secret_param(name)]
    except ValueError:
        return "(a URL assay could not read)"
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    path = parts.path
    if opaque_path:
        path = "/".join("…" if _TOKEN.search(segment) else segment for segment in path.split("/"))
    text = urlunsplit((parts.scheme, netloc, path, urlencode(query), ""))
    return one_line(text, MAX_URL)


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"

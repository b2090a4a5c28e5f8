"""One HTTP exchange between an agent and its model, as seen on the wire.

The value every observer makes (in-process capture, the recording proxy)
and every reader takes. Bodies are bounded (``MAX_BODY``): a 50 MB answer
keeps its first part, says it was cut, and costs no more memory than that.
Headers that carry a credential are never kept (``SECRET_HEADERS``): an
exchange can go into a trace, and a trace into a report.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: The most of one body an exchange keeps (request or response): a model's answer,
#: streamed or not, is far below it; a 50 MB one is cut and marked so.
MAX_BODY = 4 * 1024 * 1024

#: Headers never kept: they carry keys or session credentials.
SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
    "cookie", "set-cookie", "openai-organization", "openai-project",
})


#: Query parameters that carry a credential: Gemini takes its key as ``key=``, presigned
#: URLs carry signatures and tokens. Any name containing one of these words is one.
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "signature", "credential",
                 "auth", "session", "jwt")
_SECRET_NAMES = frozenset({"sig", "code", "x-amz-signature", "x-goog-signature"})


def secret_param(name: str) -> bool:
    """Whether a query parameter of this name may carry a credential (never kept)."""
    name = name.lower()
    return name in _SECRET_NAMES or any(word in name for word in _SECRET_WORDS)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its response (or why there was none).

    Header names are lower case, in the order sent; ``SECRET_HEADERS`` are
    left out. ``status`` is None when no response came (the connection
    failed: ``error`` says why). ``complete`` is False when the response
    body stopped before its end (a stream cut mid-way, an error while
    reading): what arrived is kept. ``started`` is seconds since the trial
    began; ``duration_s`` runs to the last byte read.
    """

    method: str
    url: str
    request_headers: tuple[tuple[str, str], ...] = ()
    request_body: bytes = b""
    status: int | None = None
    response_headers: tuple[tuple[str, str], ...] = ()
    response_body: bytes = b""
    request_truncated: bool = False
    response_truncated: bool = False
    complete: bool = True
    error: str | None = None
    started: float = 0.0
    duration_s: float = 0.0

    def header(self, name: str, *, response: bool = True) -> str | None:
        """The first value of header ``name`` (lower case) of the response or the request."""
        headers = self.response_headers if response else self.request_headers
        return next((value for key, value in headers if key == name), None)


def kept_headers(pairs: Iterable[Any]) -> tuple[tuple[str, str], ...]:
    """Header pairs as an exchange keeps them: names lower case, credentials left out.

    ``pairs`` is any iterable of (name, value) as ``str`` or ``bytes`` (what
    httpx, httpx2, aiohttp and ASGI hand out); anything else is skipped.
    """
    kept: list[tuple[str, str]] = []
    for pair in pairs:
        try:
            name, value = pair
        except (TypeError, ValueError):
            continue
        name = name.decode("latin-1") if isinstance(name, bytes) else name
        value = value.decode("latin-1") if isinstance(value, bytes) else value
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        name = name.lower()
        if name not in SECRET_HEADERS:
            kept.append((name, value))
    return tuple(kept)

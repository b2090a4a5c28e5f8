"""The workbench's rules for every request, as one ASGI middleware.

- **Who may look.** Without a token the server answers only requests that
  address it by a loopback name (the ``Host`` header), so a page on another
  site cannot reach it through a DNS name rebound to 127.0.0.1. With
  ``--token`` every request carries it: an ``Authorization: Bearer`` header
  (scripts, the JSON twins) or the cookie that ``/login?token=…`` sets once
  (the browser; the link ``assay serve`` prints).
- **No cross-site writes.** A POST whose ``Origin`` is another origin, or
  that the browser marks ``Sec-Fetch-Site: cross-site``/``same-site``, is
  refused: starting, cancelling and deciding happen from the page itself.
- **Nothing runs that the page did not ship.** Every answer carries a
  Content-Security-Policy with no inline script, no eval and no other
  origin, and ``nosniff``: agent output that slipped past escaping would
  still be inert.
- **Errors say nothing.** An exception inside a page becomes a plain 500
  naming only its type; its message (which may quote a case) reaches
  neither the page nor the log.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .bench import Workbench

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("assay.web")

#: The cookie ``/login`` sets: the token, for the browser's later requests.
COOKIE = "assay_token"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")

SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

_SAFE = {"GET", "HEAD", "OPTIONS"}


class Guard:
    """See the module doc."""

    def __init__(self, app: App, bench: Workbench) -> None:
        self.app = app
        self.bench = bench

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, text, extra = refusal
            await _plain(send, status, text, extra)
            return
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except Exception as error:  # the message may quote a hidden case: never shown
            log.error("%s %s failed: %s", scope.get("method"), scope.get("path"),
                      type(error).__name__)
            if not started:
                await _plain(send, 500, "The workbench could not answer this request "
                                        f"({type(error).__name__}).")

    def _refusal(self, scope: Scope, headers: dict[str, str]
                 ) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        bench = self.bench
        if bench.token is None:
            host = _hostname(headers.get("host", ""))
            if host not in bench.hosts:
                return 421, ("This workbench answers only on loopback; serve it with "
                             "--token to reach it by another name."), []
        elif scope.get("path") == "/login":
            given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])
            if not _same(given[0], bench.token):
                return 401, "Wrong or missing token: open the link assay serve printed.", []
            cookie = f"{COOKIE}={bench.token}; Path=/; HttpOnly; SameSite=Strict"
            return 303, "Signed in.", [(b"location", b"/"), (b"set-cookie", cookie.encode())]
        elif not self._token_given(headers):
            return 401, ("This workbench needs its token: open the link assay serve printed, "
                         "or send Authorization: Bearer TOKEN."), []
        if scope.get("method", "GET") not in _SAFE and not _same_origin(headers):
            return 403, "Refused: a change must come from the workbench's own page.", []
        return None

    def _token_given(self, headers: dict[str, str]) -> bool:
        token = str(self.bench.token)
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and _same(value.strip(), token):
            return True
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no token
            return False
        morsel = jar.get(COOKIE)
        return morsel is not None and _same(morsel.value, token)


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _hostname(host: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8000`` → ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0].lower()
    return host.rpartition(":")[0].lower() if host.count(":") == 1 else host.lower()


def _same_origin(headers: dict[str, str]) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True  # not a browser's cross-origin request (curl, a script with the token)
    if origin == "null":
        # A plain form posted under this server's Referrer-Policy: no-referrer carries
        # Origin: null; the browser's own Sec-Fetch-Site (no page can set it) then says
        # whether the form was this server's page.
        return site == "same-origin"
    return urlsplit(origin).netloc.lower() == headers.get("host", "").lower()


async def _plain(send: Send, status: int, text: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()), *(extra or []), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})

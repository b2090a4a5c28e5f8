"""The judge's HTTP client: one JSON POST at a time per kept-open HTTP/1.1 connection.

Why not the ``openai`` SDK, as the ``openai:`` target uses: a judged battery
makes one call per judged check per trial, and the SDK (with its HTTP stack
and response models) costs about 5 ms of CPU per call on the event loop the
battery shares — 1,000 judge calls took ten times the judge-bound ideal, all
of it queueing for the CPU (docs/performance.md, "Judged batteries"). A
judge call is one request of a fixed shape: one POST of JSON, one JSON
answer. The request is written whole; the answer is read strictly by the
rules of HTTP/1.1 (RFC 9112) that a JSON answer needs — a status line,
header fields, then a body framed by ``Content-Length``, by ``chunked``
transfer coding, or by the connection's close — and anything else is a
malformed answer, never guessed at. A general HTTP library (``h11``, which
httpx's own stack is built on, was tried here first) spent half of this
client's time validating and dispatching what this fixed shape never needs;
at one call per judged trial, that was the difference between meeting the
judged battery's goal and missing it.

Connections are kept open and reused (one request at a time each), any
number of them: the panel bounds how many calls are in flight. A kept
connection that the server closed while it was idle is retried once on a
new one, since nothing was asked on it. Nothing here reads the environment:
no proxy, no key (the ``Authorization`` header is a placeholder,
PRINCIPLES 10). An answer is capped (``MAX_BODY``, ``MAX_HEAD``): a judge's
is short, and a server that streams forever is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..targets.backoff import REFUSALS

#: The most bytes an answer's body may have (a judge's is a few hundred).
MAX_BODY = 8 * 1024 * 1024
#: The most bytes of an answer's status line and header fields (and of one chunk-size line).
MAX_HEAD = 64 * 1024
#: What the ``Authorization`` header carries: no one's key.
PLACEHOLDER_KEY = "unused"


class WireError(Exception):
    """The exchange failed: ``refused`` (nothing listening) or not; never quotes the server."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class _Stale(Exception):
    """A kept connection the server had closed: nothing was asked on it, ask on another."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False


class JudgeClient:
    """POSTs JSON to one server (``base_url``, e.g. ``http://127.0.0.1:8000/v1``)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the judge's base URL is http(s)://HOST[:PORT][/PATH]")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        authority = parts.netloc.rsplit("@", 1)[-1]
        # IDNA only for a name that needs it: its codec's first use costs milliseconds.
        self._authority = authority.encode("ascii" if authority.isascii() else "idna")
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        # Built once per path: every request has the same head but for its length.
        self._heads: dict[str, bytes] = {}
        self._idle: list[_Connection] = []
        self._closed = False

    async def post(self, path: str, body: dict[str, Any]
                   ) -> tuple[int, bytes, dict[str, str] | None]:
        """POST ``body`` as JSON to ``prefix/path``; the status, the answer's body, and hints.

        The hints are None but for a 429 or 503 ("not now"): then the
        answer's ``retry-after`` and ``retry-after-ms`` fields, by lower-case
        name (``targets.backoff`` reads them), an empty mapping when it has
        neither. Raises ``WireError`` when no answer came (refused, reset,
        malformed, too long).
        """
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass")
        request = self._head(path) + b"%d\r\n\r\n" % len(payload) + payload
        while self._idle:
            connection = self._idle.pop()
            try:
                return await self._exchange(connection, request)
            except _Stale:
                continue  # closed by the server while idle: another, or a new one
        return await self._exchange(await self._connect(), request)

    def _head(self, path: str) -> bytes:
        """The request line and header fields, up to the ``Content-Length`` value."""
        found = self._heads.get(path)
        if found is None:
            target = f"{self.prefix}/{path.lstrip('/')}".encode("ascii")
            found = self._heads[path] = (
                b"POST " + target + b" HTTP/1.1\r\nHost: " + self._authority
                + b"\r\nContent-Type: application/json\r\nAccept: application/json"
                + b"\r\nAuthorization: Bearer " + PLACEHOLDER_KEY.encode()
                + b"\r\nUser-Agent: assay-judge\r\nContent-Length: ")
        return found

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._tls,
                                                           limit=MAX_HEAD)
        except ConnectionRefusedError:
            raise WireError("refused connection", refused=True) from None
        except OSError as exc:
            raise WireError(f"cannot connect ({type(exc).__name__})") from None
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, request: bytes
                        ) -> tuple[int, bytes, dict[str, str] | None]:
        reader = connection.reader
        try:
            connection.writer.write(request)
            await connection.writer.drain()
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if connection.reused and not exc.partial:
                    raise _Stale from None  # closed while idle: nothing was asked on it
                raise
            status, length, chunked, close = _read_head(head)
            if chunked:
                data = await _read_chunks(reader)
            elif length is not None:
                data = await reader.readexactly(length)
            else:  # delimited by the close: read to the end, within the cap
                data, close = await _read_to_close(reader), True
        except _Stale:
            self._drop(connection)
            raise
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                OSError, ValueError) as exc:
            self._drop(connection)
            if isinstance(exc, ConnectionError) and connection.reused:
                raise _Stale from None  # reset as it was reused: nothing was answered
            if isinstance(exc, asyncio.LimitOverrunError | ValueError):
                raise WireError("the answer's head is too long") from None
            raise WireError("lost the connection") from None
        except BaseException:  # malformed, too long, cancelled, timed out: the connection is spent
            self._drop(connection)
            raise
        if close or self._closed:
            self._drop(connection)
        else:
            connection.reused = True
            self._idle.append(connection)
        # Read only when asked for: an answer of any other status costs this one test.
        return status, data, _hints(head) if status in REFUSALS else None

    @staticmethod
    def _drop(connection: _Connection) -> None:
        with contextlib.suppress(Exception):
            connection.writer.close()

    async def close(self) -> None:
        """Close every open connection."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            self._drop(connection)
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()


def _read_head(head: bytes) -> tuple[int, int | None, bool, bool]:
    """The status, the body's framing (length, chunked) and whether the server closes after it.

    ``WireError`` for anything that is not an HTTP/1.x final response head
    this client can frame: a bad status line, a malformed or conflicting
    ``Content-Length``, a transfer coding other than ``chunked`` alone.
    """
    lines = head[:-4].split(b"\r\n")
    status_line = lines[0].split(b" ", 2)
    if len(status_line) < 2 or status_line[0] not in (b"HTTP/1.1", b"HTTP/1.0") \
            or len(status_line[1]) != 3 or not status_line[1].isdigit():
        raise WireError("the answer is not HTTP/1.x")
    status = int(status_line[1])
    if status < 200:
        raise WireError("the answer is an interim response")
    length: int | None = None
    chunked = False
    close = status_line[0] == b"HTTP/1.0"
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise WireError("the answer's header is malformed")
        key, value = name.lower(), value.strip()
        if key == b"content-length":
            if not value.isdigit() or len(value) > 12 or (length is not None
                                                          and length != int(value)):
                raise WireError("the answer's length is malformed")
            length = int(value)
        elif key == b"transfer-encoding":
            if value.lower() != b"chunked":
                raise WireError("the answer's transfer coding is not chunked")
            chunked = True
        elif key == b"connection":
            tokens = {token.strip().lower() for token in value.split(b",")}
            close = b"close" in tokens or (close and b"keep-alive" not in tokens)
    if status in (204, 304):
        return status, 0, False, close
    if chunked:  # chunked wins over a length (RFC 9112 §6.3), and the length is dropped
        return status, None, True, close
    if length is not None and length > MAX_BODY:
        raise WireError("the answer is too long")
    return status, length, False, close


def _hints(head: bytes) -> dict[str, str]:
    """The ``retry-after`` and ``retry-after-ms`` fields of an answer's head (the last of each)."""
    found: dict[str, str] = {}
    for line in head[:-4].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        key = name.lower()
        if key in (b"retry-after", b"retry-after-ms"):
            found[key.decode("ascii")] = value.strip().decode("latin-1")
    return found


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    """A ``chunked`` body: size lines and chunks to the empty one, then trailer fields."""
    parts: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not size_text or len(size_text) > 8 \
                or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
            raise WireError("the answer's chunk is malformed")
        size = int(size_text, 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailer fields: not needed
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise WireError("the answer is too long")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise WireError("the answer's chunk is malformed")


async def _read_to_close(reader: asyncio.StreamReader) -> bytes:
    """A body the server ends by closing the connection, within ``MAX_BODY``."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > MAX_BODY:
            raise WireError("the answer is too long")
        parts.append(chunk)

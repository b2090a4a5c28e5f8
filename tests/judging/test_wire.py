"""The judge's HTTP client against raw loopback servers that answer byte by byte as scripted.

Each server reads one request at a time and writes the scripted bytes, so
the framing rules are exercised as a real peer would send them: a length,
chunks, a body ended by the close, a kept connection the server closes
while idle, and the malformed and oversized answers a hostile server sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from assay.judging import wire
from assay.judging.wire import JudgeClient, WireError

pytestmark = pytest.mark.real

OK = b'{"ok": true}'
#: What one call came back with: the status, body and hints, or the error's words.
Found = tuple[int, bytes, dict[str, str] | None] | str


def answer(head: bytes, body: bytes = OK) -> bytes:
    return head + body


async def serve(replies: list[bytes], *, close_after: Callable[[int], bool] = lambda n: False
                ) -> tuple[asyncio.Server, list[bytes], list[int]]:
    """A server that answers request n with ``replies[n]`` (then closes when told to)."""
    seen: list[bytes] = []
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                seen.append(head + await reader.readexactly(length))
                n = len(seen) - 1
                writer.write(replies[min(n, len(replies) - 1)])
                await writer.drain()
                if close_after(n):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went, or the test ended
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, seen, connections


def url(server: asyncio.Server) -> str:
    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


def exchange(replies: list[bytes], calls: int = 1, **options: object) -> tuple[
        list[Found], list[bytes], list[int]]:
    async def go() -> tuple[list[Found], list[bytes], list[int]]:
        server, seen, connections = await serve(replies, **options)  # type: ignore[arg-type]
        client = JudgeClient(url(server))
        found: list[Found] = []
        try:
            for _ in range(calls):
                try:
                    found.append(await client.post("chat/completions", {"q": "é"}))
                except WireError as exc:
                    found.append(str(exc))
        finally:
            await client.close()
            server.close()
        return found, seen, connections

    return asyncio.run(go())


LENGTH = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n"


def test_a_length_framed_answer_and_the_request_as_sent() -> None:
    [got], [request], _ = exchange([answer(LENGTH)])
    assert got == (200, OK, None)
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer unused" in head
    assert body == '{"q":"é"}'.encode()
    assert f"Content-Length: {len(body)}".encode() in head


def test_kept_connections_are_reused() -> None:
    found, _, connections = exchange([answer(LENGTH)], calls=3)
    assert found == [(200, OK, None)] * 3 and len(connections) == 1


def test_a_chunked_answer_with_extensions_and_trailers() -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;ext=1\r\n{\"ok\"\r\n7\r\n: true}\r\n0\r\nX-Trailer: y\r\n\r\n")
    found, _, connections = exchange([chunked], calls=2)
    assert found == [(200, OK, None)] * 2 and len(connections) == 1


def test_an_answer_ended_by_the_close_and_an_http_1_0_answer() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + OK
    found, _, connections = exchange([closing], calls=2, close_after=lambda n: True)
    assert found == [(200, OK, None)] * 2 and len(connections) == 2
    old = b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\n" + OK
    found, _, connections = exchange([old], calls=2, close_after=lambda n: True)
    assert found == [(200, OK, None)] * 2 and len(connections) == 2


def test_a_kept_connection_the_server_closed_while_idle_is_asked_again_on_a_new_one() -> None:
    found, seen, connections = exchange([answer(LENGTH)], calls=2, close_after=lambda n: True)
    assert found == [(200, OK, None)] * 2 and len(seen) == 2 and len(connections) == 2


def test_an_error_status_is_an_answer_not_an_error() -> None:
    [got], _, _ = exchange([b"HTTP/1.1 500 Oops\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\nno"])
    assert got == (500, b"no", None)  # no hints but for "not now"


def test_a_429_or_503_brings_its_retry_after_fields_by_lower_case_name() -> None:
    busy = (b"HTTP/1.1 503 Busy\r\nRETRY-AFTER:  2 \r\nX-Other: 1\r\n"
            b"Retry-After-Ms: 150\r\nContent-Length: 2\r\n\r\nno")
    bare = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n"
    found, _, connections = exchange([busy, bare], calls=2)
    assert found == [(503, b"no", {"retry-after": "2", "retry-after-ms": "150"}),
                     (429, b"", {})]
    assert len(connections) == 1  # the connection is kept as after any answer


@pytest.mark.parametrize(("reply", "error"), [
    (b"SSH-2.0-OpenSSH\r\n\r\n", "the answer is not HTTP/1.x"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "the answer is not HTTP/1.x"),
    (b"HTTP/1.1 100 Continue\r\n\r\n", "the answer is an interim response"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "the answer's header is malformed"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "the answer's length is malformed"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
     "the answer's length is malformed"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
     "the answer's transfer coding is not chunked"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
     "the answer's chunk is malformed"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", "the answer is too long"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + OK, "lost the connection"),
])
def test_a_malformed_answer_is_named_never_quoted(reply: bytes, error: str) -> None:
    [got], _, _ = exchange([reply], close_after=lambda n: True)
    assert got == error


def test_an_answer_longer_than_the_cap_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_BODY", 100)
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + (b"40\r\n" + b"x" * 64 + b"\r\n") * 2 + b"0\r\n\r\n")
    [got], _, _ = exchange([chunked])
    assert got == "the answer is too long"
    closing = b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 150
    [got], _, _ = exchange([closing], close_after=lambda n: True)
    assert got == "the answer is too long"


def test_a_head_that_never_ends_is_stopped() -> None:
    [got], _, _ = exchange([b"HTTP/1.1 200 OK\r\nX: " + b"a" * (wire.MAX_HEAD + 10)],
                           close_after=lambda n: True)
    assert got == "the answer's head is too long"


def test_nothing_listening_is_a_refused_connection() -> None:
    async def go() -> WireError:
        client = JudgeClient("http://127.0.0.1:9/v1")
        with pytest.raises(WireError) as caught:
            await client.post("chat/completions", {})
        await client.close()
        return caught.value

    refused = asyncio.run(go())
    assert refused.refused and str(refused) == "refused connection"


def test_a_base_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError):
        JudgeClient("ftp://example/v1")

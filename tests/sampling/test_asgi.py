"""Online evaluation as ASGI middleware (SPEC §10): ``assay.online(...).asgi(app)``.

A real Starlette app, driven through ``httpx.ASGITransport`` (what a client
sees) and through the ASGI protocol itself (which messages go out, and
when): responses are byte-identical with and without the middleware, a
streaming response's first chunk reaches the client before the app sends
the next, and sampled exchanges are graded and queued like a function's calls.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import assay
from assay.sampling.online import Online

SUITE = """
suite: demo/online-http@1
cases:
  - id: greets
    input: {question: hi}
    expect:
      - status: ok
      - {path: $.answer, type: string}
      - not_contains: Traceback
"""
SECRET = "SECRET-TOKEN-91c2"


class App:
    """A small agent behind HTTP, with a stream whose second chunk waits for a go-ahead."""

    def __init__(self) -> None:
        self.go_on = asyncio.Event()
        self.shut = asyncio.Event()

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            self.shut.set()

        self.app = Starlette(routes=[
            Route("/agent", self.answer, methods=["POST"]),
            Route("/stream", self.stream),
            Route("/health", self.health),
        ], lifespan=lifespan)

    async def answer(self, request: Request) -> Response:
        try:
            question = (await request.json()).get("question")
        except ValueError:
            return PlainTextResponse("not JSON", status_code=400)
        if question == "boom":
            raise RuntimeError("app broke")
        if question == "leak":
            return JSONResponse({"answer": "Traceback (most recent call last): ..."})
        if question == "down":
            return JSONResponse({"error": "upstream down"}, status_code=503)
        return JSONResponse({"answer": f"re: {question}"}, headers={"x-served-by": "test"})

    async def stream(self, request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"answer": "first part'
            await self.go_on.wait()
            yield b', then the rest"}'

        return StreamingResponse(chunks(), media_type="application/json")

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok")


def online(folder: Path, **options: Any) -> Online:
    path = folder / "http.suite.yaml"
    path.write_text(SUITE.lstrip("\n"), encoding="utf-8")
    return assay.online(path, db=f"sqlite:///{folder / '.assay' / 'assay.db'}",
                        **{"sample": 1.0, "seed": 11, **options})


def queued(folder: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(folder / ".assay" / "assay.db") as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT q.source, q.outcome, q.reason, b.content AS trace "
                          "FROM review_items q JOIN blobs b ON b.digest = q.trace_digest "
                          "ORDER BY q.id").fetchall()
    return [{**dict(row), "trace": json.loads(row["trace"])} for row in rows]


async def exchange(app: Any) -> list[Any]:
    """The same requests against ``app``: what the client got from each."""
    seen: list[Any] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for question in ("hi", "leak", "down", "boom"):
            try:
                reply = await client.post(f"/agent?api_key={SECRET}", json={"question": question},
                                          headers={"authorization": f"Bearer {SECRET}"})
            except RuntimeError as exc:
                seen.append(("raised", type(exc), str(exc)))
                continue
            seen.append((reply.status_code, reply.headers.raw, reply.content))
        reply = await client.post("/agent", content=b"\xff not json")
        seen.append((reply.status_code, reply.headers.raw, reply.content))
        for path in ("/health", "/stream"):
            reply = await client.get(path)
            seen.append((reply.status_code, reply.headers.raw, reply.content))
    return seen


def test_responses_are_byte_identical_and_sampled_ones_are_graded(tmp_path: Path) -> None:
    plain, wrapped = App(), App()
    plain.go_on.set()
    wrapped.go_on.set()
    sampler = online(tmp_path)
    without = asyncio.run(exchange(plain.app))
    with_it = asyncio.run(exchange(sampler.asgi(wrapped.app, paths=["/agent", "/stream"])))
    assert with_it == without
    assert ("raised", RuntimeError, "app broke") in with_it
    assert sampler.close(30)
    stats = sampler.stats
    assert (stats.calls, stats.sampled, stats.graded) == (6, 6, 6)  # /health is not counted
    assert (stats.passed, stats.failed) == (2, 4)  # hi and the stream pass
    items = queued(tmp_path)
    assert [(i["source"], i["outcome"], i["reason"]) for i in items] == [
        ("online", "fail", 'not_contains: contains "Traceback"'),
        ("online", "fail", "status: status is error, expected ok (HTTP 503)"),
        ("online", "fail", "status: status is error, expected ok (RuntimeError: app broke)"),
        ("online", "fail", "status: status is error, expected ok (HTTP 400)"),
    ]
    leak = items[0]["trace"]
    assert leak["events"][0]["arguments"] == {"method": "POST", "path": "/agent",
                                              "body": {"question": "leak"}}
    assert leak["output"] == {"answer": "Traceback (most recent call last): ..."}
    assert leak["facets"]["online_function"] == "POST /agent"
    assert items[3]["trace"]["events"][0]["arguments"]["body"] == "\ufffd not json"
    assert items[3]["trace"]["output"] == "not JSON"
    # Neither the Authorization header nor the query string is kept anywhere.
    assert SECRET.encode() not in (tmp_path / ".assay" / "assay.db").read_bytes()


HTTP_SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
              "http_version": "1.1", "method": "GET", "scheme": "http", "path": "/stream",
              "raw_path": b"/stream", "query_string": b"", "headers": [],
              "server": ("test", 80), "client": ("127.0.0.1", 5000), "root_path": ""}


async def stream_through(app: App, asgi: Any) -> list[dict[str, Any]]:
    """Drive one GET /stream; the app sends its second chunk only once the first is out."""
    sent: list[dict[str, Any]] = []
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))
        if message["type"] == "http.response.body" and message.get("body"):
            app.go_on.set()  # the client has the first chunk: let the app go on

    # Had the middleware held the first chunk back, the app would wait for ever.
    await asyncio.wait_for(asgi(dict(HTTP_SCOPE), receive, send), 30)
    return sent


def test_a_streaming_response_still_streams(tmp_path: Path) -> None:
    plain, wrapped = App(), App()
    sampler = online(tmp_path)
    without = asyncio.run(stream_through(plain, plain.app))
    with_it = asyncio.run(stream_through(wrapped, sampler.asgi(wrapped.app)))
    assert with_it == without
    assert [m.get("body") for m in with_it if m["type"] == "http.response.body"][:2] == [
        b'{"answer": "first part', b', then the rest"}']
    assert sampler.close(30)
    assert (sampler.stats.sampled, sampler.stats.passed) == (1, 1)


def test_a_body_over_the_cap_is_not_graded_and_says_so(tmp_path: Path) -> None:
    sampler = online(tmp_path)

    async def ask() -> None:
        transport = httpx.ASGITransport(app=sampler.asgi(App().app, max_body=12))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            reply = await client.post("/agent", json={"question": "a long question"})
            assert reply.json() == {"answer": "re: a long question"}  # the client gets it all

    asyncio.run(ask())
    assert sampler.close(30)
    assert sampler.stats.inconclusive == 1
    [item] = queued(tmp_path)
    assert item["outcome"] == "inconclusive"
    assert item["reason"] == ("the response body (32 bytes) is over the 12-byte cap: "
                              "not graded")
    assert item["trace"]["events"][0]["arguments"] == {
        "method": "POST", "path": "/agent", "body": '{"question":', "body_cut_at": 12}
    assert item["trace"]["evidence"] == {"output": "unavailable"}


def test_lifespan_shutdown_waits_for_the_samples_to_be_graded(tmp_path: Path) -> None:
    gate = tmp_path / "http_gate_lifespan.py"
    gate.write_text("import threading\nentered = threading.Event()\n"
                    "release = threading.Event()\n\ndef wait(trace):\n    entered.set()\n"
                    "    release.wait(60)\n    return True\n", encoding="utf-8")
    path = tmp_path / "gated.suite.yaml"
    path.write_text("suite: demo/gated-http@1\ncases:\n  - id: a\n"
                    "    expect: [{grader: 'http_gate_lifespan:wait'}]\n", encoding="utf-8")
    sampler = assay.online(path, sample=1.0, db=f"sqlite:///{tmp_path / 'q.db'}")
    import http_gate_lifespan as held  # imported by the suite's load, from tmp_path

    app = App()
    asgi = sampler.asgi(app.app)

    async def scenario() -> list[str]:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        said: list[str] = []

        async def send(message: dict[str, Any]) -> None:
            said.append(message["type"])

        life = asyncio.ensure_future(asgi({"type": "lifespan", "asgi": {"version": "3.0"}},
                                          inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.get("/health")).text == "ok"
        assert await asyncio.to_thread(held.entered.wait, 30)  # the grader holds it
        await inbox.put({"type": "lifespan.shutdown"})
        await app.shut.wait()  # the app's own shutdown ran …
        assert "lifespan.shutdown.complete" not in said  # … but the server is not told yet
        held.release.set()
        await asyncio.wait_for(life, 30)
        return said

    try:
        said = asyncio.run(scenario())
    finally:
        held.release.set()
    assert said == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert (sampler.stats.sampled, sampler.stats.graded) == (1, 1)


def test_other_scopes_pass_through_untouched(tmp_path: Path) -> None:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope["type"], receive, send))

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    sampler = online(tmp_path)
    asyncio.run(sampler.asgi(app)({"type": "websocket", "path": "/ws"}, receive, send))
    assert seen == [("websocket", receive, send)]
    assert sampler.stats.calls == 0


@pytest.mark.parametrize(("options", "words"), [
    ({"paths": ["agent"]}, "paths are URL path prefixes"),
    ({"paths": []}, "paths are URL path prefixes"),
    ({"max_body": -1}, "max_body is a number of bytes")])
def test_bad_middleware_options_are_refused(tmp_path: Path, options: dict[str, Any],
                                            words: str) -> None:
    with pytest.raises(ValueError, match=words):
        online(tmp_path).asgi(App().app, **options)

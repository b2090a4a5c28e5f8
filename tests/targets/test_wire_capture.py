"""In-process wire capture (SPEC §15): the real SDKs and clients against a real loopback server.

Each test runs agent-like code inside ``recording()`` — a trial — and reads
the exchanges its recorder kept: byte-exact against what the server
received and sent (``WireServer.answers``), per trial, never a credential.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import gzip
import json
import socket
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import httpx
import httpx2
import openai
import pytest

from assay.model import Case
from assay.targets import TargetOptions, TrialRequest, make_target
from assay.targets.threads import AgentThreads
from assay.targets.wire import MAX_BODY, Exchange
from assay.targets.wire.capture import Recorder, current, hooked, install, recording

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wire_server import WireServer  # noqa: E402

pytestmark = pytest.mark.real

#: The agent's key: it must never appear in anything recorded.
KEY = "sk-canary-4f1d9a0b7c"


@pytest.fixture(scope="module", autouse=True)
def hooks() -> None:
    install()


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


def in_a_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """An async test, run in a fresh event loop."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def sent_text(exchange: Exchange) -> str:
    body = json.loads(exchange.request_body)
    if "messages" in body:
        content = body["messages"][-1]["content"]
        return content if isinstance(content, str) else content[0]["text"]
    return str(body["contents"][-1]["parts"][0]["text"])


def assert_exact(server: WireServer, exchange: Exchange) -> None:
    """The request as the server got it, the response as it sent it, no credential kept."""
    assert server.answers[exchange.request_body] == exchange.response_body
    assert_no_secret(exchange)


def assert_no_secret(exchange: Exchange) -> None:
    names = {name for name, _ in exchange.request_headers}
    assert not names & {"authorization", "x-api-key", "x-goog-api-key", "api-key"}
    assert KEY not in repr(exchange)


def refused_url() -> str:
    """A loopback port nothing listens on: a connection there is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def marker() -> str:
    return f"mark-{uuid.uuid4().hex[:10]}"


# --- the SDKs, as agents use them ------------------------------------------------------------

def test_openai_sync_json_and_stream(server: WireServer) -> None:
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    with recording() as recorder:
        answer = client.chat.completions.create(model="m", messages=[user("sync json")])
        stream = client.chat.completions.create(model="m", messages=[user("sync stream")],
                                                stream=True)
        words = [chunk.choices[0].delta.content for chunk in stream if chunk.choices]
    first, second = recorder.exchanges()
    assert answer.choices[0].message.content == "echo: sync json"
    assert "".join(w or "" for w in words).strip() == "echo: sync stream"
    assert (first.method, first.url, first.status) == (
        "POST", f"{server.base}/v1/chat/completions", 200)
    assert sent_text(first) == "sync json" and first.complete and first.error is None
    assert_exact(server, first)
    assert sent_text(second) == "sync stream" and second.error is None
    assert second.header("content-type") == "text/event-stream"
    assert second.response_body.endswith(b"data: [DONE]\n\n")
    assert_exact(server, second)
    assert 0 <= first.started <= second.started and first.duration_s > 0


@in_a_loop
async def test_openai_async_json_and_stream(server: WireServer) -> None:
    client = openai.AsyncOpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    with recording() as recorder:
        await client.chat.completions.create(model="m", messages=[user("async json")])
        stream = await client.chat.completions.create(model="m", messages=[user("async stream")],
                                                      stream=True)
        async for _ in stream:
            pass
    await client.close()
    first, second = recorder.exchanges()
    assert [sent_text(first), sent_text(second)] == ["async json", "async stream"]
    assert first.complete and second.response_body.endswith(b"data: [DONE]\n\n")
    assert_exact(server, first)
    assert_exact(server, second)


def test_openai_sdk_over_legacy_httpx_client(server: WireServer) -> None:
    with httpx.Client() as http:
        client = openai.OpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0,
                               http_client=http)  # type: ignore[arg-type]
        with recording() as recorder:
            client.chat.completions.create(model="m", messages=[user("over httpx")])
    (exchange,) = recorder.exchanges()
    assert sent_text(exchange) == "over httpx" and exchange.complete
    assert_exact(server, exchange)


@in_a_loop
async def test_openai_sdk_over_aiohttp_is_recorded_once(server: WireServer) -> None:
    """``DefaultAioHttpClient``: an httpx2 client whose transport is an aiohttp session."""
    async with openai.DefaultAioHttpClient() as http:
        client = openai.AsyncOpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0,
                                    http_client=http)
        with recording() as recorder:
            await client.chat.completions.create(model="m", messages=[user("through aiohttp")])
            stream = await client.chat.completions.create(
                model="m", messages=[user("through aiohttp, streamed")], stream=True)
            async for _ in stream:
                pass
    first, second = recorder.exchanges()  # one each: the outer client's, not aiohttp's again
    assert [sent_text(first), sent_text(second)] == [
        "through aiohttp", "through aiohttp, streamed"]
    assert_exact(server, first)
    assert_exact(server, second)


def test_each_retry_is_its_own_exchange(server: WireServer) -> None:
    client = openai.OpenAI(base_url=f"{server.base}/fail/503", api_key=KEY, max_retries=2)
    with recording() as recorder, pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[user("retried")])
    exchanges = recorder.exchanges()
    assert [e.status for e in exchanges] == [503, 503, 503]
    assert [e.header("x-stainless-retry-count", response=False) for e in exchanges] == [
        "0", "1", "2"]
    assert all(e.complete and b"status 503" in e.response_body for e in exchanges)


def test_anthropic_sync_and_stream(server: WireServer) -> None:
    client = anthropic.Anthropic(base_url=server.base, api_key=KEY, max_retries=0)
    with recording() as recorder:
        message = client.messages.create(model="c", max_tokens=10,
                                         messages=[user("anthropic json")])  # type: ignore[list-item]
        with client.messages.stream(model="c", max_tokens=10,
                                    messages=[user("anthropic stream")]) as stream:  # type: ignore[list-item]
            text = "".join(stream.text_stream)
    first, second = recorder.exchanges()
    assert message.content[0].text == "echo: anthropic json"  # type: ignore[union-attr]
    assert text == "echo: anthropic stream"
    assert first.url == f"{server.base}/v1/messages" and first.complete
    assert b"event: message_stop" in second.response_body
    for exchange in (first, second):
        assert_exact(server, exchange)
        assert exchange.header("anthropic-version", response=False)


@in_a_loop
async def test_anthropic_async_stream(server: WireServer) -> None:
    client = anthropic.AsyncAnthropic(base_url=server.base, api_key=KEY, max_retries=0)
    with recording() as recorder:
        async with client.messages.stream(model="c", max_tokens=10,
                                          messages=[user("anthropic async")]) as stream:  # type: ignore[list-item]
            text = "".join([part async for part in stream.text_stream])
    await client.close()
    (exchange,) = recorder.exchanges()
    assert text == "echo: anthropic async" and exchange.status == 200
    assert_exact(server, exchange)


def test_google_genai_sync(server: WireServer) -> None:
    from google import genai

    client = genai.Client(api_key=KEY, http_options={"base_url": server.base})
    with recording() as recorder:
        answer = client.models.generate_content(model="gem", contents="gemini json")
        parts = [chunk.text for chunk in client.models.generate_content_stream(
            model="gem", contents="gemini stream")]
    first, second = recorder.exchanges()
    assert answer.text == "echo: gemini json" and parts == ["echo: gemini stream"]
    assert first.url.endswith("/models/gem:generateContent")
    assert second.url.endswith("/models/gem:streamGenerateContent?alt=sse")
    assert [sent_text(first), sent_text(second)] == ["gemini json", "gemini stream"]
    assert_exact(server, first)
    assert_exact(server, second)


@in_a_loop
async def test_google_genai_async_goes_through_aiohttp(server: WireServer) -> None:
    from google import genai

    client = genai.Client(api_key=KEY, http_options={"base_url": server.base})
    assert client._api_client._use_aiohttp()  # the path this test is about
    with recording() as recorder:
        answer = await client.aio.models.generate_content(model="gem", contents="gemini aio")
        stream = await client.aio.models.generate_content_stream(model="gem",
                                                                 contents="gemini aio stream")
        parts = [chunk.text async for chunk in stream]
    await client.aio.aclose()
    first, second = recorder.exchanges()
    assert answer.text == "echo: gemini aio" and parts == ["echo: gemini aio stream"]
    assert first.complete and second.complete
    assert_exact(server, first)
    assert_exact(server, second)


# --- the clients themselves ------------------------------------------------------------------

@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_raw_sync_client(server: WireServer, lib: Any) -> None:
    def body() -> Iterator[bytes]:
        yield b"streamed "
        yield b"request body"

    with lib.Client(follow_redirects=True) as client, recording() as recorder:
        packed = client.get(f"{server.base}/gzip")
        echoed = client.post(f"{server.base}/echo", content=body())
        followed = client.get(f"{server.base}/redirect?key={KEY}&q=1")
        assert packed.elapsed.total_seconds() > 0  # the response's own clock still runs
    gzip_, echo, redirect, target = recorder.exchanges()
    # The body as the agent reads it: decoded, and its encoding no longer claimed.
    assert gzip_.response_body == packed.content == b'{"packed": true}'
    assert gzip_.header("content-encoding") is None
    assert echo.request_body == b"streamed request body" == echoed.content == echo.response_body
    assert redirect.status == 302 and redirect.url == f"{server.base}/redirect?key=redacted&q=1"
    assert (target.method, target.url, target.status) == ("GET", f"{server.base}/echo", 200)
    assert followed.status_code == 200
    assert all(e.complete for e in (gzip_, echo, redirect, target))
    assert KEY not in repr(recorder.exchanges())


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
@in_a_loop
async def test_raw_async_client(server: WireServer, lib: Any) -> None:
    async def body() -> Any:
        yield b"async "
        yield b"body"

    async with lib.AsyncClient() as client:
        with recording() as recorder:
            packed = await client.get(f"{server.base}/gzip")
            echoed = await client.post(f"{server.base}/echo", content=body())
            async with client.stream("GET", f"{server.base}/big?n=300000") as response:
                size = sum([len(part) async for part in response.aiter_bytes()])
    gzip_, echo, big = recorder.exchanges()
    assert gzip_.response_body == packed.content and gzip_.header("content-encoding") is None
    assert echo.request_body == b"async body" == echoed.content == echo.response_body
    assert size == len(big.response_body) == 300000 and big.complete


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_transport_of_the_agents_own_is_seen(lib: Any) -> None:
    """A custom transport (here one answering with its body already read, gzip-encoded)."""
    def answer(request: Any) -> Any:
        packed = gzip.compress(b"packed " + request.content)
        return lib.Response(201, headers={"content-encoding": "gzip"}, content=packed)

    with lib.Client(transport=lib.MockTransport(answer)) as client, recording() as recorder:
        response = client.post("http://agent.invalid/x", content=b"hello")
    (exchange,) = recorder.exchanges()
    assert response.content == exchange.response_body == b"packed hello"
    assert (exchange.status, exchange.request_body, exchange.complete) == (201, b"hello", True)
    assert exchange.header("content-encoding") is None


@in_a_loop
async def test_aiohttp_session(server: WireServer) -> None:
    async with aiohttp.ClientSession() as session:
        with recording() as recorder:
            async with session.get(f"{server.base}/gzip") as response:
                packed = await response.read()
            async with session.post(f"{server.base}/echo", data=b"aiohttp body") as response:
                echoed = await response.read()
            async with session.post(f"{server.base}/v1/chat/completions",
                                    json={"stream": True, "messages": [user("aio sse")]},
                                    headers={"Authorization": f"Bearer {KEY}"}) as response:
                lines = [line async for line in response.content]
    gzip_, echo, sse = recorder.exchanges()
    assert gzip_.response_body == packed == b'{"packed": true}'
    assert gzip_.header("content-encoding") is None
    assert echo.request_body == b"aiohttp body" == echo.response_body == echoed
    assert sse.response_body == b"".join(lines) and sse.complete
    assert_exact(server, sse)


# --- per trial -------------------------------------------------------------------------------

@in_a_loop
async def test_64_concurrent_trials_never_mix(server: WireServer) -> None:
    """Shared clients, streams, to_thread, a pool with copied contexts, and traffic outside."""
    aclient = openai.AsyncOpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    pool = ThreadPoolExecutor(8)
    loop = asyncio.get_running_loop()

    def sync_call(text: str) -> str:
        answer = client.chat.completions.create(model="m", messages=[user(text)])
        return str(answer.choices[0].message.content)

    async def trial(mark: str) -> list[Exchange]:
        with recording() as recorder:
            await aclient.chat.completions.create(model="m", messages=[user(f"{mark} a")])
            stream = await aclient.chat.completions.create(
                model="m", messages=[user(f"{mark} b")], stream=True)
            async for _ in stream:
                pass
            await asyncio.to_thread(sync_call, f"{mark} c")
            context = contextvars.copy_context()
            await loop.run_in_executor(pool, functools.partial(context.run, sync_call,
                                                               f"{mark} d"))
        return recorder.exchanges()

    async def outsider(mark: str) -> None:  # a judge-like caller, no trial of its own
        await aclient.chat.completions.create(model="m", messages=[user(mark)])

    marks = [marker() for _ in range(64)]
    outside = [f"outside-{marker()}" for _ in range(16)]
    results = await asyncio.gather(*(trial(m) for m in marks), *(outsider(m) for m in outside))
    pool.shutdown()
    await aclient.close()
    for mark, exchanges in zip(marks, results[:64], strict=True):
        assert sorted(sent_text(e) for e in exchanges) == [f"{mark} {s}" for s in "abcd"]
        for exchange in exchanges:
            assert mark.encode() in exchange.response_body
            assert_exact(server, exchange)
    seen = b"".join(e.request_body for result in results[:64] for e in result)  # type: ignore[union-attr]
    for mark in outside:
        assert mark.encode() not in seen
        assert any(mark.encode() in body for body in server.answers)  # it did go out


@in_a_loop
async def test_sync_agents_on_the_python_targets_threads(server: WireServer) -> None:
    """As ``python:`` runs a sync agent: its own pool, the trial's context copied per call."""
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    threads = AgentThreads(4)

    def agent(mark: str) -> None:
        client.chat.completions.create(model="m", messages=[user(mark)])
        for _ in client.chat.completions.create(model="m", messages=[user(mark + "!")],
                                                stream=True):
            pass

    async def trial(mark: str) -> list[Exchange]:
        with recording() as recorder:
            context = contextvars.copy_context()
            await threads.run(lambda: context.run(agent, mark))
        return recorder.exchanges()

    marks = [marker() for _ in range(16)]
    results = await asyncio.gather(*(trial(m) for m in marks))
    threads.close()
    for mark, exchanges in zip(marks, results, strict=True):
        assert [sent_text(e) for e in exchanges] == [mark, mark + "!"]


@in_a_loop
async def test_the_openai_target_is_never_recorded(server: WireServer) -> None:
    """assay's own openai: target runs beside recording trials; no trial gets its calls."""
    target = make_target("openai:wire-model-1", TargetOptions(base_url=f"{server.base}/v1"))
    await target.start()
    aclient = openai.AsyncOpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    theirs = f"target-{marker()}"

    async def trial(mark: str) -> list[Exchange]:
        with recording() as recorder:
            await aclient.chat.completions.create(model="m", messages=[user(mark)])
        return recorder.exchanges()

    request = TrialRequest(case=Case(id="c1", input=theirs), n=1, timeout_s=10.0)
    outcome = await asyncio.gather(target.run(request), *(trial(marker()) for _ in range(8)))
    await target.close()
    await aclient.close()
    assert theirs in str(outcome[0].output)  # the target's call went out and came back
    for exchanges in outcome[1:]:
        assert len(exchanges) == 1 and theirs.encode() not in exchanges[0].request_body


@in_a_loop
async def test_work_outliving_its_trial_is_not_added(server: WireServer) -> None:
    client = openai.AsyncOpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    go = asyncio.Event()
    late = marker()

    async def background() -> None:
        await go.wait()
        await client.chat.completions.create(model="m", messages=[user(late)])

    with recording() as recorder:
        task = asyncio.create_task(background())  # carries the trial's context
        stream = await client.chat.completions.create(model="m", messages=[user("slow reader")],
                                                      stream=True)
        await stream.__anext__()  # one chunk read when the trial ends
    fixed = recorder.exchanges()
    go.set()
    await task
    async for _ in stream:  # the rest is read after the trial: not the trial's any more
        pass
    await client.close()
    assert any(late.encode() in body for body in server.answers)
    assert recorder.exchanges() == fixed
    (open_stream,) = fixed
    assert open_stream.status == 200 and not open_stream.complete and open_stream.error is None
    assert b"[DONE]" not in open_stream.response_body


def test_a_request_still_unanswered_when_the_trial_ends() -> None:
    recorder = Recorder()
    call = recorder._begin("POST", "http://x/v1/chat/completions",
                           [(b"Authorization", b"Bearer " + KEY.encode())])
    assert call is not None
    call.sent(b"{}")
    (exchange,) = recorder.close()
    assert exchange.status is None and not exchange.complete
    assert exchange.error == "the trial ended before the response came"
    call.responded(200, [])
    call.finish(True)
    assert recorder.exchanges() == [exchange]  # fixed
    assert recorder._begin("GET", "http://x/", []) is None  # nothing new is taken
    assert_no_secret(exchange)


# --- streams cut short, errors, size ---------------------------------------------------------

def test_stream_abandoned_by_the_agent(server: WireServer) -> None:
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    with recording() as recorder:
        stream = client.chat.completions.create(model="m", messages=[user("HANG please")],
                                                stream=True)
        first = next(iter(stream))
        stream.close()  # the agent has what it wanted; the server would send more
    (exchange,) = recorder.exchanges()
    assert first.choices[0].delta.role == "assistant"
    assert exchange.status == 200 and not exchange.complete and exchange.error is None
    assert exchange.response_body.startswith(b"data: ") and b"[DONE]" not in exchange.response_body
    assert server.answers[exchange.request_body].startswith(exchange.response_body)


@in_a_loop
async def test_aiohttp_stream_abandoned(server: WireServer) -> None:
    async with aiohttp.ClientSession() as session:
        with recording() as recorder:
            async with session.post(f"{server.base}/v1/chat/completions",
                                    json={"stream": True, "messages": [user("HANG aio")]}
                                    ) as response:
                line = await response.content.readline()
    (exchange,) = recorder.exchanges()
    assert exchange.response_body == line and line.startswith(b"data: ")
    assert not exchange.complete and exchange.error is None


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_body_broken_mid_way(server: WireServer, lib: Any) -> None:
    with lib.Client() as client, recording() as recorder, \
            pytest.raises(lib.RemoteProtocolError) as raised:
        client.get(f"{server.base}/cut")
    (exchange,) = recorder.exchanges()
    assert exchange.status == 200 and exchange.response_body == b"y" * 100
    assert not exchange.complete
    assert exchange.error == f"RemoteProtocolError: {raised.value}"


@in_a_loop
async def test_aiohttp_body_broken_mid_way(server: WireServer) -> None:
    async with aiohttp.ClientSession() as session:
        with recording() as recorder:
            with pytest.raises(aiohttp.ClientPayloadError):
                async with session.get(f"{server.base}/cut") as response:
                    await response.read()
    (exchange,) = recorder.exchanges()
    assert exchange.response_body == b"y" * 100 and not exchange.complete
    assert exchange.error is not None and exchange.error.startswith("ClientPayloadError")


@in_a_loop
async def test_connection_refused(server: WireServer) -> None:
    url = refused_url()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    with recording() as recorder:
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=[user("nobody there")])
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorError):
                await session.post(f"{url}/v1/chat/completions", data=b"{}")
    sdk, aio = recorder.exchanges()
    assert sdk.url == f"{url}/v1/chat/completions" and sent_text(sdk) == "nobody there"
    assert sdk.status is None and not sdk.complete
    assert sdk.error is not None and sdk.error.startswith("ConnectError")
    assert aio.status is None and aio.request_body == b"{}"
    assert aio.error is not None and aio.error.startswith("ClientConnectorError")
    assert_no_secret(sdk)


def test_response_over_max_body_is_cut_and_memory_stays_bounded(server: WireServer) -> None:
    size = 6 * MAX_BODY
    with httpx2.Client() as client:
        tracemalloc.start()
        try:
            with recording() as recorder, client.stream("GET", f"{server.base}/big?n={size}") as r:
                read = sum(len(part) for part in r.iter_bytes())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    (exchange,) = recorder.exchanges()
    assert read == size
    assert exchange.response_truncated and exchange.complete
    assert exchange.response_body == b"x" * MAX_BODY
    assert peak < 3 * MAX_BODY  # the kept part and its copy, never the whole answer


@in_a_loop
async def test_aiohttp_response_over_max_body(server: WireServer) -> None:
    size = MAX_BODY + 12345
    async with aiohttp.ClientSession() as session:
        with recording() as recorder:
            async with session.get(f"{server.base}/big?n={size}") as response:
                read = sum([len(part) async for part in response.content.iter_any()])
    (exchange,) = recorder.exchanges()
    assert read == size and exchange.complete and exchange.response_truncated
    assert len(exchange.response_body) == MAX_BODY


# --- the agent sees what it would without capture ---------------------------------------------

def _what_the_agent_sees(server: WireServer, refused: str) -> list[Any]:
    seen: list[Any] = []
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key=KEY, max_retries=0)
    answer = client.chat.completions.create(model="m", messages=[user("same?")])
    seen.append(answer.model_dump())
    stream = client.chat.completions.create(model="m", messages=[user("same stream")],
                                            stream=True)
    seen.append([chunk.model_dump() for chunk in stream])
    with httpx2.Client() as raw:
        packed = raw.get(f"{server.base}/gzip")
        seen.append((packed.status_code, packed.content,
                     [pair for pair in packed.headers.multi_items() if pair[0] != "date"]))
        with raw.stream("GET", f"{server.base}/big?n=200000") as response:
            seen.append(b"".join(response.iter_raw()) == b"x" * 200000)
    for failing in (
        lambda: openai.OpenAI(base_url=f"{server.base}/fail/500", api_key=KEY,
                              max_retries=0).chat.completions.create(model="m", messages=[]),
        lambda: openai.OpenAI(base_url=f"{refused}/v1", api_key=KEY,
                              max_retries=0).chat.completions.create(model="m", messages=[]),
        lambda: httpx2.get(f"{server.base}/cut"),
        lambda: httpx.get(f"{server.base}/cut"),
    ):
        try:
            failing()
        except Exception as exc:  # noqa: BLE001 - what the agent would catch is the point
            seen.append((type(exc), str(exc), type(exc.__cause__)))
        else:
            seen.append("no exception")
    return seen


def test_the_agent_sees_the_same_with_and_without_capture(server: WireServer) -> None:
    refused = refused_url()
    bare = _what_the_agent_sees(server, refused)
    with recording() as recorder:
        captured = _what_the_agent_sees(server, refused)
    assert captured == bare
    assert len(recorder.exchanges()) == 8
    assert "no exception" not in bare


# --- installing --------------------------------------------------------------------------------

def test_install_is_idempotent_and_thread_safe() -> None:
    import threading

    workers = [threading.Thread(target=install) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    install()
    assert {"httpx", "httpx2", "aiohttp"} <= hooked()
    for hook in (httpx2.Client._send_single_request, httpx2.AsyncClient._send_single_request,
                 httpx.Client._send_single_request, aiohttp.ClientSession._request):
        assert getattr(hook, "__assay_wire__", False)
        assert not getattr(hook.__wrapped__, "__assay_wire__", False)  # wrapped once


def test_outside_a_trial_the_hook_only_calls_through(server: WireServer) -> None:
    assert current.get() is None
    with httpx2.Client() as client:
        response = client.get(f"{server.base}/gzip")
    assert type(response.stream).__name__ == "BoundSyncStream"  # httpx2's own, untouched


def test_a_client_imported_after_install_is_hooked() -> None:
    code = (
        "import sys\n"
        "from assay.targets.wire.capture import install, hooked\n"
        "install()\n"
        "assert 'httpx' not in sys.modules and 'aiohttp' not in sys.modules, sys.modules.keys()\n"
        "assert hooked() == frozenset(), hooked()\n"
        "import httpx, aiohttp\n"
        "assert hooked() == {'httpx', 'aiohttp'}, hooked()\n"
        "assert httpx.Client._send_single_request.__assay_wire__\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.stdout.strip() == "ok", done.stderr

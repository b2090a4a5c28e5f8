"""The recording proxy (SPEC §15) between real clients and a real upstream on loopback:
the real key added on the way and never seen by the agent, answers streamed through as
they come, each trial's exchanges on its own route, a closed route refused."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from assay.targets.wire.exchange import MAX_BODY
from assay.targets.wire.proxy import (
    KEY_CUT,
    STAND_IN_KEY,
    KeyScrub,
    RecordingProxy,
    Upstream,
    credential_in,
    upstreams_from,
)

REAL_KEY = "sk-REAL-CANARY-7d21"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # 64 trials connect at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a hang-up the test makes on purpose


class Upstream_:
    """A model server: answers chat completions (JSON, or SSE in two parts), records requests."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        #: Set by a test to let a stream's second part go.
        self.release = threading.Event()
        self.big = 0
        #: Hang up after a stream's first part (a model server dying mid-answer).
        self.cut = False
        #: Refuse with 401, quoting the key sent, in a header and in a body sent in pieces
        #: that split it (as a careless gateway might).
        self.quote = False
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                upstream.seen.append({"path": self.path, "headers": dict(self.headers),
                                      "body": body})
                asked = json.loads(body or b"{}")
                if upstream.quote:
                    sent = self.headers.get("authorization", "")
                    data = json.dumps({"error": {
                        "message": f"Incorrect API key provided: {sent}"}}).encode()
                    self.send_response(401)
                    self.send_header("content-type", "application/json")
                    self.send_header("x-echo", sent)
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    at = data.index(sent.encode()) + 10
                    for piece in (data[:at], data[at:at + 3], data[at + 3:], b""):
                        self._chunk(piece)
                elif upstream.big:
                    data = b"x" * upstream.big
                    self._send(200, "application/octet-stream", data)
                elif asked.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    self._chunk(b'data: {"part": 1}\n\n')
                    if upstream.cut:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    upstream.release.wait(timeout=20)
                    self._chunk(b'data: {"part": 2}\n\ndata: [DONE]\n\n')
                    self._chunk(b"")
                else:
                    marker = asked.get("marker", "")
                    reply = {"id": "c1", "object": "chat.completion", "model": "served-1",
                             "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                 "role": "assistant", "content": f"echo {marker}"}}],
                             "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                       "total_tokens": 5}}
                    self._send(200, "application/json", json.dumps(reply).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream() -> Iterator[Upstream_]:
    server = Upstream_()
    yield server
    server.close()


@pytest.fixture
def proxy(upstream: Upstream_) -> Iterator[RecordingProxy]:
    served = RecordingProxy({
        "openai": Upstream("openai", upstream.url + "/v1", REAL_KEY),
        "anthropic": Upstream("anthropic", upstream.url, REAL_KEY),
        "gemini": Upstream("gemini", upstream.url, REAL_KEY)})
    served.start()
    yield served
    served.close()


def test_the_agent_holds_a_stand_in_and_the_upstream_gets_the_real_key(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    from openai import OpenAI

    route = proxy.open_route()
    env = route.environment()
    assert env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == STAND_IN_KEY
    assert REAL_KEY not in json.dumps(env)
    # The Agents SDK would upload the trial's traces to OpenAI, past the proxy.
    assert env["OPENAI_AGENTS_DISABLE_TRACING"] == "1"
    client = OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"],
                    max_retries=0)
    answer = client.chat.completions.create(model="asked-1", extra_body={"marker": "m1"},
                                            messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "echo m1" and answer.model == "served-1"
    (seen,) = upstream.seen
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["authorization"] == f"Bearer {REAL_KEY}"
    assert STAND_IN_KEY not in json.dumps(seen["headers"])

    (exchange,) = route.close()
    assert (exchange.method, exchange.url, exchange.status) == (
        "POST", upstream.url + "/v1/chat/completions", 200)
    assert json.loads(exchange.request_body)["model"] == "asked-1"
    assert json.loads(exchange.response_body)["model"] == "served-1"
    assert exchange.complete and not exchange.response_truncated
    assert exchange.header("authorization", response=False) is None
    assert REAL_KEY not in repr(exchange) and STAND_IN_KEY not in repr(exchange)


def test_a_stream_is_passed_on_as_it_comes_not_when_it_ends(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    route = proxy.open_route()
    base = route.environment()["OPENAI_BASE_URL"]
    with httpx.Client(timeout=30) as client, client.stream(
            "POST", base + "/chat/completions", json={"stream": True}) as answer:
        parts = answer.iter_raw()
        first = next(parts)
        # The upstream holds its second part until this line: the first came through alone.
        assert first == b'data: {"part": 1}\n\n'
        upstream.release.set()
        rest = b"".join(parts)
    assert rest == b'data: {"part": 2}\n\ndata: [DONE]\n\n'
    (exchange,) = route.close()
    assert exchange.response_body == first + rest and exchange.complete
    assert exchange.header("content-type") == "text/event-stream"


def test_a_stream_cut_mid_way_reaches_the_agent_cut_and_is_recorded_incomplete(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    upstream.cut = True
    route = proxy.open_route()
    base = route.environment()["OPENAI_BASE_URL"]
    got = b""
    with pytest.raises(httpx.HTTPError), httpx.Client(timeout=30) as client, client.stream(
            "POST", base + "/chat/completions", json={"stream": True}) as answer:
        for part in answer.iter_raw():
            got += part
    assert got == b'data: {"part": 1}\n\n'  # what arrived, and then the break
    (exchange,) = route.close()
    assert not exchange.complete and exchange.response_body == got
    assert exchange.status == 200


def test_a_route_whose_trial_ended_is_refused_and_records_nothing(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    route = proxy.open_route()
    base = route.environment()["OPENAI_BASE_URL"]
    assert route.close() == []
    answer = httpx.post(base + "/chat/completions", json={}, timeout=30)
    assert answer.status_code == 410 and "ended" in answer.json()["error"]["message"]
    assert upstream.seen == [] and route.close() == []
    unknown = httpx.post(f"{proxy.origin}/t/{route.token}x/openai/chat", json={}, timeout=30)
    assert unknown.status_code == 410


def test_a_key_in_the_query_is_neither_forwarded_nor_recorded(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    route = proxy.open_route()
    base = route.environment()["GOOGLE_GEMINI_BASE_URL"]
    answer = httpx.post(base + "/v1beta/models/g:generateContent?key=" + STAND_IN_KEY
                        + "&alt=json", json={}, timeout=30)
    assert answer.status_code == 200
    (seen,) = upstream.seen
    assert seen["path"] == "/v1beta/models/g:generateContent?alt=json"
    assert seen["headers"]["x-goog-api-key"] == REAL_KEY
    (exchange,) = route.close()
    assert "key=" not in exchange.url and exchange.url.endswith("?alt=json")


def test_an_upstream_that_cannot_be_reached_is_said_to_the_agent_and_recorded() -> None:
    closed = socket_port()
    proxy = RecordingProxy({"openai": Upstream("openai", f"http://127.0.0.1:{closed}/v1",
                                               REAL_KEY)})
    proxy.start()
    try:
        route = proxy.open_route()
        answer = httpx.post(route.environment()["OPENAI_BASE_URL"] + "/chat/completions",
                            json={"model": "m"}, timeout=30)
        assert answer.status_code == 502
        assert "could not reach" in answer.json()["error"]["message"]
        assert REAL_KEY not in answer.text
        (exchange,) = route.close()
        assert exchange.status is None and exchange.error is not None
        assert "failed" in exchange.error and REAL_KEY not in exchange.error
    finally:
        proxy.close()


def test_a_key_the_upstream_quotes_reaches_neither_the_agent_nor_the_record(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    from openai import AuthenticationError, OpenAI

    upstream.quote = True
    route = proxy.open_route()
    env = route.environment()
    client = OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"],
                    max_retries=0)
    with pytest.raises(AuthenticationError) as refused:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    # The upstream did quote the real key; the agent was told it cut out, header and body.
    assert upstream.seen[0]["headers"]["authorization"] == f"Bearer {REAL_KEY}"
    told = refused.value
    assert f"Incorrect API key provided: Bearer {KEY_CUT}" in str(told)
    assert told.response.headers["x-echo"] == f"Bearer {KEY_CUT}"
    assert REAL_KEY not in str(told) + repr(told.response.headers)
    (exchange,) = route.close()
    assert exchange.status == 401 and exchange.complete
    assert json.loads(exchange.response_body)["error"]["message"].endswith(KEY_CUT)
    assert REAL_KEY not in repr(exchange) and REAL_KEY.encode() not in exchange.response_body


def test_the_key_is_cut_wherever_the_pieces_split_it_and_nothing_else_waits() -> None:
    body = f'data: {{"error": "bad key {REAL_KEY}, and {REAL_KEY}!"}}\n\n'.encode()
    want = body.replace(REAL_KEY.encode(), KEY_CUT.encode())
    for i in range(len(body) + 1):
        for j in range(i, len(body) + 1):
            scrub = KeyScrub(REAL_KEY)
            got = b"".join(scrub.piece(part) for part in (body[:i], body[i:j], body[j:]))
            assert got + scrub.rest() == want, (i, j)
    # A piece that cannot begin the key goes on whole at once; one ending in a beginning
    # of it waits for the next only by that beginning.
    scrub = KeyScrub(REAL_KEY)
    assert scrub.piece(b'data: {"part": 1}\n\n') == b'data: {"part": 1}\n\n'
    assert scrub.piece(b"quoted sk-RE") == b"quoted "
    assert scrub.piece(b"D and more") == b"sk-RED and more"
    assert scrub.rest() == b""
    assert scrub.text(f"x-echo: Bearer {REAL_KEY}") == f"x-echo: Bearer {KEY_CUT}"


def test_a_placeholder_key_is_no_secret_and_is_cut_from_nothing() -> None:
    # A local server's "EMPTY" or "dummy" may be a word of the model's own answer.
    scrub = KeyScrub("EMPTY")
    assert scrub.piece(b"The box is EMPTY") == b"The box is EMPTY"
    assert scrub.text("EMPTY") == "EMPTY" and KeyScrub(None).piece(b"x") == b"x"


def test_many_trials_at_once_each_see_only_their_own(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    import asyncio

    routes = [proxy.open_route() for _ in range(64)]

    async def trial(i: int) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            base = routes[i].environment()["OPENAI_BASE_URL"]
            for n in range(2):
                answer = await client.post(base + "/chat/completions",
                                           json={"marker": f"t{i}-{n}"})
                assert answer.status_code == 200, answer.text
                assert answer.json()["choices"][0]["message"]["content"] == f"echo t{i}-{n}"

    async def all_trials() -> None:
        await asyncio.gather(*(trial(i) for i in range(64)))

    asyncio.run(all_trials())
    for i, route in enumerate(routes):
        markers = [json.loads(e.request_body)["marker"] for e in route.close()]
        assert markers == [f"t{i}-0", f"t{i}-1"]


def test_a_body_past_the_bound_reaches_the_agent_whole_and_is_kept_cut(
        proxy: RecordingProxy, upstream: Upstream_) -> None:
    upstream.big = MAX_BODY + 1000
    route = proxy.open_route()
    answer = httpx.post(route.environment()["OPENAI_BASE_URL"] + "/files", json={},
                        timeout=60)
    assert len(answer.content) == MAX_BODY + 1000
    (exchange,) = route.close()
    assert len(exchange.response_body) == MAX_BODY and exchange.response_truncated


def test_upstreams_come_from_the_flags_then_the_environment_then_the_apis_own() -> None:
    found = upstreams_from({"OPENAI_BASE_URL": "http://vllm:8000/v1/", "OPENAI_API_KEY": "k1",
                            "GOOGLE_API_KEY": "g1"}, {"anthropic": "http://claude-proxy"})
    assert found["openai"] == Upstream("openai", "http://vllm:8000/v1", "k1")
    assert found["anthropic"] == Upstream("anthropic", "http://claude-proxy", None)
    assert found["gemini"].base_url == "https://generativelanguage.googleapis.com"
    assert found["gemini"].key == "g1" and "g1" not in repr(found["gemini"])


def test_the_settings_variable_names_an_upstream_before_the_sdks_own_variable() -> None:
    environ = {"ASSAY_UPSTREAM_OPENAI": "http://gateway/v1", "OPENAI_BASE_URL": "http://sdk/v1"}
    assert upstreams_from(environ, {})["openai"].base_url == "http://gateway/v1"
    # A flag, a settings file, or what a queued run carries still wins over both.
    assert upstreams_from(environ, {"openai": "http://given/v1"})["openai"].base_url \
        == "http://given/v1"


@pytest.mark.parametrize(("url", "said"), [
    ("http://me:pw@host/v1", "user:password@"), ("http://me@host/v1", "user:password@"),
    ("https://host/v1?key=abc", "key="), ("https://host/v1?x-api-key=abc", "x-api-key="),
    ("https://host/v1beta?alt=sse", None), ("http://127.0.0.1:8000/v1", None)])
def test_a_credential_in_an_upstream_url_is_named(url: str, said: str | None) -> None:
    found = credential_in(url)
    assert (found is None) if said is None else (said in str(found))
    assert "abc" not in str(found) and "pw" not in str(found)


def socket_port() -> int:
    """A loopback port nobody listens on."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port


# --- the OTLP receiver -----------------------------------------------------------------------


def _export(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tool: str,
            call_id: str | None) -> None:
    """One execute_tool span, exported as an agent's SDK would: OTLP/HTTP protobuf, to the
    endpoint and with the resource the route's environment names."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", env["OTEL_RESOURCE_ATTRIBUTES"])
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span(f"execute_tool {tool}") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", tool)
        span.set_attribute("gen_ai.tool.call.arguments", '{"path": "a.txt"}')
        if call_id:
            span.set_attribute("gen_ai.tool.call.id", call_id)
    provider.shutdown()


def test_spans_an_agent_exports_are_filed_with_its_trial(
        proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.targets.otel import executed_tools

    first, second = proxy.open_route(), proxy.open_route()
    env = first.environment(resource_attributes="service.name=my-agent")
    assert env["OTEL_RESOURCE_ATTRIBUTES"] == f"service.name=my-agent,assay.trial={first.token}"
    _export(env, monkeypatch, "read_file", "c-1")
    _export(second.environment(), monkeypatch, "delete_all", None)
    events = executed_tools(first.spans)
    assert [(e["kind"], e["name"], e["call_id"]) for e in events] == [
        ("tool_call", "read_file", "c-1"), ("tool_result", "read_file", "c-1")]
    assert events[0]["arguments"] == {"path": "a.txt"}
    assert [e["name"] for e in executed_tools(second.spans)] == ["delete_all", "delete_all"]
    assert all(len(span["traceId"]) == 32 for span in first.spans)  # hex, as OTLP/JSON has it
    first.close()
    _export(env, monkeypatch, "late_tool", "c-2")  # its trial has ended: not kept
    assert [e["name"] for e in executed_tools(first.spans)] == ["read_file", "read_file"]


def test_otlp_json_is_taken_and_garbage_is_refused(proxy: RecordingProxy) -> None:
    route = proxy.open_route()
    document = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "assay.trial",
                                     "value": {"stringValue": route.token}}]},
        "scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8,
                                   "name": "execute_tool x", "startTimeUnixNano": "1",
                                   "attributes": [{"key": "gen_ai.tool.name",
                                                   "value": {"stringValue": "x"}}]}]}]}]}
    url = proxy.origin + "/v1/traces"
    assert httpx.post(url, json=document, timeout=30).status_code == 200
    assert [s["name"] for s in route.spans] == ["execute_tool x"]
    for body, kind in ((b"\xff\x00garbage", "application/x-protobuf"),
                       (b"[1, 2", "application/json"), (b"[1]", "application/json")):
        answer = httpx.post(url, content=body, headers={"content-type": kind}, timeout=30)
        assert answer.status_code == 400, body
    assert len(route.spans) == 1


def test_an_exchange_that_is_no_model_call_is_kept_as_a_note() -> None:
    from assay.model import Evidence, Trace
    from assay.targets.wire import Exchange
    from assay.targets.wire.fold import read_exchanges
    from assay.targets.wire.observed import with_wire

    page = Exchange(method="GET", url="https://example.org/weather?key=SECRET", status=200,
                    response_body=b"<html>sunny</html>")
    trace = Trace(output="ok", evidence={"tool_calls": Evidence.OBSERVED})
    seen = with_wire(trace, read_exchanges([page]))
    (note,) = [e for e in seen.events if e.kind == "http"]
    assert "example.org" in (note.text or "") and "SECRET" not in seen.model_dump_json()
    assert seen.evidence == trace.evidence and seen.steps is None  # no model call: no facts

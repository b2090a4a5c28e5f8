"""One judge call against a real loopback OpenAI-compatible server the test scripts per request."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from assay.judging import JUDGE_TEMPLATE, prompt_digest, render
from assay.judging.answers import OUT_OF_FORM_JUDGE, REFUSED
from assay.judging.client import (
    JudgeSettings,
    Opinion,
    ask,
    judge_opinion,
    make_client,
    score_answer,
)
from assay.targets.backoff import Backoff, Wait
from assay.targets.prices import Price, PriceTable

pytestmark = pytest.mark.real

CANARY = "sk-test-canary"
HIDDEN = "the hidden reference: refund within 3 days"
PROMPT = render(JUDGE_TEMPLATE, criteria="apologises", expected=HIDDEN, actual="Sorry!")
DIGEST = prompt_digest(JUDGE_TEMPLATE, {"model": "judge-model"})


@dataclass
class Reply:
    """What the server does with one request."""

    text: str | None = "pass\nbecause it apologises"
    model: str | None = "judge-model-2025"
    usage: dict[str, int] | None = field(
        default_factory=lambda: {"prompt_tokens": 120, "completion_tokens": 8})
    refusal: str | None = None
    status: int = 200
    choices: list[Any] | None = None  # replaces the one choice when set
    body: bytes | None = None  # sent as it is (not JSON) when set
    hang: bool = False  # wait for the test's teardown before answering
    headers: dict[str, str] = field(default_factory=dict)  # sent with an error status


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client gone at its timeout is expected here


@dataclass
class Judge:
    """The scripted server: ``script`` is played one reply per request; ``seen`` is what came."""

    base_url: str = ""
    script: list[Reply] = field(default_factory=list)
    seen: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def play(self, *replies: Reply) -> JudgeSettings:
        self.script = list(replies)
        return JudgeSettings(model="judge-model", base_url=self.base_url, timeout_s=5)

    def next(self, headers: dict[str, str], body: Any) -> Reply:
        with self.lock:
            self.seen.append((headers, body))
            reply = self.script.pop(0) if self.script else Reply(status=599)
        self.arrived.set()
        return reply


def _handler(judge: Judge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw)
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = judge.next(headers, body)
            if reply.hang:
                judge.release.wait(30)
            if reply.body is not None:
                return self._send(reply.status, reply.body, "text/html")
            if reply.status != 200:
                # A server that echoes the prompt in its error: the opinion must not.
                error = {"error": {"message": f"bad: {body['messages'][0]['content']}"}}
                return self._send(reply.status, json.dumps(error).encode(),
                                  headers=reply.headers)
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.refusal is not None:
                message["refusal"] = reply.refusal
            payload: dict[str, Any] = {
                "id": "c1", "object": "chat.completion", "created": 0, "model": reply.model,
                "choices": reply.choices if reply.choices is not None else [
                    {"index": 0, "message": message, "finish_reason": "stop"}]}
            if reply.usage is not None:
                payload["usage"] = {**reply.usage, "total_tokens": sum(reply.usage.values())}
            self._send(200, json.dumps(payload).encode())

        def _send(self, status: int, data: bytes, kind: str = "application/json",
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[Judge]:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    state = Judge()
    server = _Quiet(("127.0.0.1", 0), _handler(state))
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def call(settings: JudgeSettings, prompt: str = PROMPT, **extra: Any) -> Opinion:
    async def go() -> Opinion:
        client = make_client(settings)
        try:
            return await ask(client, settings, prompt, prompt_digest=DIGEST, **extra)
        finally:
            await client.close()

    return asyncio.run(go())


def test_a_clear_answer_is_an_opinion_with_its_tokens_and_the_model_that_answered(
    judge: Judge,
) -> None:
    opinion = call(judge.play(Reply()))
    assert opinion.error is None
    assert opinion.raw == "pass\nbecause it apologises"
    assert opinion.model == "judge-model-2025"  # as the server named it
    assert (opinion.input_tokens, opinion.output_tokens) == (120, 8)
    assert opinion.cost_usd is None  # a model the table does not price: unknown, not 0
    assert opinion.prompt_digest == DIGEST
    assert judge_opinion(opinion) == ("pass", "the judge (judge-model-2025) said pass")
    record = opinion.to_json()
    assert record["cost_evidence"] == "unavailable" and record["raw"] == opinion.raw
    json.dumps(record)


def test_the_server_gets_the_rendered_prompt_the_sampling_and_no_key_of_the_user(
    judge: Judge,
) -> None:
    judge.play(Reply())
    settings = JudgeSettings(model="judge-model", base_url=judge.base_url, temperature=0.0,
                             seed=7, max_tokens=200)
    opinion = call(settings)
    [(headers, body)] = judge.seen
    assert body["model"] == "judge-model"
    assert body["messages"] == [{"role": "user", "content": PROMPT}]
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 7, 200)
    assert "top_p" not in body
    assert opinion.parameters == {"temperature": 0.0, "seed": 7, "max_tokens": 200}
    assert headers["authorization"] == "Bearer unused"
    assert not any(CANARY in value for value in headers.values())


def test_the_default_settings_sample_at_temperature_zero(judge: Judge) -> None:
    call(judge.play(Reply()))
    [(_, body)] = judge.seen
    assert body["temperature"] == 0.0 and body["max_tokens"] == 1024


def test_a_priced_model_costs_what_the_table_says_and_the_clock_is_injected(
    judge: Judge,
) -> None:
    ticks = iter([10.0, 12.5])
    table = PriceTable({"judge-model": Price(input=1.0, output=2.0)})
    opinion = call(judge.play(Reply(model=None, usage={"prompt_tokens": 1000,
                                                       "completion_tokens": 100})),
                   prices=table, clock=lambda: next(ticks))
    assert opinion.model == "judge-model"  # the server named none: the one asked
    assert opinion.cost_usd == pytest.approx(0.0012)
    assert opinion.latency_s == 2.5
    assert opinion.to_json()["cost_evidence"] == "inferred"


def test_no_token_counts_means_no_tokens_and_no_cost(judge: Judge) -> None:
    opinion = call(judge.play(Reply(model="gpt-4o-mini", usage=None)))
    assert (opinion.input_tokens, opinion.output_tokens, opinion.cost_usd) == (None, None, None)


def test_an_answer_out_of_form_is_inconclusive_with_the_raw_kept(judge: Judge) -> None:
    opinion = call(judge.play(Reply(text="Verdict: pass, mostly")))
    assert opinion.error is None and opinion.raw == "Verdict: pass, mostly"
    assert judge_opinion(opinion) == ("inconclusive", OUT_OF_FORM_JUDGE)


def test_a_refusal_is_inconclusive_whether_in_the_text_or_the_refusal_field(
    judge: Judge,
) -> None:
    said = call(judge.play(Reply(text="I'm sorry, I can't help with grading this.")))
    assert judge_opinion(said) == ("inconclusive", REFUSED)
    field_ = call(judge.play(Reply(text=None, refusal="I cannot assist with that.")))
    assert field_.raw == "I cannot assist with that." and field_.error == REFUSED
    assert judge_opinion(field_) == ("inconclusive", REFUSED)


def test_a_judge_slower_than_its_timeout_is_an_error_not_a_wait(judge: Judge) -> None:
    settings = JudgeSettings(model="judge-model", base_url=judge.base_url, timeout_s=0.3)
    judge.script = [Reply(hang=True)]
    opinion = call(settings)
    assert opinion.raw is None
    assert opinion.error == "timed out after 0.3s"
    assert opinion.latency_s < 5
    assert judge_opinion(opinion) == ("inconclusive", "judge error: timed out after 0.3s")
    assert score_answer(opinion).why == "judge error: timed out after 0.3s"


@pytest.mark.parametrize(("status", "error"), [
    (500, "HTTP 500"),
    (400, "HTTP 400"),
    (404, "HTTP 404 (the server does not serve this model)"),
])
def test_an_http_error_is_an_opinion_with_the_status_never_the_servers_text(
    judge: Judge, status: int, error: str,
) -> None:
    opinion = call(judge.play(Reply(status=status, headers={"Retry-After": "0"})))
    assert (opinion.raw, opinion.error, opinion.model) == (None, error, "judge-model")
    assert len(judge.seen) == 1 and opinion.waits == ()  # no retry
    assert HIDDEN not in json.dumps(opinion.to_json())
    assert judge_opinion(opinion)[0] == "inconclusive"


def test_a_closed_port_is_a_refused_connection() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = JudgeSettings(model="judge-model", base_url=f"http://127.0.0.1:{port}/v1")
    opinion = call(settings)
    assert (opinion.raw, opinion.error) == (None, "refused connection")
    assert judge_opinion(opinion) == ("inconclusive", "judge error: refused connection")


def test_a_reply_without_choices_or_that_is_not_json_is_an_error(judge: Judge) -> None:
    empty = call(judge.play(Reply(choices=[])))
    assert (empty.raw, empty.error, empty.model) == (None, "no choices", "judge-model-2025")
    garbage = call(judge.play(Reply(body=b"<html>proxy error</html>")))
    assert (garbage.raw, garbage.error) == (None, "the answer is not JSON")
    assert judge_opinion(garbage)[0] == "inconclusive"


def test_two_calls_may_disagree_and_both_opinions_are_kept(judge: Judge) -> None:
    settings = judge.play(Reply(text="pass\nfine"), Reply(text="fail\nno remedy offered"))

    async def go() -> list[Opinion]:
        client = make_client(settings)
        try:
            return [await ask(client, settings, PROMPT, prompt_digest=DIGEST) for _ in range(2)]
        finally:
            await client.close()

    first, second = asyncio.run(go())
    assert [judge_opinion(o)[0] for o in (first, second)] == ["pass", "fail"]
    assert first.to_json()["raw"] != second.to_json()["raw"]
    assert [body["messages"] for _, body in judge.seen] == [
        [{"role": "user", "content": PROMPT}]] * 2


def test_cancellation_goes_through(judge: Judge) -> None:
    settings = judge.play(Reply(hang=True))

    async def go() -> None:
        client = make_client(settings)
        try:
            task = asyncio.create_task(ask(client, settings, PROMPT, prompt_digest=DIGEST))
            assert await asyncio.to_thread(judge.arrived.wait, 5)
            task.cancel()
            await task
        finally:
            await client.close()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())


@pytest.mark.parametrize("bad", [
    {"timeout_s": 0}, {"timeout_s": float("nan")}, {"max_tokens": 0}, {"model": ""},
    {"base_url": "ftp://example.org"}, {"base_url": "not a url"},
])
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    given: dict[str, Any] = {"model": "m", "base_url": "http://127.0.0.1:1/v1", **bad}
    with pytest.raises(ValueError):
        JudgeSettings(**given)


# --- "not now": 429 and 503 -------------------------------------------------------------


def test_429s_with_retry_after_are_waited_out_and_the_opinion_says_so(judge: Judge) -> None:
    busy = Reply(status=429, headers={"Retry-After": "0.2"})
    settings = judge.play(busy, busy, Reply())
    began = time.perf_counter()
    opinion = call(settings)
    assert time.perf_counter() - began >= 0.4
    assert (opinion.error, opinion.raw) == (None, "pass\nbecause it apologises")
    assert judge_opinion(opinion)[0] == "pass"
    assert len(judge.seen) == 3
    assert opinion.waits == (Wait(429, 0.2, "Retry-After"),) * 2
    assert opinion.latency_s >= 0.4  # the waits are part of the call
    record = opinion.to_json()
    assert record["waits"] == [{"status": 429, "waited_s": 0.2, "after": "Retry-After"}] * 2
    assert Opinion.from_json(json.loads(json.dumps(record))) == opinion


def test_an_opinion_that_never_waited_keeps_the_record_it_had(judge: Judge) -> None:
    record = call(judge.play(Reply())).to_json()
    assert "waits" not in record


def test_a_503_burst_backs_off_by_the_seeded_rule(judge: Judge) -> None:
    def once() -> Opinion:
        settings = judge.play(Reply(status=503), Reply(status=503), Reply())
        return call(settings, backoff=Backoff(base_s=0.02, rng=random.Random(4)))

    first = once()
    assert first.error is None and len(judge.seen) == 3
    assert [(w.status, w.after) for w in first.waits] == [(503, "back-off")] * 2
    assert all(0 <= w.seconds <= 0.02 * 2 ** k for k, w in enumerate(first.waits))
    assert once().waits == first.waits


def test_a_retry_after_past_the_judges_timeout_is_not_waited_for(judge: Judge) -> None:
    judge.play(Reply(status=429, headers={"Retry-After": "5"}), Reply())
    settings = JudgeSettings(model="judge-model", base_url=judge.base_url, timeout_s=0.5)
    began = time.perf_counter()
    opinion = call(settings)
    assert time.perf_counter() - began < 0.5
    assert opinion.error == ("HTTP 429 (rate limited); did not wait 5 s (Retry-After): "
                             "past the timeout")
    assert (opinion.raw, opinion.waits, len(judge.seen)) == (None, (), 1)
    assert HIDDEN not in json.dumps(opinion.to_json())  # the 429's body echoed the prompt
    assert judge_opinion(opinion)[0] == "inconclusive"


def test_a_refusal_that_never_ends_is_an_error_after_six_tries(judge: Judge) -> None:
    busy = Reply(status=503, headers={"retry-after-ms": "1"})
    opinion = call(judge.play(*[busy] * 10))
    assert opinion.error == "HTTP 503; gave up after 6 tries"
    assert len(judge.seen) == 6
    assert opinion.waits == (Wait(503, 0.001, "retry-after-ms"),) * 5


def test_the_judges_timeout_bounds_the_waits_and_the_retries_together(judge: Judge) -> None:
    judge.play(Reply(status=429, headers={"Retry-After": "0.2"}), Reply(hang=True))
    settings = JudgeSettings(model="judge-model", base_url=judge.base_url, timeout_s=0.6)
    began = time.perf_counter()
    opinion = call(settings)
    assert time.perf_counter() - began < 2
    assert opinion.error == "timed out after 0.6s"
    assert opinion.waits == (Wait(429, 0.2, "Retry-After"),)  # what happened before it

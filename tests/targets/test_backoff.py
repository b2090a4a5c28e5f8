"""Back-off after 429/503: the delay rule alone, then ``openai:`` against a loopback server.

The server is examples/support/stub_model.py (as in test_openai.py), scripted
to refuse the first requests with a status and header fields of the test's
choosing, then to answer. Nothing of assay is patched: the target's
``backoff`` attribute is given a rule with a seeded rng and small waits.
"""

from __future__ import annotations

import asyncio
import importlib.util
import random
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assay.engine import Battery, BatteryOptions
from assay.model import Case, CaseResult, Report, Trace
from assay.suites import load_suite_file
from assay.targets import TargetOptions, TrialBroken, TrialRequest
from assay.targets.backoff import (
    AFTER,
    AFTER_MS,
    BACKED_OFF,
    Backoff,
    Refused,
    Wait,
    asked_wait,
)
from assay.targets.openai import OpenAITarget

ROOT = Path(__file__).resolve().parents[2]
STUB_FILE = ROOT / "examples" / "support" / "stub_model.py"
NOW = 1_700_000_000.0


def _load_stub() -> ModuleType:
    spec = importlib.util.spec_from_file_location("assay_example_stub_model_b", STUB_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stub_model = _load_stub()


# --- how long: the server's word -----------------------------------------------------


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "2"}, (2.0, AFTER)),
    ({"retry-after": " 0.2 "}, (0.2, AFTER)),
    ({"retry-after": "0"}, (0.0, AFTER)),
    ({"retry-after-ms": "150"}, (0.15, AFTER_MS)),
    # Milliseconds are the finer word: they win over seconds.
    ({"retry-after-ms": "150", "retry-after": "10"}, (0.15, AFTER_MS)),
    # A malformed retry-after-ms leaves Retry-After to speak.
    ({"retry-after-ms": "soon", "retry-after": "3"}, (3.0, AFTER)),
    ({"retry-after": formatdate(NOW + 5, usegmt=True)}, (5.0, AFTER)),
    ({"retry-after": formatdate(NOW + 90)}, (90.0, AFTER)),  # "-0000", the zone unsaid
    ({"retry-after": formatdate(NOW - 60, usegmt=True)}, (0.0, AFTER)),  # past: now
])
def test_the_server_says_how_long_in_seconds_milliseconds_or_a_date(
        headers: dict[str, str], expected: tuple[float, str]) -> None:
    found = asked_wait(headers, now=NOW)
    assert found is not None
    assert found == (pytest.approx(expected[0]), expected[1])


@pytest.mark.parametrize("value", [
    "", "soon", "-1", "+3", "1e3", "inf", "nan", "0x10", "1,5", "٣", "3 s",
    "Sun, 99 Foo 2024 00:00:00 GMT", "a" * 500,
])
def test_a_retry_after_that_is_not_one_is_as_if_absent(value: str) -> None:
    assert asked_wait({"retry-after": value}, now=NOW) is None
    assert asked_wait({"retry-after-ms": value}, now=NOW) is None
    assert asked_wait({}, now=NOW) is None


def test_what_the_server_asks_is_capped_but_the_time_needed_is_not() -> None:
    rule = Backoff(cap_s=30.0)
    wait, needed = rule.wait(Refused(429, {"retry-after": "100"}), 0, now=NOW)
    assert (wait.seconds, wait.after, needed) == (30.0, AFTER, 100.0)
    wait, needed = rule.wait(Refused(503, {"retry-after": "garbage"}), 0, now=NOW)
    assert wait.after == BACKED_OFF and wait.status == 503  # garbage: our own back-off


# --- how long: our own back-off, with full jitter -------------------------------------


def test_back_off_draws_from_zero_to_a_doubling_bound_capped() -> None:
    rule = Backoff(base_s=0.5, cap_s=30.0, rng=random.Random(1))
    for waited, bound in ((0, 0.5), (1, 1.0), (2, 2.0), (5, 16.0), (6, 30.0), (40, 30.0)):
        draws = [rule.wait(Refused(429), waited)[0].seconds for _ in range(400)]
        assert all(0.0 <= d <= bound for d in draws)
        # Full jitter: the draws spread over the whole range, not near the bound alone.
        assert min(draws) < 0.1 * bound and max(draws) > 0.9 * bound


def test_a_seeded_rng_repeats_its_waits_and_another_seed_does_not() -> None:
    def draws(seed: int) -> list[float]:
        rule = Backoff(rng=random.Random(seed))
        return [rule.wait(Refused(503), k)[0].seconds for k in range(5)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


@pytest.mark.parametrize("bad", [{"tries": 0}, {"base_s": -1.0}, {"cap_s": float("inf")},
                                 {"base_s": float("nan")}])
def test_a_rule_that_cannot_work_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Backoff(**bad)


def test_a_wait_reads_as_a_sentence_and_as_data() -> None:
    wait = Wait(429, 1.5, AFTER)
    assert wait.note() == "waited 1.5 s after HTTP 429 (Retry-After)"
    assert Wait.from_json(wait.to_json()) == wait
    for bad in (None, [], {"status": "429", "waited_s": 1, "after": "x"},
                {"status": 429, "waited_s": True, "after": "x"},
                {"status": 429, "waited_s": float("nan"), "after": "x"}):
        with pytest.raises(ValueError):
            Wait.from_json(bad)


# --- the loop, on its own ---------------------------------------------------------------


def _loop(rule: Backoff, refusals: list[Refused], *, within: float = 10.0
          ) -> tuple[str | Refused, int, list[Wait]]:
    """Run ``rule.call`` on an attempt that raises ``refusals`` in turn, then answers."""
    asked = 0
    told: list[Wait] = []

    async def attempt() -> str:
        nonlocal asked
        asked += 1
        if refusals:
            raise refusals.pop(0)
        return "answer"

    async def go() -> str | Refused:
        deadline = asyncio.get_running_loop().time() + within
        try:
            return await rule.call(attempt, deadline=deadline, on_wait=told.append)
        except Refused as stood:
            return stood

    return asyncio.run(go()), asked, told


def test_the_loop_asks_again_until_an_answer_telling_each_wait() -> None:
    refusals = [Refused(429, {"retry-after": "0.01"}), Refused(503)]
    got, asked, told = _loop(Backoff(base_s=0.01, rng=random.Random(3)), refusals)
    assert (got, asked) == ("answer", 3)
    assert [(w.status, w.after) for w in told] == [(429, AFTER), (503, BACKED_OFF)]


def test_the_loop_gives_up_after_its_tries_and_the_last_refusal_stands() -> None:
    got, asked, told = _loop(Backoff(tries=4, base_s=0.0),
                             [Refused(429, message=str(i)) for i in range(10)])
    assert isinstance(got, Refused) and asked == 4 and len(told) == 3
    assert (got.message, got.stopped, got.waits) == ("3", "gave up after 4 tries", tuple(told))


def test_the_loop_does_not_wait_past_the_deadline() -> None:
    began = time.perf_counter()
    got, asked, told = _loop(Backoff(), [Refused(429, {"retry-after": "5"})], within=1.0)
    assert time.perf_counter() - began < 1.0  # refused at once, not at the deadline
    assert isinstance(got, Refused) and asked == 1 and told == []
    assert got.stopped == "did not wait 5 s (Retry-After): past the timeout"


# --- openai: against a real server ---------------------------------------------------


class Refusing:
    """A stub server's script: the first ``turns`` answers in order, then ``then`` forever."""

    def __init__(self, turns: list[dict[str, Any]], then: dict[str, Any] | None = None,
                 hold: threading.Event | None = None) -> None:
        self.turns = list(turns)
        self.then = then if then is not None else {"content": "Hello."}
        self.hold = hold
        self.lock = threading.Lock()
        self.times: list[float] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.times.append(time.perf_counter())
            turn = self.turns.pop(0) if self.turns else None
        if turn is None and self.hold is not None:
            self.hold.wait(30)  # the answer after the refusals hangs until the test ends
        return turn if turn is not None else self.then


def refusals(k: int, status: int = 429, **headers: str) -> list[dict[str, Any]]:
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    return [{"status": status, "headers": named} for _ in range(k)]


@pytest.fixture
def serve() -> Iterator[Callable[[Refusing], Any]]:
    servers: list[Any] = []

    def start(script: Refusing) -> Any:
        server = stub_model.StubServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASSAY_OPENAI_BASE_URL", "ASSAY_PRICES", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def target_for(url: str, rule: Backoff | None = None, base_dir: Path | None = None
               ) -> OpenAITarget:
    target = OpenAITarget("openai:test-model",
                          TargetOptions(base_dir=base_dir or Path.cwd(), base_url=url))
    target.backoff = rule if rule is not None else Backoff(base_s=0.02, rng=random.Random(5))
    return target


def run(target: OpenAITarget, timeout_s: float = 10.0) -> Trace:
    async def go() -> Trace:
        await target.start()
        try:
            return await target.run(TrialRequest(case=Case(id="c1", input="hi"), n=1,
                                                  timeout_s=timeout_s))
        finally:
            await target.close()

    return asyncio.run(go())


def waits_in(trace: Trace) -> list[dict[str, Any]]:
    return [e.result for e in trace.events if e.kind == "error"]


def test_two_429s_with_retry_after_are_waited_out_and_written_in_the_trace(serve: Any) -> None:
    script = Refusing(refusals(2, 429, Retry_After="0.2"))
    server = serve(script)
    trace = run(target_for(server.url))
    assert (trace.status, trace.output, trace.steps) == ("ok", "Hello.", 1)
    assert len(server.seen) == 3
    assert waits_in(trace) == [{"status": 429, "waited_s": 0.2, "after": "Retry-After"}] * 2
    first, second, answer = trace.events
    assert first.text == ("model server: waited 0.2 s after HTTP 429 (Retry-After), "
                          "then asked again")
    assert answer.kind == "message" and answer.text == "Hello."
    # It did wait: each request came at least the asked time after the one before.
    gaps = [b - a for a, b in zip(script.times, script.times[1:], strict=False)]
    assert all(gap >= 0.19 for gap in gaps), gaps


def test_a_503_burst_without_a_header_backs_off_by_the_seeded_rule(serve: Any) -> None:
    def once() -> tuple[Trace, int]:
        server = serve(Refusing(refusals(3, 503)))
        trace = run(target_for(server.url, Backoff(base_s=0.02, rng=random.Random(11))))
        return trace, len(server.seen)

    trace, seen = once()
    assert (trace.status, seen) == ("ok", 4)
    waits = waits_in(trace)
    assert [(w["status"], w["after"]) for w in waits] == [(503, "back-off")] * 3
    assert all(0 <= w["waited_s"] <= 0.02 * 2 ** k for k, w in enumerate(waits))
    again, _ = once()
    assert waits_in(again) == waits  # the same seed, the same waits


def test_retry_after_ms_is_honoured_before_retry_after(serve: Any) -> None:
    server = serve(Refusing(refusals(1, 429, retry_after_ms="50", Retry_After="10")))
    began = time.perf_counter()
    trace = run(target_for(server.url))
    assert time.perf_counter() - began < 5
    assert waits_in(trace) == [{"status": 429, "waited_s": 0.05, "after": "retry-after-ms"}]


def test_a_wait_in_a_later_step_sits_between_that_steps_events(serve: Any) -> None:
    first = {"tool_calls": [{"name": "ask_user", "arguments": {"question": "ok?"}}]}
    server = serve(Refusing([first, *refusals(1, 429, Retry_After="0")]))
    target = target_for(server.url)

    async def go() -> Trace:
        from assay.model.fixture import ToolFixture

        await target.start()
        try:
            return await target.run(TrialRequest(
                case=Case(id="c1", input="hi"), n=1, timeout_s=10.0,
                tools=ToolFixture(answers={"ask_user": "yes"})))
        finally:
            await target.close()

    trace = asyncio.run(go())
    assert [e.kind for e in trace.events] == ["ask", "answer", "error", "message"]
    assert (trace.status, trace.steps, len(server.seen)) == ("ok", 2, 3)


def test_a_retry_after_past_the_trials_timeout_is_not_waited_for(serve: Any) -> None:
    server = serve(Refusing(refusals(1, 429, Retry_After="5")))
    began = time.perf_counter()
    with pytest.raises(TrialBroken) as broken:
        run(target_for(server.url), timeout_s=1.0)
    assert time.perf_counter() - began < 1.0
    assert str(broken.value).startswith("the server answered HTTP 429: ")
    assert str(broken.value).endswith(
        "scripted HTTP 429 (did not wait 5 s (Retry-After): past the timeout)")
    assert len(server.seen) == 1


def test_a_refusal_that_never_ends_breaks_the_trial_after_six_tries(serve: Any) -> None:
    server = serve(Refusing(refusals(50, 503, Retry_After="0")))
    with pytest.raises(TrialBroken, match=r"HTTP 503: .*\(gave up after 6 tries\)"):
        run(target_for(server.url))
    assert len(server.seen) == 6


@pytest.mark.parametrize("status", [400, 500, 502])
def test_other_statuses_are_not_asked_again(serve: Any, status: int) -> None:
    server = serve(Refusing(refusals(3, status, Retry_After="0")))
    with pytest.raises(TrialBroken, match=f"HTTP {status}: .*scripted HTTP {status}$"):
        run(target_for(server.url))
    assert len(server.seen) == 1


# --- in a battery ---------------------------------------------------------------------

SUITE = """\
suite: t/backoff@1
timeout_s: {timeout}
cases:
  - id: c1
    input: hi
    expect:
      - status: ok
"""


def battery(tmp_path: Path, script: Refusing, timeout: float,
            traces: dict[tuple[str, int], Any] | None = None) -> tuple[Report, int]:
    suite = tmp_path / "s.suite.yaml"
    suite.write_text(textwrap.dedent(SUITE.format(timeout=timeout)), encoding="utf-8")
    server = stub_model.StubServer(script)
    try:
        target = target_for(server.url, base_dir=tmp_path)
        made = Battery(load_suite_file(suite), target, BatteryOptions())
        if traces is not None:  # the report keeps no trace; the battery hands each one on
            made.on_result = lambda case, result: traces.__setitem__((case.id, result.n),
                                                                     result.trace)
        return asyncio.run(made.run()), len(server.seen)
    finally:
        server.close()


def only_trial(report: Report) -> Any:
    (case,) = report.cases
    assert isinstance(case, CaseResult)
    (trial,) = case.trials
    return trial


def test_in_a_battery_the_trial_passes_and_its_stored_trace_shows_the_waits(
        tmp_path: Path) -> None:
    traces: dict[tuple[str, int], Any] = {}
    report, seen = battery(tmp_path, Refusing(refusals(2, 429, Retry_After="0.05")), 10,
                           traces)
    trial = only_trial(report)
    assert (trial.outcome, seen) == ("pass", 3)
    assert [e.text for e in traces[report.cases[0].id, 1].events if e.kind == "error"] == [
        "model server: waited 0.05 s after HTTP 429 (Retry-After), then asked again"] * 2


def test_in_a_battery_a_wait_past_the_timeout_breaks_the_trial_before_its_timeout(
        tmp_path: Path) -> None:
    began = time.perf_counter()
    report, seen = battery(tmp_path, Refusing(refusals(1, 429, Retry_After="30")), 2)
    assert time.perf_counter() - began < 2.0
    trial = only_trial(report)
    assert (trial.outcome, seen) == ("broken", 1)
    assert "HTTP 429" in trial.reason and "past the timeout" in trial.reason


def test_a_hang_after_waits_alone_is_broken_before_any_output_as_without_them(
        tmp_path: Path) -> None:
    # Waits are not the agent's doing: with no answer yet, the timeout leaves the
    # trial broken, as it did before there were waits, not graded on a bare trace.
    hold = threading.Event()
    try:
        report, seen = battery(
            tmp_path, Refusing(refusals(1, 429, Retry_After="0.05"), hold=hold), 1)
    finally:
        hold.set()
    trial = only_trial(report)
    assert (trial.outcome, seen) == ("broken", 2)
    assert trial.reason == "timed out after 1s before any output"

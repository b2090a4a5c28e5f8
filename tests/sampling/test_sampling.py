"""The pure parts behind ``assay proxy``: reference-free checks, seeded sampling, the
bounded buffer, and a proxied call as a trace, a grade and a queue row."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from assay.sampling.buffer import Handled, SampleBuffer, Sampler
from assay.sampling.proxy_calls import ProxiedCall, ProxyChecks, call_trace, grade_call, queue_row
from assay.sampling.reference_free import left_out, reference_free
from assay.suites import load_suite_file
from assay.targets.mcp_connection import Answer

SUITE = """\
suite: demo/proxy.checks@1
call: {tool: lookup}
hidden: hidden/
cases:
  - id: one
    input: {q: a}
    expect:
      - status: ok
      - {path: $.rows, equals: [1]}
      - never_calls: [erp.*]
      - not_contains: Traceback
  - id: two
    input: {q: b}
    expect:
      - never_calls: [erp.*]
      - contains: b
      - {path: $.rows, type: array}
      - calls: lookup
"""


def _suite(tmp_path: Path, text: str = SUITE) -> ProxyChecks:
    path = tmp_path / "p.suite.yaml"
    path.write_text(text, encoding="utf-8")
    hidden = tmp_path / "hidden"
    hidden.mkdir(exist_ok=True)
    (hidden / "h.yaml").write_text(
        "id: secret\ninput: {q: HIDDEN-CANARY}\nexpect:\n  - never_calls: [lookup]\n",
        encoding="utf-8")
    suite = load_suite_file(path).suite
    return ProxyChecks(suite.id, tuple(reference_free(suite)), tool="lookup")


def _call(tool: str, output: object = None, *, error: bool = False, number: int = 1,
          protocol_error: str | None = None) -> ProxiedCall:
    answer = None if protocol_error else Answer(output=output, text=str(output), is_error=error)
    return ProxiedCall(number, tool, {"q": "x"}, answer, protocol_error, 0.01,
                       "2026-01-01T00:00:00.000000Z")


# ------------------------------------------------------------------ reference-free checks


def test_reference_free_checks_are_collected_once_from_public_cases_only(tmp_path: Path) -> None:
    checks = _suite(tmp_path)
    # In first-appearance order; the second never_calls is the same one; equals,
    # contains and calls are about the case; the hidden case's never_calls is not read.
    assert [(a.check, a.path) for a in checks.assertions] == [
        ("status", None), ("never_calls", None), ("not_contains", None), ("type", "$.rows")]
    assert "HIDDEN-CANARY" not in repr(checks.assertions)
    suite = load_suite_file(tmp_path / "p.suite.yaml").suite
    assert left_out(suite) == ["equals", "contains", "calls"]


def test_output_checks_grade_only_the_suites_tool_and_call_checks_grade_every_tool(
        tmp_path: Path) -> None:
    checks = _suite(tmp_path)
    assert [a.check for a in checks.for_tool("lookup")] == [
        "status", "never_calls", "not_contains", "type"]
    assert [a.check for a in checks.for_tool("erp.refund")] == ["never_calls"]
    unscoped = ProxyChecks(checks.suite_id, checks.assertions)
    assert len(unscoped.for_tool("erp.refund")) == 4


# ------------------------------------------------------------------ sampling


def test_sampling_is_the_seeded_draw_below_the_rate() -> None:
    # random.Random(0).random() gives 0.844, 0.758, 0.421, 0.259, 0.511, 0.405, 0.784 …:
    # at 50% the 3rd, 4th and 6th calls are below 0.5.
    sampler = Sampler(50, seed=0)
    assert [sampler.take() for _ in range(7)] == [False, False, True, True, False, True, False]
    again = Sampler(50, seed=0)
    assert [again.take() for _ in range(7)] == [False, False, True, True, False, True, False]
    assert not any(Sampler(0, seed=1).take() for _ in range(1000))
    assert all(Sampler(100, seed=1).take() for _ in range(1000))
    with pytest.raises(ValueError, match="from 0 to 100"):
        Sampler(101, seed=0)


# ------------------------------------------------------------------ the buffer


class Gate:
    """A handle that says when it starts and waits until it is let go."""

    def __init__(self, outcome: str = "pass") -> None:
        self.started = threading.Semaphore(0)
        self.go = threading.Event()
        self.outcome = outcome
        self.seen: list[int] = []

    def __call__(self, item: int) -> Handled:
        self.seen.append(item)
        self.started.release()
        self.go.wait()
        if item < 0:
            raise RuntimeError("a grader that raises")
        return Handled(self.outcome, queued=self.outcome == "fail")  # type: ignore[arg-type]


def _closed(buffer: SampleBuffer[int]) -> None:
    finished = threading.Event()
    buffer.close(finished.set)
    assert finished.wait(10)


def test_a_full_buffer_drops_and_counts_without_waiting() -> None:
    gate = Gate("fail")
    buffer: SampleBuffer[int] = SampleBuffer(1, gate)
    assert buffer.offer(1)
    assert gate.started.acquire(timeout=10)  # the worker holds 1; the buffer is empty
    assert buffer.offer(2)  # waits in the buffer
    assert not buffer.offer(3)  # full: dropped at once, while the grader is still blocked
    assert not gate.go.is_set()
    gate.go.set()
    _closed(buffer)
    tally = buffer.tally()
    assert (tally.sampled, tally.dropped, tally.graded, tally.failed, tally.queued) == \
        (3, 1, 2, 2, 2)
    assert gate.seen == [1, 2]


def test_abandoning_counts_what_waits_and_what_is_being_graded() -> None:
    gate = Gate()
    buffer: SampleBuffer[int] = SampleBuffer(5, gate)
    buffer.offer(1)
    assert gate.started.acquire(timeout=10)
    buffer.offer(2)
    buffer.abandon()
    gate.go.set()
    tally = buffer.tally()
    assert (tally.sampled, tally.abandoned, tally.graded) == (2, 2, 0)
    assert not buffer.offer(3)  # closed: a late sample is dropped


def test_a_grader_that_raises_loses_that_sample_only() -> None:
    gate = Gate()
    gate.go.set()
    buffer: SampleBuffer[int] = SampleBuffer(5, gate)
    buffer.offer(-1)
    buffer.offer(2)
    _closed(buffer)
    tally = buffer.tally()
    assert (tally.sampled, tally.lost, tally.graded) == (2, 1, 1)


# ------------------------------------------------------------------ a call as a trace


def test_a_forbidden_call_fails_and_becomes_a_queue_row(tmp_path: Path) -> None:
    checks = _suite(tmp_path)
    call = _call("erp.refund", {"ok": True}, number=4)
    trace = call_trace(call, {"harness": "mcp-proxy"})
    assert [e.kind for e in trace.events] == ["tool_call", "tool_result"]
    assert trace.output == {"ok": True} and trace.status == "ok" and trace.steps == 1
    trial = grade_call(checks, call, trace)
    assert trial.outcome == "fail"
    assert trial.reason is not None and trial.reason.startswith("never_calls: called erp.refund")
    row = queue_row(checks, call, trial)
    assert row["source"] == "proxy" and row["suite_id"] == "demo/proxy.checks@1"
    assert row["label"] == "erp.refund (call 4)" and row["run_id"] is None
    assert row["outcome"] == "fail" and row["split"] == "public"


def test_the_suites_tool_is_held_to_its_output_checks(tmp_path: Path) -> None:
    checks = _suite(tmp_path)
    good = _call("lookup", {"rows": [1, 2]})
    assert grade_call(checks, good, call_trace(good, {})).outcome == "pass"
    tool_error = _call("lookup", "Traceback: boom", error=True)
    trace = call_trace(tool_error, {})
    assert trace.status == "error"
    trial = grade_call(checks, tool_error, trace)
    assert trial.outcome == "fail" and trial.reason is not None
    assert trial.reason.startswith("status")
    # The same error from another tool breaks no check that applies to it.
    other = _call("search", "Traceback: boom", error=True)
    assert grade_call(checks, other, call_trace(other, {})).outcome == "pass"


def test_a_proxied_refusal_is_read_as_the_mcp_target_reads_it(tmp_path: Path) -> None:
    refusal = {"status": "refused", "reason": "no refunds on weekends"}
    refused = _call("lookup", refusal, error=True)
    trace = call_trace(refused, {})
    assert (trace.status, trace.error, trace.output) == ("refused", "no refunds on weekends",
                                                         refusal)
    # The suite's `status: ok` fails on it, naming the refusal.
    trial = grade_call(_suite(tmp_path), refused, trace)
    assert trial.outcome == "fail" and "status is refused" in (trial.reason or "")
    # Not an error result: an answer that happens to say so.
    assert call_trace(_call("lookup", refusal), {}).status == "ok"


def test_a_json_rpc_error_is_an_error_event_and_no_result(tmp_path: Path) -> None:
    checks = _suite(tmp_path)
    call = _call("lookup", protocol_error="Unknown tool: lookup (JSON-RPC -32602)")
    trace = call_trace(call, {})
    assert [e.kind for e in trace.events] == ["tool_call", "error"]
    assert trace.status == "error" and trace.settled is False and trace.output is None
    assert grade_call(checks, call, trace).outcome == "fail"


def test_no_check_applies_is_inconclusive_not_a_pass(tmp_path: Path) -> None:
    checks = ProxyChecks("demo/x@1", tuple(a for a in _suite(tmp_path).assertions
                                           if a.check == "status"), tool="lookup")
    call = _call("search", {"ok": True})
    trial = grade_call(checks, call, call_trace(call, {}))
    assert trial.outcome == "inconclusive" and trial.reason == "no assertions"


def test_a_long_tool_name_and_reason_are_cut_to_fit_the_queue(tmp_path: Path) -> None:
    checks = _suite(tmp_path)
    call = _call("erp." + "x" * 400, {"ok": True}, number=12)
    trial = grade_call(checks, call, call_trace(call, {}))
    row = queue_row(checks, call, trial)
    assert len(row["label"]) <= 200 and row["label"].endswith("(call 12)")

"""The battery: every case × trial, broken trials, interrupts, harness failures."""

from __future__ import annotations

import asyncio
import math
import sys
from typing import TYPE_CHECKING

import pytest

from assay.errors import HarnessFailure
from assay.targets.capture import _Switch

from .conftest import run_battery
from .outcomes import by_id

if TYPE_CHECKING:
    from assay.model import Trace
    from conftest import Bench


ECHO = """
    CALLS = {}

    def agent(input):
        CALLS[input] = CALLS.get(input, 0) + 1
        return input
"""

PLAN = """
    suite: t/plan@1
    trials: 2
    cases:
      - {id: a, input: a, expect: [{equals: a}]}
      - {id: b, input: b, trials: 4, expect: [{equals: b}]}
      - {id: c, input: c, expect: [{equals: c}]}
"""


def test_every_case_runs_its_trials(bench: Bench) -> None:
    uri, agent = bench.agent(ECHO)
    outcomes: list[str] = []
    report = bench.run(PLAN, uri, concurrency=3, on_trial=outcomes.append)
    cases = by_id(report)
    assert [c.id for c in report.cases] == ["a", "b", "c"]
    assert {k: [t.n for t in c.trials] for k, c in cases.items()} == {
        "a": [1, 2], "b": [1, 2, 3, 4], "c": [1, 2]}
    assert agent.CALLS == {"a": 2, "b": 4, "c": 2}
    assert all(t.outcome == "pass" for c in cases.values() for t in c.trials)
    assert outcomes == ["pass"] * 8
    assert report.trials_per_case == 2
    assert report.scores.passed is True
    assert report.counts["public"].passed == 3


def test_battery_trials_override_suite_and_case_trials(bench: Bench) -> None:
    uri, agent = bench.agent(ECHO)
    report = bench.run(PLAN, uri, trials=3)
    assert {c.id: len(c.trials) for c in by_id(report).values()} == {"a": 3, "b": 3, "c": 3}
    assert agent.CALLS == {"a": 3, "b": 3, "c": 3}
    assert report.trials_per_case == 3
    assert report.evidence == "reliability"


def test_the_report_names_suite_target_and_sums_cost(bench: Bench) -> None:
    uri, _ = bench.agent("""
        def agent(input, tools):
            tools.usage(input_tokens=10, output_tokens=1, cost_usd=0.25)
            return input
    """)
    report = bench.run("""
        suite: t/cost@1
        trials: 3
        cases:
          - {id: a, input: 1, expect: [{equals: 1}]}
    """, uri)
    assert report.suite.id == "t/cost@1"
    assert report.suite.digest.startswith("sha256:")
    assert report.target.uri == uri
    assert report.target.facets["harness"] == "python"
    assert math.isclose(report.cost.usd, 0.75)
    assert (report.cost.input_tokens, report.cost.output_tokens) == (30, 3)


def test_a_case_fixture_reaches_the_agent(bench: Bench) -> None:
    bench.write("fixtures/tools.yaml", """
        tools:
          - name: crm.lookup
            results:
              - when: {customer: C-1}
                result: {tier: gold}
              - result: {tier: none}
        answers: {ask_user: "yes"}
    """)
    uri, _ = bench.agent("""
        def agent(input, tools):
            return {"tier": tools.call("crm.lookup", {"customer": input})["tier"],
                    "ok": tools.ask("go?")}
    """)
    traces: dict[str, Trace] = {}
    made = bench.battery(bench.suite("""
        suite: t/fixture@1
        cases:
          - id: gold
            input: C-1
            fixture: fixtures/tools.yaml
            expect: [{equals: {tier: gold, ok: "yes"}}]
          - id: none
            input: C-9
            fixture: fixtures/tools.yaml
            expect: [{equals: {tier: none, ok: "yes"}}]
    """), uri)
    # The report keeps no trace (the store does): the battery hands each result on.
    made.on_result = lambda case, result: traces.__setitem__(case.id, result.trace)
    cases = by_id(run_battery(made))
    assert cases["gold"].outcome == "pass", cases["gold"].reason
    assert cases["none"].outcome == "pass", cases["none"].reason
    trace = traces["gold"]
    assert trace is not None
    assert [e.kind for e in trace.events][:2] == ["tool_call", "tool_result"]


def test_crashes_and_garbage_break_their_trials_and_the_rest_pass(bench: Bench) -> None:
    uri, _ = bench.agent("""
        def agent(input):
            if input == "boom":
                raise ValueError("kaput")
            if input == "garbage":
                return object()
            return input
    """)
    report = bench.run("""
        suite: t/crash@1
        trials: 2
        cases:
          - {id: fine-1, input: x, expect: [{equals: x}]}
          - {id: boom, input: boom, expect: [{equals: boom}]}
          - {id: garbage, input: garbage, expect: [{equals: garbage}]}
          - {id: fine-2, input: y, expect: [{equals: y}]}
          - {id: wrong, input: z, expect: [{equals: not-z}]}
    """, uri, concurrency=2)
    cases = by_id(report)
    for trial in cases["boom"].trials:
        assert trial.outcome == "broken"
        assert trial.reason is not None and "ValueError" in trial.reason
        assert "kaput" in trial.reason
        assert trial.verdicts == []
    for trial in cases["garbage"].trials:
        assert trial.outcome == "broken"
        assert trial.reason is not None and "not JSON" in trial.reason
    assert [c.outcome for c in report.cases] == ["pass", "broken", "broken", "pass", "fail"]
    assert cases["boom"].reason is not None and "kaput" in cases["boom"].reason
    counts = report.counts["public"]
    assert (counts.total, counts.passed, counts.failed, counts.broken) == (5, 2, 1, 2)
    assert report.scores.overall == pytest.approx(0.4)
    assert report.scores.passed is False


def test_a_run_with_a_broken_case_does_not_pass_even_under_a_low_pass_mark(bench: Bench) -> None:
    uri, _ = bench.agent("""
        def agent(input):
            if input == "boom":
                raise RuntimeError("no")
            return input
    """)
    report = bench.run("""
        suite: t/mark@1
        pass_mark: 0.5
        cases:
          - {id: a, input: a, expect: [{equals: a}]}
          - {id: b, input: b, expect: [{equals: b}]}
          - {id: boom, input: boom, expect: [{equals: boom}]}
    """, uri)
    assert report.scores.overall == pytest.approx(2 / 3)
    assert report.scores.passed is False


INTERRUPTIBLE = """
    import asyncio

    HOOK = None
    AT = 3
    CALLS = []

    async def agent(input):
        CALLS.append(input)
        if len(CALLS) == AT:
            HOOK()
            await asyncio.sleep(3600)
        return input
"""

FIVE = """
    suite: t/interrupt@1
    timeout_s: 30
    cases:
      - {id: a, input: a, expect: [{equals: a}]}
      - {id: b, input: b, expect: [{equals: b}]}
      - {id: c, input: c, expect: [{equals: c}]}
      - {id: d, input: d, expect: [{equals: d}]}
      - {id: e, input: e, expect: [{equals: e}]}
"""


def test_interrupt_from_inside_a_trial_keeps_what_finished(bench: Bench) -> None:
    uri, agent = bench.agent(INTERRUPTIBLE)
    battery = bench.battery(bench.suite(FIVE), uri, concurrency=1)
    agent.HOOK = battery.interrupt

    report = asyncio.run(battery.run())  # no exception escapes

    assert report.interrupted is True
    assert report.scores.passed is False
    assert "interrupted" in report.scores.flags
    cases = by_id(report)
    # The two finished trials are kept, with their verdicts; the one in flight
    # is abandoned, and nothing new started after the interrupt.
    assert [t.outcome for t in cases["a"].trials] == ["pass"]
    assert [t.outcome for t in cases["b"].trials] == ["pass"]
    assert cases["a"].trials[0].verdicts[0].outcome == "pass"
    assert all(cases[k].trials == [] for k in "cde")
    assert agent.CALLS == ["a", "b", "c"]
    assert report.counts["public"].passed == 2


def test_interrupt_from_the_progress_callback(bench: Bench) -> None:
    uri, agent = bench.agent(ECHO)
    seen: list[str] = []
    battery = bench.battery(bench.suite(FIVE), uri, concurrency=1)

    def on_trial(outcome: str) -> None:
        seen.append(outcome)
        if len(seen) == 2:
            battery.interrupt()

    battery.on_trial = on_trial
    report = asyncio.run(battery.run())
    assert report.interrupted is True
    assert report.scores.passed is False
    assert sum(len(c.trials) for c in by_id(report).values()) == 2
    assert seen == ["pass", "pass"]


def test_an_interrupted_run_with_concurrency_stops_every_worker(bench: Bench) -> None:
    uri, agent = bench.agent(INTERRUPTIBLE.replace("AT = 3", "AT = 4"))
    battery = bench.battery(bench.suite(FIVE), uri, concurrency=3)
    agent.HOOK = battery.interrupt
    report = asyncio.run(battery.run())
    assert report.interrupted is True
    cases = by_id(report)
    # The trial that hangs in flight is abandoned; the others that finished are kept.
    assert agent.CALLS[3] == "d"
    assert cases["d"].trials == []
    assert all(t.outcome == "pass" for c in cases.values() for t in c.trials)
    assert sum(len(c.trials) for c in cases.values()) >= 3


def test_an_agent_that_cannot_import_is_a_harness_failure(bench: Bench) -> None:
    bench.write("broken_agent_mod.py", "raise ImportError('missing native library')\n")
    sys.modules.pop("broken_agent_mod", None)
    bench.names.append("broken_agent_mod")
    outcomes: list[str] = []
    with pytest.raises(HarnessFailure) as caught:
        bench.run("""
            suite: t/harness@1
            cases:
              - {id: a, input: a, expect: [{equals: a}]}
        """, "python:broken_agent_mod:agent", on_trial=outcomes.append)
    assert "missing native library" in str(caught.value)
    assert caught.value.exit_code == 3
    assert outcomes == []
    assert not isinstance(sys.stdout, _Switch)


def test_a_bad_recording_is_a_harness_failure(bench: Bench) -> None:
    bench.write("rec.jsonl", '{"case": "a", "output": "a"}\nnot json\n')
    with pytest.raises(HarnessFailure, match=":2:"):
        bench.run("""
            suite: t/harness@1
            cases:
              - {id: a, input: a, expect: [{equals: a}]}
        """, "scripted:rec.jsonl")


def test_a_scripted_battery_grades_recorded_traces(bench: Bench) -> None:
    bench.write("rec.jsonl", "\n".join([
        '{"case": "a", "output": "a"}',
        '{"case": "a", "output": "wrong"}',
        '{"case": "b", "broken": "recorded crash"}',
        '{"case": "c", "output": "c", "status": "error"}',
    ]) + "\n")
    report = bench.run("""
        suite: t/scripted@1
        trials: 2
        cases:
          - {id: a, input: a, expect: [{equals: a}]}
          - {id: b, input: b, expect: [{equals: b}]}
          - {id: c, input: c, expect: [{status: error}]}
          - {id: d, input: d, expect: [{equals: d}]}
    """, "scripted:rec.jsonl")
    cases = by_id(report)
    assert [t.outcome for t in cases["a"].trials] == ["pass", "fail"]
    assert cases["a"].outcome == "fail"
    assert [t.reason for t in cases["b"].trials] == ["recorded crash"] * 2
    assert cases["c"].outcome == "pass"
    assert cases["d"].outcome == "broken"
    assert cases["d"].trials[0].reason is not None
    assert "no recorded trace" in cases["d"].trials[0].reason


def test_a_cancelled_error_from_the_agent_breaks_only_its_trial(bench: Bench) -> None:
    uri, _ = bench.agent("""
        import asyncio

        async def agent(input):
            if input == "cancel":
                inner = asyncio.ensure_future(asyncio.sleep(3600))
                inner.cancel()
                await inner
            return input
    """)
    report = bench.run("""
        suite: t/cancel@1
        cases:
          - {id: cancel, input: cancel, expect: [{equals: cancel}]}
          - {id: a, input: a, expect: [{equals: a}]}
          - {id: b, input: b, expect: [{equals: b}]}
    """, uri, concurrency=1)
    cases = by_id(report)
    assert [t.outcome for t in cases["cancel"].trials] == ["broken"]
    assert "CancelledError" in (cases["cancel"].trials[0].reason or "")
    assert cases["a"].outcome == "pass"
    assert cases["b"].outcome == "pass"


def test_a_suite_without_cases_runs_nothing_and_does_not_pass(bench: Bench) -> None:
    uri, agent = bench.agent(ECHO)
    report = bench.run("suite: t/empty@1\ncases: []\n", uri)
    assert report.cases == []
    assert agent.CALLS == {}
    assert report.scores.passed is False
    assert "no-cases" in report.scores.flags


def test_on_start_runs_once_before_any_trial_and_a_failure_there_runs_none(
        bench: Bench) -> None:
    from assay.engine import RunStart

    uri, agent = bench.agent(ECHO)
    loaded = bench.suite(PLAN)
    battery = bench.battery(loaded, uri, seed=5)
    starts: list[tuple[RunStart, dict[str, int]]] = []
    battery.on_start = lambda start: starts.append((start, dict(agent.CALLS)))
    report = asyncio.run(battery.run())
    assert len(starts) == 1
    start, calls_then = starts[0]
    assert calls_then == {}
    assert (start.run_id, start.seed, start.started_at) == (
        report.run_id, report.seed, report.started_at)

    def refuse(start: RunStart) -> None:
        raise HarnessFailure("cannot register")

    agent.CALLS.clear()
    again = bench.battery(loaded, uri)
    again.on_start = refuse
    with pytest.raises(HarnessFailure, match="cannot register"):
        asyncio.run(again.run())
    assert agent.CALLS == {}

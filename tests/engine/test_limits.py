"""Bounded concurrency and per-trial timeouts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from assay.model import CaseResult, Report

if TYPE_CHECKING:
    from conftest import Bench


def suite_of(n: int, *, trials: int = 1, timeout_s: float = 30) -> str:
    cases = "\n".join(f"  - {{id: c{i}, input: {i}, expect: [{{equals: {i}}}]}}"
                      for i in range(n))
    return f"suite: t/limits@1\ntrials: {trials}\ntimeout_s: {timeout_s}\ncases:\n{cases}\n"


def by_id(report: Report) -> dict[str, CaseResult]:
    return {c.id: c for c in report.cases if isinstance(c, CaseResult)}


TRACKING = """
    import asyncio

    inflight = 0
    peak = 0

    async def agent(input):
        global inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        for _ in range(25):
            await asyncio.sleep(0)
        inflight -= 1
        return input
"""


@pytest.mark.parametrize(("concurrency", "cases", "trials", "expected_peak"),
                         [(1, 4, 1, 1), (3, 10, 1, 3), (4, 3, 3, 4), (8, 2, 1, 2)])
def test_async_trials_in_flight_never_exceed_the_bound_and_reach_it(
    bench: Bench, concurrency: int, cases: int, trials: int, expected_peak: int
) -> None:
    uri, agent = bench.agent(TRACKING)
    report = bench.run(suite_of(cases, trials=trials), uri, concurrency=concurrency)
    assert agent.peak == expected_peak
    assert agent.inflight == 0
    assert all(c.outcome == "pass" for c in by_id(report).values())
    assert sum(len(c.trials) for c in by_id(report).values()) == cases * trials


SYNC_TRACKING = """
    import threading

    lock = threading.Lock()
    inflight = 0
    peak = 0
    barrier = threading.Barrier(3, timeout=10)

    def agent(input):
        global inflight, peak
        with lock:
            inflight += 1
            peak = max(peak, inflight)
        barrier.wait()  # three at a time, or nobody gets past
        with lock:
            inflight -= 1
        return input
"""


def test_sync_agents_run_in_threads_up_to_the_bound(bench: Bench) -> None:
    uri, agent = bench.agent(SYNC_TRACKING)
    report = bench.run(suite_of(6), uri, concurrency=3)
    assert agent.peak == 3
    assert all(c.outcome == "pass" for c in by_id(report).values())


ASYNC_HANG = """
    import asyncio

    async def agent(input):
        if input == 0:
            await asyncio.sleep(3600)
        return input
"""


def test_a_hanging_async_agent_times_out_and_the_rest_pass(bench: Bench) -> None:
    uri, _ = bench.agent(ASYNC_HANG)
    report = bench.run(suite_of(3, timeout_s=0.2), uri, concurrency=2)
    cases = by_id(report)
    hung = cases["c0"]
    assert hung.outcome == "broken"
    assert hung.trials[0].outcome == "broken"
    assert hung.trials[0].reason is not None and "timed out" in hung.trials[0].reason
    assert "0.2" in hung.trials[0].reason
    assert cases["c1"].outcome == "pass"
    assert cases["c2"].outcome == "pass"
    assert report.counts["public"].broken == 1
    assert report.scores.passed is False


def test_a_case_timeout_overrides_the_suite_and_the_battery_overrides_both(bench: Bench) -> None:
    uri, _ = bench.agent(ASYNC_HANG)
    text = """
        suite: t/limits@1
        timeout_s: 300
        cases:
          - {id: hang, input: 0, timeout_s: 0.15, expect: [{equals: 0}]}
          - {id: ok, input: 1, expect: [{equals: 1}]}
    """
    report = bench.run(text, uri)
    reason = by_id(report)["hang"].trials[0].reason
    assert reason is not None and "0.15" in reason
    report = bench.run(text, uri, timeout_s=0.1)
    reason = by_id(report)["hang"].trials[0].reason
    assert reason is not None and "timed out after 0.1s" in reason
    assert by_id(report)["ok"].outcome == "pass"


SYNC_HANG = """
    import threading

    EVENT = threading.Event()

    def agent(input):
        if input == 0:
            EVENT.wait()  # released by the test's teardown
        return input
"""


def test_a_hanging_sync_agent_times_out_and_the_battery_finishes(bench: Bench) -> None:
    uri, agent = bench.agent(SYNC_HANG)
    bench.teardown.append(agent.EVENT.set)
    report = bench.run(suite_of(3, timeout_s=0.2), uri, concurrency=2)
    cases = by_id(report)
    assert cases["c0"].outcome == "broken"
    assert cases["c0"].trials[0].reason is not None
    assert "timed out" in cases["c0"].trials[0].reason
    assert cases["c1"].outcome == "pass"
    assert cases["c2"].outcome == "pass"
    assert not agent.EVENT.is_set()  # it really was still hanging when the run ended


def test_a_hanging_sync_agent_does_not_starve_the_trials_after_it(bench: Bench) -> None:
    uri, agent = bench.agent(SYNC_HANG)
    bench.teardown.append(agent.EVENT.set)
    report = bench.run(suite_of(3, timeout_s=0.2), uri, concurrency=1)
    cases = by_id(report)
    assert cases["c0"].outcome == "broken"
    assert cases["c1"].outcome == "pass", cases["c1"].reason
    assert cases["c2"].outcome == "pass", cases["c2"].reason

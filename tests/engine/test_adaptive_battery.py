"""``--adaptive`` in the battery: cases with quality checks add trials while one straddles.

Against the loopback judge (tests/judge_server.py): the agent's answer
carries the marker that makes the judge pass, fail or flip, so where each
case stops follows from the rule (grading/adaptive.py) alone: an always
passing case at threshold 0.8 at 16 trials (15/15 has low 0.796), an always
failing one at 3, an inconsistent one at 0.5 at the cap, still straddling.
No sleeps: each trial is as quick as the agent and the judge answer.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from assay.engine import Battery, BatteryOptions, Resume
from assay.judging.panel import JudgeOptions, Panel
from assay.model import CaseResult, Report
from assay.suites import LoadedSuite
from assay.targets import TargetOptions, make_target

from .outcomes import by_id

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import JudgeServer  # noqa: E402

if TYPE_CHECKING:
    from conftest import Bench

AGENT = """
    CALLS = {}

    def agent(input):
        CALLS[input] = CALLS.get(input, 0) + 1
        return {"good": "Sorry, resending. JUDGE:pass", "bad": "No. JUDGE:fail",
                "flaky": "Sorry! JUDGE:flip", "plain": "plain"}[input]
"""


def suite(cases: dict[str, float | None], trials: int = 2) -> str:
    """A suite of cases by id: a judge at the threshold given, or None for an output check only."""
    lines = [f"suite: t/adaptive@1\ntrials: {trials}\njudge: openai:judge-model\ncases:\n"]
    for case, threshold in cases.items():
        check = ("{contains: plain}" if threshold is None
                 else f"{{judge: {{criteria: apologises, threshold: {threshold}}}}}")
        lines.append(f"  - {{id: {case}, input: {case}, expect: [{check}]}}\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def judge() -> Iterator[JudgeServer]:
    with JudgeServer() as server:
        yield server


def battery(bench: Bench, judge: JudgeServer, loaded: LoadedSuite, uri: str, *,
            adaptive: bool = True, max_trials: int = 30, concurrency: int = 4,
            trials: int | None = None, resume: Resume | None = None,
            on_trial: Callable[[str], None] | None = None) -> Battery:
    target = make_target(uri, TargetOptions(base_dir=bench.root, concurrency=concurrency))
    panel = Panel(loaded.suite, JudgeOptions(base_url=judge.base_url, cache=False,
                                             concurrency=concurrency, env={}))
    options = BatteryOptions(concurrency=concurrency, trials=trials, adaptive=adaptive,
                             max_trials=max_trials)
    return Battery(loaded, target, options, panel=panel, resume=resume, on_trial=on_trial)


def run(made: Battery) -> Report:
    async def go() -> Report:
        try:
            return await made.run()
        finally:
            assert made.panel is not None
            await made.panel.close()

    return asyncio.run(go())


def indexes(case: CaseResult) -> list[int]:
    return [t.n for t in case.trials]


@pytest.mark.parametrize("concurrency", [1, 4])
def test_each_case_stops_where_the_rule_says(bench: Bench, judge: JudgeServer,
                                             concurrency: int) -> None:
    uri, agent = bench.agent(AGENT)
    loaded = bench.suite(suite({"good": 0.8, "bad": 0.8, "plain": None}))
    report = run(battery(bench, judge, loaded, uri, concurrency=concurrency))
    cases = by_id(report)
    # 15/15 still straddles 0.8 (low 0.796); 16/16 clears it (low 0.806).
    assert indexes(cases["good"]) == list(range(1, 17))
    [rate] = cases["good"].quality
    assert (rate.passed, rate.trials, rate.straddles, rate.outcome) == (16, 16, False, "pass")
    # All failing is clear at the first look: 0/3 has high 0.562.
    assert indexes(cases["bad"]) == [1, 2, 3]
    assert cases["bad"].quality[0].straddles is False and cases["bad"].outcome == "fail"
    # Binary checks only: the suite's two trials, as without --adaptive.
    assert indexes(cases["plain"]) == [1, 2]
    assert agent.CALLS == {"good": 16, "bad": 3, "plain": 2}
    # What was configured stays what the report calls trials per case; the cap is said.
    assert report.trials_per_case == 2
    assert report.adaptive is not None and report.adaptive.max_trials == 30
    assert report.to_json_dict()["adaptive"] == {"max_trials": 30}
    assert report.evidence == "smoke"  # "plain" ran two trials


def test_an_inconsistent_judge_runs_to_the_cap_and_still_straddles(
    bench: Bench, judge: JudgeServer,
) -> None:
    uri, agent = bench.agent(AGENT)
    loaded = bench.suite(suite({"flaky": 0.5}))
    report = run(battery(bench, judge, loaded, uri, max_trials=8, concurrency=1))
    [case] = by_id(report).values()
    assert indexes(case) == list(range(1, 9))
    [rate] = case.quality
    assert (rate.passed, rate.trials, rate.straddles) == (4, 8, True)  # undecided, and said so
    assert report.adaptive is not None and report.adaptive.max_trials == 8
    assert report.evidence == "reliability"


def test_trials_given_are_where_an_adaptive_case_starts(bench: Bench,
                                                         judge: JudgeServer) -> None:
    uri, agent = bench.agent(AGENT)
    loaded = bench.suite(suite({"bad": 0.8, "plain": None}))
    report = run(battery(bench, judge, loaded, uri, trials=5))
    cases = by_id(report)
    # 0/5 is clear of 0.8, but the five were asked for: they all run.
    assert indexes(cases["bad"]) == [1, 2, 3, 4, 5]
    assert indexes(cases["plain"]) == [1, 2, 3, 4, 5]
    assert report.trials_per_case == 5
    # A cap under the trials asked for wins (the command line refuses that pairing).
    report = run(battery(bench, judge, loaded, uri, trials=5, max_trials=2))
    assert indexes(by_id(report)["bad"]) == [1, 2]


def test_without_adaptive_a_judged_case_runs_its_trials_and_the_report_has_no_key(
    bench: Bench, judge: JudgeServer,
) -> None:
    uri, agent = bench.agent(AGENT)
    loaded = bench.suite(suite({"good": 0.8}, trials=3))
    made = battery(bench, judge, loaded, uri, adaptive=False)
    report = run(made)
    assert indexes(by_id(report)["good"]) == [1, 2, 3]
    assert made.adaptive is None and report.adaptive is None
    assert "adaptive" not in report.to_json_dict()
    # --adaptive on a suite none of whose cases adapts plans as it always did.
    loaded = bench.suite(suite({"plain": None}, trials=3), name="plain.suite.yaml")
    made = battery(bench, judge, loaded, uri)
    assert made.adaptive is None
    assert indexes(by_id(run(made))["plain"]) == [1, 2, 3]


def test_an_interrupt_adds_no_trial_and_a_resume_goes_on_from_what_was_kept(
    bench: Bench, judge: JudgeServer,
) -> None:
    uri, agent = bench.agent(AGENT)
    loaded = bench.suite(suite({"good": 0.8}))
    seen: list[str] = []

    def stop_at_five(outcome: str) -> None:
        seen.append(outcome)
        if len(seen) == 5:
            first.interrupt()

    first = battery(bench, judge, loaded, uri, concurrency=1, on_trial=stop_at_five)
    report = run(first)
    [case] = by_id(report).values()
    assert report.interrupted is True
    # Trials go one at a time past the first three: the fifth was the last one planned.
    assert indexes(case) == [1, 2, 3, 4, 5]
    assert case.quality[0].straddles is True

    # Resumed with trial 4 lost (a kill before its batch was written): 4 runs again,
    # and the rule goes on from the five, to where it would have stopped anyway.
    done = {("good", t.n): t for t in case.trials if t.n != 4}
    resume = Resume(run_id=report.run_id, seed=report.seed or 0,
                    started_at=report.started_at, done=done)
    agent.CALLS.clear()
    report = run(battery(bench, judge, loaded, uri, resume=resume))
    [case] = by_id(report).values()
    assert indexes(case) == list(range(1, 17))
    assert agent.CALLS == {"good": 12}  # 4, then 6..16
    assert report.run_id == resume.run_id
    assert case.quality[0].straddles is False and report.interrupted is False


def test_a_resume_whose_trials_are_all_in_asks_the_rule_before_anything_runs(
    bench: Bench, judge: JudgeServer,
) -> None:
    uri, agent = bench.agent(AGENT)
    loaded = bench.suite(suite({"good": 0.8, "bad": 0.8}))
    whole = run(battery(bench, judge, loaded, uri, max_trials=6))
    cases = by_id(whole)
    assert indexes(cases["good"]) == list(range(1, 7))  # the cap, still straddling
    done = {(c.id, t.n): t for c in cases.values() for t in c.trials}
    resume = Resume(run_id=whole.run_id, seed=whole.seed or 0, started_at=whole.started_at,
                    done=done)
    agent.CALLS.clear()
    # The same cap: nothing left to run. A higher one (not what a resume of the same run
    # is given, but what the rule does with trials already in): "good" goes on.
    again = run(battery(bench, judge, loaded, uri, max_trials=6, resume=resume))
    assert agent.CALLS == {}
    assert {c.id: indexes(c) for c in by_id(again).values()} == {
        "good": list(range(1, 7)), "bad": [1, 2, 3]}
    further = run(battery(bench, judge, loaded, uri, max_trials=30, resume=resume))
    assert agent.CALLS == {"good": 10}
    assert indexes(by_id(further)["good"]) == list(range(1, 17))

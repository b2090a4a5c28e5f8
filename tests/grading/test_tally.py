"""A tally counts cases in any order and gives the report a list of them gives, bit for bit."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.grading import RunInfo, build_report
from assay.grading.report import tallied_report
from assay.grading.tally import Tally
from assay.model import CaseResult, SuiteRef, TargetRef, TrialResult, Usage
from assay.model.result import TrialOutcome

OUTCOMES: list[TrialOutcome] = ["pass", "fail", "inconclusive", "broken"]

INFO = RunInfo(run_id="r", suite=SuiteRef(id="t/x@1", digest="sha256:0"),
               target=TargetRef(uri="python:m:f", digest="sha256:1"), started_at="a",
               finished_at="b", trials_per_case=3, pass_mark=0.5)


@st.composite
def cases(draw: st.DrawFn) -> list[CaseResult]:
    made = []
    for index in range(draw(st.integers(0, 12))):
        outcomes = draw(st.lists(st.sampled_from(OUTCOMES), max_size=5))
        trials = [TrialResult(n=n, outcome=o, reason="x" if o == "broken" else None,
                              usage=Usage(input_tokens=draw(st.none() | st.integers(0, 99)),
                                          output_tokens=draw(st.none() | st.integers(0, 9)),
                                          cost_usd=draw(st.none() | st.floats(0, 1))))
                  for n, o in enumerate(outcomes, 1)]
        passed = outcomes.count("pass")
        made.append(CaseResult(
            id=f"c{index}", split=draw(st.sampled_from(["public", "hidden"])),
            synthetic=draw(st.booleans()), outcome=draw(st.sampled_from(OUTCOMES)),
            pass_at_1=draw(st.floats(0, 1)), pass_hat_k=passed / 7, k=len(outcomes),
            trials=trials))
    return made


@settings(max_examples=200)
@given(cases(), st.randoms(use_true_random=False))
def test_cases_counted_in_any_order_give_the_lists_report(listed: list[CaseResult],
                                                          rng: random.Random) -> None:
    tally = Tally(len(listed))
    order = list(range(len(listed)))
    rng.shuffle(order)  # a battery's cases finish in any order
    for index in order:
        tally.add(index, listed[index])
    built = build_report(INFO, listed)
    counted = tallied_report(INFO, tally, listed)
    assert counted.model_dump_json(by_alias=True) == built.model_dump_json(by_alias=True)


def test_a_case_is_counted_once() -> None:
    tally = Tally(2)
    case = CaseResult(id="c", outcome="pass", pass_at_1=1.0, pass_hat_k=1.0, k=1)
    tally.add(0, case)
    with pytest.raises(ValueError, match="counted already"):
        tally.add(0, case)
    tally.add(1, case)
    assert tally.split_counts()["public"].total == 2

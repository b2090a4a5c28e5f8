"""Scores, counts, reliability and evidence level over case results."""

from __future__ import annotations

import math
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.grading import evidence_level, reliability, score, split_counts
from assay.model import CaseResult, SplitCounts, TrialResult
from assay.model.result import TrialOutcome

Split = Literal["public", "hidden"]


def cr(
    outcome: TrialOutcome = "pass",
    split: Split = "public",
    *,
    synthetic: bool = False,
    trials: list[TrialOutcome] | None = None,
    id: str = "c",
) -> CaseResult:
    """A case result; its trials default to one trial of the case's outcome."""
    outcomes = [outcome] if trials is None else trials
    n = len(outcomes)
    passed = outcomes.count("pass")
    return CaseResult(
        id=id,
        split=split,
        outcome=outcome,
        pass_at_1=passed / n if n else 0.0,
        pass_hat_k=1.0 if n and passed == n else 0.0,
        k=n,
        synthetic=synthetic,
        trials=[
            TrialResult(n=i, outcome=o, reason="x" if o == "broken" else None)
            for i, o in enumerate(outcomes, start=1)
        ],
    )


def many(count: int, outcome: TrialOutcome, split: Split = "public") -> list[CaseResult]:
    return [cr(outcome, split) for _ in range(count)]


SPEC_EXAMPLE = many(6, "pass") + many(1, "pass", "hidden") + many(2, "fail", "hidden")


# --- split_counts ------------------------------------------------------------------


def test_counts_of_the_spec_example() -> None:
    counts = split_counts(SPEC_EXAMPLE)
    assert counts == {
        "public": SplitCounts(total=6, passed=6),
        "hidden": SplitCounts(total=3, passed=1, failed=2),
    }


def test_counts_always_have_public_and_hidden() -> None:
    assert split_counts([]) == {"public": SplitCounts(), "hidden": SplitCounts()}


def test_counts_keep_synthetic_apart_and_count_every_outcome() -> None:
    cases = [
        cr("pass"),
        cr("fail"),
        cr("inconclusive"),
        cr("broken"),
        cr("broken", "hidden"),
        cr("pass", "hidden", synthetic=True),
        cr("fail", synthetic=True),
    ]
    counts = split_counts(cases)
    assert counts["public"] == SplitCounts(total=4, passed=1, failed=1, inconclusive=1, broken=1)
    assert counts["hidden"] == SplitCounts(total=1, broken=1)
    assert counts["synthetic"] == SplitCounts(total=2, passed=1, failed=1)


# --- score -------------------------------------------------------------------------


def test_score_of_the_spec_example() -> None:
    s = score(SPEC_EXAMPLE, 0.8)
    assert s.public == 1.0
    assert s.hidden == pytest.approx(1 / 3)
    assert s.overall == pytest.approx(7 / 9)  # 0.778, over all cases, not the mean of splits
    assert s.synthetic is None
    assert s.pass_mark == 0.8
    assert s.passed is False
    assert s.flags == ["possibly-tuned"]


def test_run_passes_at_the_mark() -> None:
    s = score(many(7, "pass") + many(3, "fail"), 0.7)
    assert s.overall == pytest.approx(0.7)
    assert s.passed is True


def test_run_passes_at_the_mark_despite_float_error() -> None:
    mark = 0.1 + 0.2  # 0.30000000000000004
    s = score(many(3, "pass") + many(7, "fail"), mark)
    assert s.overall is not None and s.overall < mark
    assert s.passed is True


def test_run_under_the_mark_does_not_pass() -> None:
    assert score(many(6, "pass") + many(4, "fail"), 0.7).passed is False


def test_default_pass_mark_fails_on_any_failed_case() -> None:
    assert score(many(9, "pass") + many(1, "fail"), 1.0).passed is False
    assert score(many(10, "pass"), 1.0).passed is True


@pytest.mark.parametrize("outcome", ["inconclusive", "broken"])
def test_an_undecided_observed_case_blocks_the_run(outcome: TrialOutcome) -> None:
    s = score(many(9, "pass") + [cr(outcome, "hidden")], 0.5)
    assert s.overall == pytest.approx(0.9)
    assert s.passed is False


def test_synthetic_cases_are_scored_apart() -> None:
    cases = many(2, "pass") + [
        cr("fail", synthetic=True),
        cr("inconclusive", "hidden", synthetic=True),
        cr("pass", synthetic=True),
    ]
    s = score(cases, 1.0)
    assert (s.public, s.hidden, s.overall) == (1.0, None, 1.0)
    assert s.synthetic == pytest.approx(1 / 3)
    assert s.passed is True  # synthetic results never reach the observed verdict
    assert s.flags == []


def test_no_cases_never_passes() -> None:
    s = score([], 0.0)
    assert (s.public, s.hidden, s.overall, s.synthetic) == (None, None, None, None)
    assert s.passed is False
    assert s.flags == ["no-cases"]


def test_only_synthetic_cases_never_pass() -> None:
    s = score([cr("pass", synthetic=True)], 0.0)
    assert s.overall is None and s.synthetic == 1.0
    assert s.passed is False
    assert s.flags == ["no-observed-cases"]


def test_public_only_has_no_hidden_score_and_no_tuning_flag() -> None:
    s = score(many(3, "pass"), 1.0)
    assert (s.public, s.hidden, s.overall) == (1.0, None, 1.0)
    assert s.flags == []


@pytest.mark.parametrize(
    ("public_passed", "hidden_passed", "flagged"),
    [
        (9, 7, False),  # 0.9 - 0.7 = 0.20000000000000007 in floats: exactly 0.2, not over
        (10, 8, False),
        (10, 7, True),  # 0.3
        (8, 10, False),  # hidden better than public
        (5, 5, False),
    ],
)
def test_possibly_tuned_is_strictly_over_a_fifth(
    public_passed: int, hidden_passed: int, flagged: bool
) -> None:
    cases = (
        many(public_passed, "pass")
        + many(10 - public_passed, "fail")
        + many(hidden_passed, "pass", "hidden")
        + many(10 - hidden_passed, "fail", "hidden")
    )
    assert ("possibly-tuned" in score(cases, 0.0).flags) is flagged


# --- reliability ---------------------------------------------------------------------


def test_reliability_hand_computed() -> None:
    cases = [
        cr("fail", trials=["pass", "pass", "fail"]),
        cr("fail", trials=["fail", "broken", "inconclusive"]),
        cr("pass", trials=["pass", "pass", "pass"]),
    ]
    rel = reliability(cases)
    assert set(rel) == {"public"}
    assert rel["public"].cases == 3
    assert rel["public"].pass_at_1 == pytest.approx(5 / 9)
    assert rel["public"].se == pytest.approx(math.sqrt(42 / 81) / 3)


def test_reliability_per_split_and_synthetic_apart() -> None:
    cases = [
        cr("pass", trials=["pass", "pass"]),
        cr("fail", "hidden", trials=["fail", "fail"]),
        cr("pass", "hidden", trials=["pass", "fail"]),
        cr("pass", synthetic=True, trials=["pass"]),
    ]
    rel = reliability(cases)
    assert set(rel) == {"public", "hidden", "synthetic"}
    assert (rel["public"].pass_at_1, rel["public"].se, rel["public"].cases) == (1.0, 0.0, 1)
    assert rel["hidden"].pass_at_1 == pytest.approx(0.25)
    assert rel["hidden"].se == pytest.approx(math.sqrt(2 * 0.0625) / 2)  # means 0 and 0.5
    assert rel["synthetic"].cases == 1


def test_reliability_counts_a_case_without_trials_as_zero() -> None:
    rel = reliability([cr("inconclusive", trials=[]), cr("pass", trials=["pass"])])
    assert rel["public"].pass_at_1 == 0.5
    assert rel["public"].se == pytest.approx(0.5 * math.sqrt(2) / 2)


def test_reliability_of_nothing_is_empty() -> None:
    assert reliability([]) == {}


# --- evidence level ------------------------------------------------------------------


def test_three_trials_everywhere_is_reliability() -> None:
    assert evidence_level([cr(trials=["pass"] * 3), cr(trials=["fail"] * 5)]) == "reliability"


def test_one_case_under_three_trials_makes_it_smoke() -> None:
    assert evidence_level([cr(trials=["pass"] * 3), cr(trials=["pass"] * 2)]) == "smoke"
    assert evidence_level([cr(trials=["pass"] * 3), cr("pass", synthetic=True)]) == "smoke"


def test_no_cases_is_smoke() -> None:
    assert evidence_level([]) == "smoke"


# --- properties: public and hidden are disjoint -----------------------------------------

ALL_OUTCOMES: list[TrialOutcome] = ["pass", "fail", "inconclusive", "broken"]
outcomes = st.sampled_from(ALL_OUTCOMES)
case_results = st.builds(
    cr,
    outcome=outcomes,
    split=st.sampled_from(["public", "hidden"]),
    synthetic=st.booleans(),
)


def _flip(case: CaseResult, outcome: TrialOutcome) -> CaseResult:
    return case.model_copy(update={"outcome": outcome})


@given(st.lists(case_results, max_size=20), st.data())
def test_hidden_outcomes_never_move_the_public_score(
    cases: list[CaseResult], data: st.DataObject
) -> None:
    flipped = [
        _flip(c, data.draw(outcomes)) if c.split == "hidden" else c for c in cases
    ]
    before, after = score(cases, 0.5), score(flipped, 0.5)
    assert before.public == after.public
    assert split_counts(cases)["public"] == split_counts(flipped)["public"]
    if not any(c.synthetic for c in cases if c.split == "hidden"):
        assert before.synthetic == after.synthetic


@given(st.lists(case_results, max_size=20), st.data())
def test_public_outcomes_never_move_the_hidden_score(
    cases: list[CaseResult], data: st.DataObject
) -> None:
    flipped = [
        _flip(c, data.draw(outcomes)) if c.split == "public" else c for c in cases
    ]
    before, after = score(cases, 0.5), score(flipped, 0.5)
    assert before.hidden == after.hidden
    assert split_counts(cases)["hidden"] == split_counts(flipped)["hidden"]


@given(st.lists(case_results, max_size=20), st.data())
def test_synthetic_outcomes_never_move_observed_scores(
    cases: list[CaseResult], data: st.DataObject
) -> None:
    flipped = [_flip(c, data.draw(outcomes)) if c.synthetic else c for c in cases]
    before, after = score(cases, 0.5), score(flipped, 0.5)
    assert (before.public, before.hidden, before.overall, before.passed) == (
        after.public,
        after.hidden,
        after.overall,
        after.passed,
    )


@given(st.lists(case_results, max_size=20))
def test_overall_is_over_the_union_of_public_and_hidden(cases: list[CaseResult]) -> None:
    s = score(cases, 0.5)
    counts = split_counts(cases)
    public, hidden = counts["public"], counts["hidden"]
    total = public.total + hidden.total
    assert public.total + hidden.total + counts.get("synthetic", SplitCounts()).total == len(cases)
    if total:
        assert s.overall == pytest.approx((public.passed + hidden.passed) / total)
    else:
        assert s.overall is None and s.passed is False


def test_shortfalls_name_each_reason_a_run_did_not_pass() -> None:
    from assay.grading.scores import shortfalls

    def counts(public: SplitCounts, synthetic: SplitCounts | None = None) -> dict[str, SplitCounts]:
        found = {"public": public, "hidden": SplitCounts(total=0, passed=0)}
        return found | ({"synthetic": synthetic} if synthetic else {})

    two_of_three = [CaseResult(id=f"c{i}", split="public", outcome=o, pass_at_1=0.0,
                               pass_hat_k=0.0, k=1)
                    for i, o in enumerate(["pass", "pass", "fail"])]
    scores = score(two_of_three, pass_mark=0.9)
    tallied = split_counts(two_of_three)
    assert shortfalls(scores, tallied, interrupted=False) == [
        "overall 66.7% under the pass mark 90.0%"]
    assert shortfalls(scores, tallied, interrupted=True)[0] == "interrupted"
    # 2/3 reaches a pass mark of 2/3 however the sum rounds.
    assert shortfalls(score(two_of_three, pass_mark=2 / 3), tallied, interrupted=False) == []
    undecided = SplitCounts(total=3, passed=2, inconclusive=1)
    odd = score(two_of_three, pass_mark=0.5).model_copy(update={"passed": False})
    assert shortfalls(odd, counts(undecided), interrupted=False) == [
        "1 case(s) inconclusive or broken"]
    # A synthetic case never decides a run, so it is never its reason.
    assert shortfalls(odd, counts(SplitCounts(total=2, passed=2),
                                  SplitCounts(total=1, passed=0, broken=1)),
                      interrupted=False) == ["see cases"]
    assert shortfalls(score([], pass_mark=1.0), counts(SplitCounts(total=0, passed=0)),
                      interrupted=False) == ["no cases"]

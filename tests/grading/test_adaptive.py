"""The --adaptive stopping rule, at its boundaries, by hand (SPEC §5, §9).

Wilson bounds used below, z² = 1.959964² = 3.8415. With every trial
passing, low = n/(n + z²) and high = 1; with none, low = 0 and
high = z²/(n + z²). Otherwise centre ± half as in ``stats.wilson``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.grading.adaptive import (
    DEFAULT_MAX_TRIALS,
    MIN_TRIALS,
    add_trial,
    case_adds_trial,
    first_trials,
)
from assay.grading.fold import fold_case, fold_trial
from assay.grading.stats import wilson
from assay.model import Case, Evidence, TrialResult, Verdict
from assay.model.result import Outcome


@dataclass(frozen=True)
class Check:
    passed: int
    trials: int
    threshold: float


# --- one quality check ------------------------------------------------------------------


def test_three_of_three_at_point_eight_straddles() -> None:
    # low = 3 / (3 + 3.8415) = 0.4385 < 0.8 < high = 1.0
    assert wilson(3, 3)[0] == pytest.approx(0.4385, abs=5e-5)
    assert add_trial(3, 3, 0.8)


def test_all_pass_clears_point_eight_from_sixteen_trials() -> None:
    # n/(n + z²) > 0.8  ⇔  n > 4 z² = 15.37: 15/15 has low 0.7961, 16/16 low 0.8064.
    assert wilson(15, 15)[0] == pytest.approx(0.7961, abs=5e-5)
    assert wilson(16, 16)[0] == pytest.approx(0.8064, abs=5e-5)
    assert add_trial(15, 15, 0.8)
    assert not add_trial(16, 16, 0.8)


def test_one_pass_of_three_is_clearly_under_point_eight() -> None:
    # p = 1/3: centre = (1/3 + z²/6) / (1 + z²/3) = 0.9736 / 2.2805 = 0.4269,
    # half = 1.96 / 2.2805 · sqrt(2/27 + z²/36) = 0.8594 · 0.4244 = 0.3654:
    # (0.0615, 0.7923), and 0.7923 < 0.8 — more trials are not needed to fail it.
    low, high = wilson(1, 3)
    assert (low, high) == (pytest.approx(0.0615, abs=5e-5), pytest.approx(0.7923, abs=5e-5))
    assert not add_trial(1, 3, 0.8)
    assert add_trial(2, 3, 0.8)  # 2/3: (0.2077, 0.9385) straddles


def test_none_of_one_is_already_clear_of_point_eight() -> None:
    # high = z²/(1 + z²) = 0.7935 < 0.8 — but one trial is under the floor of three.
    assert wilson(0, 1)[1] == pytest.approx(0.7935, abs=5e-5)
    assert add_trial(0, 1, 0.8)
    assert not add_trial(0, 3, 0.8)


def test_below_the_floor_adds_even_when_clear() -> None:
    # 2/2 at 0.3: low = 2/5.8415 = 0.3424 > 0.3, clear, yet two trials are smoke.
    assert wilson(2, 2)[0] > 0.3
    assert add_trial(2, 2, 0.3)
    assert not add_trial(3, 3, 0.3)
    assert add_trial(0, 0, 0.5)  # no trials, no evidence: (0, 1)


def test_thresholds_on_the_edges_never_straddle() -> None:
    # n/n at 1.0 has high exactly 1.0; anything less has high < 1.0: clear either way.
    assert not add_trial(5, 5, 1.0)
    assert not add_trial(4, 5, 1.0)
    assert not add_trial(0, 5, 0.0)  # low exactly 0.0


def test_stops_at_the_cap_while_still_straddling() -> None:
    # 24/30 at 0.8: (0.6269, 0.9049) straddles, but 30 is the default cap.
    assert DEFAULT_MAX_TRIALS == 30
    assert add_trial(24, 29, 0.8)
    assert not add_trial(24, 30, 0.8)
    assert add_trial(8, 10, 0.8, max_trials=11)
    assert not add_trial(9, 11, 0.8, max_trials=11)
    assert not add_trial(1, 2, 0.8, max_trials=2)  # the cap wins over the floor


@given(st.integers(0, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       st.floats(0.0, 1.0), st.integers(1, 60))
def test_adds_exactly_while_the_fold_would_report_straddles(
        counts: tuple[int, int], threshold: float, cap: int) -> None:
    passed, n = counts
    low, high = wilson(passed, n)
    expected = n < cap and (n < MIN_TRIALS or low < threshold < high)
    assert add_trial(passed, n, threshold, cap) is expected
    if n >= MIN_TRIALS and (low > threshold or high < threshold):
        assert not add_trial(passed, n, threshold, cap)  # clear of the bar: never adds


def test_impossible_counts_and_caps_are_refused() -> None:
    with pytest.raises(ValueError, match="successes <= n"):
        add_trial(4, 3, 0.8)
    with pytest.raises(ValueError, match="max_trials"):
        add_trial(1, 3, 0.8, max_trials=0)
    with pytest.raises(ValueError, match="max_trials"):
        first_trials(3, max_trials=0)


# --- a case -----------------------------------------------------------------------------


def test_first_trials_is_the_configured_count_from_three_up_to_the_cap() -> None:
    assert first_trials(1) == 3
    assert first_trials(5) == 5
    assert first_trials(50) == 30
    assert first_trials(5, max_trials=4) == 4


def test_a_case_adds_while_any_check_straddles() -> None:
    clear = Check(16, 16, 0.8)  # low 0.8064
    open_ = Check(3, 3, 0.8)  # low 0.4385
    failed = Check(1, 3, 0.8)  # high 0.7923
    assert case_adds_trial(16, [clear, open_])
    assert case_adds_trial(3, [failed, open_])
    assert not case_adds_trial(16, [clear, failed])
    assert not case_adds_trial(3, [])  # no quality check: nothing to sharpen


def test_a_case_counts_broken_trials_against_the_cap() -> None:
    # Every trial broke: the check has no trials (interval (0, 1)), the case has run 30.
    assert case_adds_trial(29, [Check(0, 0, 0.8)])
    assert not case_adds_trial(30, [Check(0, 0, 0.8)])
    assert not case_adds_trial(12, [Check(3, 3, 0.8)], max_trials=12)


def quality(assertion: str, outcome: Outcome, threshold: float) -> Verdict:
    return Verdict(assertion=assertion, check="judge", family="quality", outcome=outcome,
                   evidence=Evidence.OBSERVED, threshold=threshold)


def test_a_case_takes_the_fold_s_rate_summaries() -> None:
    def trial(n: int, tone: Outcome) -> TrialResult:
        return fold_trial(n, [quality("correct", "pass", 0.8), quality("polite", tone, 0.5)])

    case = Case(id="c")
    ran = [trial(1, "fail"), *(trial(n, "pass") for n in range(2, 5))]
    rates = fold_case(case, ran).quality
    # correct: 4/4 at 0.8, low 4/7.8415 = 0.5101, straddles; polite: 3/4 at 0.5,
    # (0.3006, 0.9544), straddles too.
    assert [(q.passed, q.trials, q.straddles) for q in rates] == [(4, 4, True), (3, 4, True)]
    assert case_adds_trial(4, rates)
    ran += [trial(n, "pass") for n in range(5, 17)]
    rates = fold_case(case, ran).quality
    # correct: 16/16, low 0.8064 > 0.8; polite: 15/16, (0.7167, 0.9889), clear of 0.5: stop.
    assert [(q.passed, q.straddles) for q in rates] == [(16, False), (15, False)]
    assert not case_adds_trial(16, rates)

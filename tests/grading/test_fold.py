"""The fold rules of SPEC §5: verdicts into trials, trials into cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.grading import fold_case, fold_trial, pass_hat_k, wilson
from assay.model import Case, Evidence, Trace, TrialResult, Usage, Verdict
from assay.model.result import Family, Outcome

FORBID = "never_calls erp.transfer"
JUDGE = "judge"


def v(
    outcome: Outcome,
    family: Family = "output",
    assertion: str = "equals $.total",
    threshold: float | None = None,
    note: str = "",
) -> Verdict:
    """A verdict with only the fields grading reads."""
    return Verdict(
        assertion=assertion,
        check=assertion.split()[0],
        family=family,
        outcome=outcome,
        evidence=Evidence.OBSERVED,
        note=note,
        threshold=threshold,
    )


def q(outcome: Outcome, threshold: float | None = 0.8, assertion: str = JUDGE) -> Verdict:
    """A quality verdict."""
    return v(outcome, "quality", assertion, threshold)


def s(outcome: Outcome) -> Verdict:
    """A structural verdict."""
    return v(outcome, "structural", FORBID)


def trials(*verdict_lists: list[Verdict]) -> list[TrialResult]:
    """Trials numbered from 1, one per verdict list."""
    return [fold_trial(i, vs) for i, vs in enumerate(verdict_lists, start=1)]


def broken(n: int, reason: str = "target could not start") -> TrialResult:
    return fold_trial(n, [], broken=True, reason=reason)


CASE = Case(id="invoice-simple", tags=["tables"])


# --- fold_trial -----------------------------------------------------------------


def test_trial_passes_when_every_verdict_passes() -> None:
    t = fold_trial(1, [v("pass"), s("pass"), q("pass")])
    assert t.outcome == "pass"
    assert t.reason is None
    assert len(t.verdicts) == 3


def test_trial_fails_on_any_failing_verdict_even_beside_inconclusive() -> None:
    t = fold_trial(2, [v("pass"), v("inconclusive"), s("fail")])
    assert t.outcome == "fail"
    assert t.reason == f"{FORBID} fail"


def test_trial_reason_carries_the_first_failing_note() -> None:
    t = fold_trial(1, [v("fail", note="expected 42.00, got 41.00"), s("fail")])
    assert t.reason == "equals $.total: expected 42.00, got 41.00"


def test_trial_is_inconclusive_when_a_verdict_is_and_none_fails() -> None:
    t = fold_trial(1, [v("pass"), q("inconclusive")])
    assert t.outcome == "inconclusive"
    assert t.reason == "judge inconclusive"


def test_trial_with_no_verdicts_is_inconclusive_not_a_pass() -> None:
    t = fold_trial(1, [])
    assert t.outcome == "inconclusive"
    assert t.reason == "no assertions"


def test_broken_trial_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        fold_trial(1, [], broken=True)
    with pytest.raises(ValueError):
        fold_trial(1, [], broken=True, reason="")


def test_broken_wins_over_verdicts() -> None:
    t = fold_trial(3, [v("pass")], broken=True, reason="timeout before any output")
    assert t.outcome == "broken"
    assert t.reason == "timeout before any output"


def test_a_trial_cut_off_at_its_timeout_fails_on_a_breach_and_never_passes() -> None:
    cut = Trace(status="timeout", error="timed out after 2s", partial=True)
    failed = fold_trial(1, [v("pass"), s("fail")], trace=cut)
    assert failed.outcome == "fail"
    assert failed.reason is not None and failed.reason.endswith("(then timed out after 2s)")
    held = fold_trial(1, [v("pass"), s("pass")], trace=cut)
    assert held.outcome == "inconclusive"
    assert held.reason == ("timed out after 2s before finishing; what it recorded until then "
                           "breaks no check")
    # The same verdicts on a trace that ended by itself (a step limit) pass.
    limit = Trace(status="timeout", error="step limit", settled=False)
    assert fold_trial(1, [v("pass"), s("pass")], trace=limit).outcome == "pass"


def test_caller_reason_is_kept() -> None:
    assert fold_trial(1, [v("fail")], reason="custom").reason == "custom"


def test_trial_usage_defaults_to_the_trace_and_explicit_usage_wins() -> None:
    trace = Trace(output=1, usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.25))
    t = fold_trial(1, [v("pass")], trace=trace, duration_s=1.5)
    assert t.usage == trace.usage
    assert t.duration_s == 1.5
    assert t.trace is trace
    assert "trace" not in t.model_dump()
    explicit = Usage(input_tokens=1)
    assert fold_trial(1, [v("pass")], trace=trace, usage=explicit).usage == explicit
    assert fold_trial(1, [v("pass")]).usage == Usage()


# --- fold_case: outcomes ----------------------------------------------------------


def test_case_passes_when_every_trial_passes() -> None:
    r = fold_case(CASE, trials([v("pass"), s("pass")], [v("pass"), s("pass")], [v("pass")]))
    assert r.outcome == "pass"
    assert r.reason is None
    assert (r.pass_at_1, r.pass_hat_k, r.k) == (1.0, 1.0, 3)
    assert r.pass_hat == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert r.quality == []
    assert len(r.trials) == 3


def test_one_structural_breach_in_twenty_fails_the_case() -> None:
    ts = trials(*([s("pass")] for _ in range(19)), [s("fail")])
    r = fold_case(CASE, ts)
    assert r.outcome == "fail"
    assert r.reason == f"{FORBID} failed in 1 of 20 trials"
    assert r.pass_at_1 == pytest.approx(0.95)
    assert r.pass_hat_k == 0.0  # k = 20 and one trial failed
    assert r.pass_hat["1"] == pytest.approx(0.95)
    assert r.pass_hat["2"] == pytest.approx(pass_hat_k(19, 20, 2))


def test_output_checks_are_binary_too() -> None:
    r = fold_case(CASE, trials([v("pass")], [v("pass")], [v("fail")]))
    assert r.outcome == "fail"
    assert r.reason == "equals $.total failed in 1 of 3 trials"


def test_breach_counts_per_trial_and_names_the_rest() -> None:
    ts = trials(
        [s("fail"), v("fail")],
        [s("fail"), v("pass")],
        [s("pass"), v("pass")],
    )
    r = fold_case(CASE, ts)
    assert r.reason == f"{FORBID} failed in 2 of 3 trials (and 1 more)"


def test_breach_wins_over_broken_trials() -> None:
    r = fold_case(CASE, [broken(1), *trials([s("fail")]), broken(3)])
    assert r.outcome == "fail"


def test_breach_recorded_inside_a_broken_trial_still_fails() -> None:
    t = fold_trial(1, [s("fail")], broken=True, reason="crashed after the call")
    r = fold_case(CASE, [t, *trials([s("pass")])])
    assert r.outcome == "fail"


def test_broken_trial_makes_the_case_broken() -> None:
    r = fold_case(CASE, [*trials([v("pass")], [v("pass")]), broken(3)])
    assert r.outcome == "broken"
    assert r.reason == "1 of 3 trials broken: target could not start"
    assert r.pass_at_1 == pytest.approx(2 / 3)
    assert r.pass_hat_k == 0.0


def test_single_broken_trial_gives_its_own_reason() -> None:
    r = fold_case(CASE, [broken(1, "command not found: table-agent")])
    assert r.outcome == "broken"
    assert r.reason == "command not found: table-agent"
    assert r.pass_at_1 == 0.0


def test_broken_wins_over_inconclusive() -> None:
    r = fold_case(CASE, [*trials([v("inconclusive")]), broken(2)])
    assert r.outcome == "broken"


def test_inconclusive_trial_makes_the_case_inconclusive() -> None:
    r = fold_case(CASE, trials([v("pass")], [v("inconclusive", note="no output evidence")]))
    assert r.outcome == "inconclusive"
    assert r.reason == "1 of 2 trials inconclusive: equals $.total: no output evidence"
    assert r.pass_at_1 == 0.5


def test_case_without_assertions_is_inconclusive() -> None:
    r = fold_case(CASE, trials([]))
    assert r.outcome == "inconclusive"
    assert r.reason == "no assertions"


def test_case_without_trials_is_inconclusive_and_claims_nothing() -> None:
    r = fold_case(CASE, [])
    assert r.outcome == "inconclusive"
    assert r.reason == "no trials ran"
    assert (r.pass_at_1, r.pass_hat_k, r.k, r.pass_hat) == (0.0, 0.0, 0, {})


def test_failed_trial_without_a_failing_verdict_fails_the_case() -> None:
    odd = TrialResult(n=1, outcome="fail", reason="agent exited 1", verdicts=[v("pass")])
    r = fold_case(CASE, [odd])
    assert r.outcome == "fail"
    assert r.reason == "agent exited 1"


def test_case_copies_split_synthetic_and_tags() -> None:
    case = Case(id="h-1", split="hidden", synthetic=True, tags=["a", "b"])
    r = fold_case(case, trials([v("pass")]))
    assert (r.id, r.split, r.synthetic, r.tags) == ("h-1", "hidden", True, ["a", "b"])


# --- fold_case: pass^k --------------------------------------------------------------


def test_k_can_be_chosen() -> None:
    ts = trials([v("pass")], [v("pass")], [v("fail")])
    r = fold_case(CASE, ts, k=2)
    assert r.k == 2
    assert r.pass_hat_k == pytest.approx(1 / 3)  # C(2,2)/C(3,2)
    assert r.pass_hat == pytest.approx({"1": 2 / 3, "2": 1 / 3, "3": 0.0})


@pytest.mark.parametrize("k", [0, 4, -1])
def test_k_outside_the_trials_run_is_refused(k: int) -> None:
    with pytest.raises(ValueError):
        fold_case(CASE, trials([v("pass")], [v("pass")], [v("pass")]), k=k)


# --- fold_case: quality checks -------------------------------------------------------


def test_quality_passes_on_rate_although_one_trial_failed() -> None:
    ts = trials(*([v("pass"), q("pass")] for _ in range(4)), [v("pass"), q("fail")])
    r = fold_case(CASE, ts)
    assert r.outcome == "pass"
    assert r.pass_at_1 == pytest.approx(0.8)  # the trial with the failing judge is not a success
    [rate] = r.quality
    assert (rate.assertion, rate.passed, rate.trials, rate.rate) == (JUDGE, 4, 5, 0.8)
    assert (rate.low, rate.high) == wilson(4, 5)
    assert rate.threshold == 0.8
    assert rate.outcome == "pass"
    assert rate.straddles  # 0.376 < 0.8 < 0.964: reported, not a fail


def test_rate_at_threshold_reaches_it_despite_float_error() -> None:
    # 3/10 must reach a threshold computed as 0.1 + 0.2 (0.30000000000000004).
    bar = 0.1 + 0.2
    assert 3 / 10 < bar
    ts = trials(*([q("pass", bar)] for _ in range(3)), *([q("fail", bar)] for _ in range(7)))
    r = fold_case(CASE, ts)
    assert r.quality[0].outcome == "pass"
    assert r.outcome == "pass"


@pytest.mark.parametrize(("passed", "threshold"), [(10, 1.0), (0, 0.0)])
def test_threshold_on_the_interval_edge_does_not_straddle(passed: int, threshold: float) -> None:
    ts = trials(
        *([q("pass", threshold)] for _ in range(passed)),
        *([q("fail", threshold)] for _ in range(10 - passed)),
    )
    [rate] = fold_case(CASE, ts).quality
    assert threshold in (rate.low, rate.high)
    assert not rate.straddles


def test_quality_under_threshold_fails_the_case() -> None:
    ts = trials(*([q("pass")] for _ in range(3)), [q("fail")], [q("fail")])
    r = fold_case(CASE, ts)
    assert r.outcome == "fail"
    assert r.quality[0].outcome == "fail"
    assert r.reason == "judge passed 3 of 5 trials, under its threshold 0.8"


def test_quality_threshold_defaults_to_one() -> None:
    ts = trials(*([q("pass", None)] for _ in range(4)), [q("fail", None)])
    r = fold_case(CASE, ts)
    assert r.quality[0].threshold == 1.0
    assert r.outcome == "fail"


def test_quality_undecided_when_inconclusive_verdicts_could_reach_the_bar() -> None:
    # 3 pass, 1 inconclusive, 1 fail at 0.8: 3/5 < 0.8 but (3+1)/5 is not.
    ts = trials(*([q("pass")] for _ in range(3)), [q("inconclusive")], [q("fail")])
    r = fold_case(CASE, ts)
    assert r.quality[0].outcome == "inconclusive"
    assert r.outcome == "inconclusive"


def test_quality_fails_when_even_inconclusive_as_pass_misses() -> None:
    # 2 pass, 1 inconclusive, 2 fail at 0.8: (2+1)/5 = 0.6 < 0.8.
    ts = trials([q("pass")], [q("pass")], [q("inconclusive")], [q("fail")], [q("fail")])
    r = fold_case(CASE, ts)
    assert r.quality[0].outcome == "fail"
    assert r.outcome == "fail"


def test_quality_rate_is_over_trials_that_ran() -> None:
    bad = fold_trial(3, [q("fail")], broken=True, reason="timeout")
    r = fold_case(CASE, [*trials([q("pass")], [q("pass")]), bad])
    assert r.quality[0].trials == 2
    assert r.quality[0].outcome == "pass"
    assert r.outcome == "broken"


def test_missing_quality_verdict_counts_as_undecided() -> None:
    ts = trials([v("pass"), q("pass", 1.0)], [v("pass")])
    r = fold_case(CASE, ts)
    assert r.quality[0].trials == 2 and r.quality[0].passed == 1
    assert r.quality[0].outcome == "inconclusive"
    assert r.outcome == "inconclusive"


def test_inconclusive_quality_verdict_blocks_a_pass_even_when_rates_are_reached() -> None:
    # Both judges reach 0.5, but one trial left a verdict undecided.
    ts = trials(
        [q("fail", 0.5, "judge a"), q("inconclusive", 0.5, "judge b")],
        [q("pass", 0.5, "judge a"), q("pass", 0.5, "judge b")],
    )
    r = fold_case(CASE, ts)
    assert [x.outcome for x in r.quality] == ["pass", "pass"]
    assert r.outcome == "inconclusive"


def test_quality_checks_are_grouped_by_position_and_label() -> None:
    ts = trials(
        [q("pass", 0.5, "judge"), q("fail", 0.5, "judge")],
        [q("pass", 0.5, "judge"), q("fail", 0.5, "judge")],
    )
    r = fold_case(CASE, ts)
    assert [(x.passed, x.outcome) for x in r.quality] == [(2, "pass"), (0, "fail")]
    assert r.outcome == "fail"


def test_stricter_threshold_holds_when_trials_disagree() -> None:
    ts = trials([q("pass", 0.5)], [q("fail", 0.9)])
    assert fold_case(CASE, ts).quality[0].threshold == 0.9


def test_rate_clear_of_threshold_does_not_straddle() -> None:
    ts = trials(*([q("pass", 0.7)] for _ in range(10)))
    [rate] = fold_case(CASE, ts).quality
    assert rate.low > 0.7 and not rate.straddles


def test_quality_fail_does_not_count_as_a_binary_breach() -> None:
    ts = trials([q("fail", 0.5)], [q("pass", 0.5)])
    assert fold_case(CASE, ts).outcome == "pass"


def test_folding_is_deterministic() -> None:
    ts = trials([s("fail"), v("fail", assertion="b")], [v("fail", assertion="a"), s("fail")])
    assert fold_case(CASE, ts) == fold_case(CASE, ts)
    assert fold_case(CASE, ts).reason == f"{FORBID} failed in 2 of 2 trials (and 2 more)"


# --- properties ---------------------------------------------------------------------

verdicts = st.builds(
    v,
    outcome=st.sampled_from(["pass", "fail", "inconclusive"]),
    family=st.sampled_from(["output", "structural", "quality"]),
    assertion=st.sampled_from(["equals $.x", FORBID, JUDGE]),
    threshold=st.sampled_from([None, 0.0, 0.5, 0.8, 1.0]),
)


@st.composite
def trial_results(draw: st.DrawFn, n: int) -> TrialResult:
    if draw(st.booleans()) and draw(st.integers(0, 4)) == 0:
        return fold_trial(n, draw(st.lists(verdicts, max_size=3)), broken=True, reason="broke")
    return fold_trial(n, draw(st.lists(verdicts, max_size=4)))


@st.composite
def trial_lists(draw: st.DrawFn, min_size: int = 0) -> list[TrialResult]:
    size = draw(st.integers(min_size, 8))
    return [draw(trial_results(i + 1)) for i in range(size)]


@st.composite
def with_undecided(draw: st.DrawFn) -> list[TrialResult]:
    ts = draw(trial_lists())
    extra = draw(
        st.one_of(
            st.builds(lambda vs: fold_trial(0, vs), st.lists(verdicts, max_size=3)).filter(
                lambda t: t.outcome == "inconclusive"
            ),
            st.builds(
                lambda vs: fold_trial(0, vs, broken=True, reason="never ran"),
                st.lists(verdicts, max_size=3),
            ),
        )
    )
    ts.insert(draw(st.integers(0, len(ts))), extra)
    return ts


@given(with_undecided())
def test_inconclusive_or_broken_trial_never_makes_a_case_pass(ts: list[TrialResult]) -> None:
    r = fold_case(CASE, ts)
    assert r.outcome != "pass"


@given(trial_lists(min_size=1))
def test_a_passing_case_had_only_passing_or_quality_failed_trials(ts: list[TrialResult]) -> None:
    r = fold_case(CASE, ts)
    if r.outcome == "pass":
        for t in ts:
            assert t.outcome in ("pass", "fail")
            assert all(x.family == "quality" or x.outcome == "pass" for x in t.verdicts)
        assert all(x.outcome == "pass" for x in r.quality)


@given(trial_lists(), st.data())
def test_one_binary_breach_in_any_trial_always_fails_the_case(
    ts: list[TrialResult], data: st.DataObject
) -> None:
    binary: list[Family] = ["output", "structural"]
    family = data.draw(st.sampled_from(binary))
    breach = v("fail", family, FORBID)
    position = data.draw(st.integers(0, len(ts)))
    ts = [*ts[:position], fold_trial(position + 1, [breach]), *ts[position:]]
    r = fold_case(CASE, ts)
    assert r.outcome == "fail"
    assert r.pass_at_1 < 1.0


@given(trial_lists())
def test_pass_at_1_and_pass_hat_agree_with_trial_outcomes(ts: list[TrialResult]) -> None:
    r = fold_case(CASE, ts)
    c = sum(1 for t in ts if t.outcome == "pass")
    n = len(ts)
    assert r.pass_at_1 == (c / n if n else 0.0)
    assert r.k == n
    assert sorted(r.pass_hat) == sorted(str(j) for j in range(1, n + 1))
    if n:
        assert r.pass_hat["1"] == pytest.approx(r.pass_at_1)
        assert r.pass_hat_k == r.pass_hat[str(n)]


def test_a_breach_reason_quotes_the_first_failing_note() -> None:
    r = fold_case(CASE, trials([v("pass")], [v("fail", note="got 41, expected 42")],
                               [v("fail", note="got 40, expected 42")]))
    assert r.reason == "equals $.total failed in 2 of 3 trials: got 41, expected 42"

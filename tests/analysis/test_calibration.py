"""Judge calibration (analysis/calibration.py): Cohen's kappa by hand, the labels, the rows.

Every kappa below is worked out by hand in the test, from the 2x2 table of
(judge's label, people's label): a = both pass, b = judge pass / people
fail, c = judge fail / people pass, d = both fail, n = a + b + c + d.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest

from assay.analysis.calibration import (
    NO_PAIRS,
    ONE_LABEL,
    NoSuchJudge,
    agreement,
    calibrate,
    criterion_label,
    human_label,
    judge_label,
    reading,
)
from assay.judging.answers import OUT_OF_FORM_JUDGE, OUT_OF_FORM_SCORE
from assay.judging.opinion import Opinion
from assay.store.reviews.calibration import JudgedAssertion, ReviewedTrial

CANARY = "CANARY-CALIBRATION-77f3"


def test_kappa_on_a_hand_computed_table() -> None:
    # a=20 b=5 c=10 d=15, n=50.
    # p_o = (20+15)/50 = 0.7
    # p_j = (20+5)/50 = 0.5 (the judge's pass rate), p_h = (20+10)/50 = 0.6 (the people's)
    # p_e = 0.5·0.6 + 0.5·0.4 = 0.30 + 0.20 = 0.5
    # κ   = (0.7 − 0.5) / (1 − 0.5) = 0.4
    a = agreement(20, 5, 10, 15)
    assert (a.n, a.agreed) == (50, 35)
    assert a.observed == 0.7 and a.expected == 0.5
    assert a.kappa == pytest.approx(0.4, abs=1e-15)
    assert a.reading == "fair" and a.why is None  # 0.4: the top of "fair" (0.21-0.40)


def test_a_band_edge_is_met_exactly() -> None:
    # a=4 b=1 c=1 d=4, n=10: p_o = 8/10; p_j = p_h = 5/10; p_e = 1/4 + 1/4 = 1/2;
    # κ = (0.8 − 0.5)/(1 − 0.5) = 0.6, the top of "moderate" (0.41-0.60). In floats the
    # same sums give 0.6000000000000001, which would read "substantial".
    a = agreement(4, 1, 1, 4)
    assert a.kappa == 0.6 and a.reading == "moderate"


def test_kappa_of_the_end_to_end_table() -> None:
    # a=3 b=1 c=1 d=2, n=7 (tests/review/test_judges.py builds this one from real reviews).
    # p_o = 5/7; p_j = 4/7, p_h = 4/7; p_e = 16/49 + 9/49 = 25/49
    # κ = (35/49 − 25/49) / (24/49) = 10/24 = 5/12 = 0.41666…
    a = agreement(3, 1, 1, 2)
    assert a.observed == pytest.approx(5 / 7) and a.expected == pytest.approx(25 / 49)
    assert a.kappa == pytest.approx(5 / 12) and a.reading == "moderate"


def test_perfect_agreement_is_one() -> None:
    # a=3 d=2: p_o = 1; p_j = p_h = 3/5; p_e = 9/25 + 4/25 = 13/25; κ = (12/25)/(12/25) = 1
    a = agreement(3, 0, 0, 2)
    assert a.observed == 1.0 and a.expected == pytest.approx(13 / 25)
    assert a.kappa == 1.0 and a.reading == "almost perfect"


@pytest.mark.parametrize("table", [(4, 0, 0, 0), (0, 0, 0, 4)])
def test_one_label_everywhere_leaves_kappa_undefined_not_a_division_error(
        table: tuple[int, int, int, int]) -> None:
    # All pass (or all fail) on both sides: p_o = 1, p_e = 1·1 + 0·0 = 1, κ = 0/0.
    a = agreement(*table)
    assert a.observed == 1.0 and a.expected == 1.0
    assert a.kappa is None and a.reading is None and a.why == ONE_LABEL


def test_worse_than_chance_is_negative() -> None:
    # a=0 b=3 c=2 d=0: p_o = 0; p_j = 3/5, p_h = 2/5;
    # p_e = 3/5·2/5 + 2/5·3/5 = 12/25; κ = (0 − 12/25)/(13/25) = −12/13
    a = agreement(0, 3, 2, 0)
    assert a.observed == 0.0 and a.expected == pytest.approx(12 / 25)
    assert a.kappa == pytest.approx(-12 / 13) and a.reading == "poor"
    # a=1 b=2 c=2 d=1: p_o = 1/3; p_j = p_h = 1/2, p_e = 1/2; κ = (1/3 − 1/2)/(1/2) = −1/3
    assert agreement(1, 2, 2, 1).kappa == pytest.approx(-1 / 3)


def test_always_opposite_one_sided_raters_give_zero_not_undefined() -> None:
    # The judge passes all 4, the people fail all 4: p_o = 0; p_j = 1, p_h = 0;
    # p_e = 1·0 + 0·1 = 0; κ = (0 − 0)/(1 − 0) = 0: defined, and no better than chance.
    a = agreement(0, 4, 0, 0)
    assert (a.observed, a.expected, a.kappa, a.reading) == (0.0, 0.0, 0.0, "slight")


def test_no_pairs_and_impossible_counts() -> None:
    a = agreement(0, 0, 0, 0)
    assert (a.n, a.observed, a.expected, a.kappa, a.why) == (0, None, None, None, NO_PAIRS)
    with pytest.raises(ValueError, match="never negative"):
        agreement(1, -1, 0, 0)


@pytest.mark.parametrize(("kappa", "name"), [
    (Fraction(-1, 100), "poor"), (Fraction(0), "slight"), (Fraction(1, 5), "slight"),
    (Fraction(21, 100), "fair"), (Fraction(2, 5), "fair"), (Fraction(41, 100), "moderate"),
    (Fraction(3, 5), "moderate"), (Fraction(4, 5), "substantial"),
    (Fraction(81, 100), "almost perfect"), (Fraction(1), "almost perfect"), (0.6, "moderate"),
])
def test_landis_and_koch_bands(kappa: Fraction | float, name: str) -> None:
    assert reading(kappa) == name


def test_a_persons_decision_as_a_label() -> None:
    assert [human_label(v) for v in ("approved", "rejected", "needs-fix")] == \
        ["pass", "fail", "fail"]
    with pytest.raises(ValueError, match="not a review decision"):
        human_label("maybe")


def opinion(raw: str | None, model: str = "judge-a", error: str | None = None) -> Opinion:
    return Opinion(raw=raw, model=model, prompt_digest="sha256:00", error=error)


def test_a_judges_label_is_its_answer_and_no_answer_is_no_label() -> None:
    assert judge_label(opinion("pass\nfine")) == ("pass", "")
    assert judge_label(opinion("**FAIL**\nno")) == ("fail", "")
    assert judge_label(opinion("Verdict: maybe")) == (None, OUT_OF_FORM_JUDGE)
    assert judge_label(opinion(None, error="HTTP 500")) == (None, "judge error: HTTP 500")


def test_a_rubric_criterion_passes_when_its_own_score_reaches_pass_at() -> None:
    assert criterion_label(opinion("7"), 0.7) == ("pass", "")  # exactly: 7/10 >= 0.7
    assert criterion_label(opinion("6.9"), 0.7) == ("fail", "")
    assert criterion_label(opinion("10/10"), 1.0) == ("pass", "")
    assert criterion_label(opinion("seven"), 0.7) == (None, OUT_OF_FORM_SCORE)


JUDGE_ARG = {"criteria": "The reply apologises", "threshold": 0.5}
RUBRIC_ARG = {"criteria": [{"name": "accuracy", "description": "", "weight": 2},
                           {"name": "tone", "description": "", "weight": 1}], "pass_at": 0.6}


def trial(item: int, verdict: str, *assertions: JudgedAssertion, case: str = "c",
          split: str = "public", label: str | None = None) -> ReviewedTrial:
    return ReviewedTrial(item=item, run_id="run-1", case_id=case, label=label or case,
                         split=split, n=1, verdict=verdict, reviewer="ana",
                         assertions=list(assertions))


def judged(answer: str | None, *, model: str = "judge-a", arg: Any = None,
           error: str | None = None) -> JudgedAssertion:
    return JudgedAssertion(0, "judge", JUDGE_ARG if arg is None else arg,
                           [opinion(answer, model, error)])


def test_rows_per_judge_and_criterion_with_excluded_and_disagreements() -> None:
    trials = [
        trial(1, "approved", judged("pass"), case="p1"),
        trial(2, "approved", judged("pass"), case="p2"),
        trial(3, "rejected", judged("pass"), case="p3"),                 # disagreement
        trial(4, "needs-fix", judged("fail"), case="f1"),
        trial(5, "approved", judged("fail"), case="f2"),                 # disagreement
        trial(6, "rejected", judged("Verdict: maybe"), case="g1"),       # excluded
        trial(7, "rejected", judged(None, error="timed out after 1s"), case="g2"),
        trial(8, "approved", JudgedAssertion(1, "rubric", RUBRIC_ARG,
                                             [opinion("8"), opinion("3")]), case="r1"),
        trial(9, "approved", case="unjudged"),
    ]
    result = calibrate(trials, elsewhere=2)
    assert (result.reviewed, result.judged, result.elsewhere) == (9, 8, 2)
    rows = {(r.check, r.criterion): r for r in result.rows}
    assert list(rows) == [("judge", "The reply apologises"), ("rubric", "accuracy"),
                          ("rubric", "tone")]
    main = rows[("judge", "The reply apologises")]
    # a=2 (p1, p2) b=1 (p3) c=1 (f2) d=1 (f1): p_o = 3/5; p_j = 3/5, p_h = 3/5;
    # p_e = 9/25 + 4/25 = 13/25; κ = (15/25 − 13/25)/(12/25) = 2/12 = 1/6
    a = main.agreement
    assert (a.both_pass, a.judge_pass_human_fail, a.judge_fail_human_pass, a.both_fail) == \
        (2, 1, 1, 1)
    assert a.kappa == pytest.approx(1 / 6) and a.reading == "slight"
    assert main.excluded == {OUT_OF_FORM_JUDGE: 1, "judge error: timed out after 1s": 1}
    # The rubric: accuracy 8 ≥ 6 passes with the approving reviewer (one label: undefined);
    # tone 3 < 6 fails against an approval (p_j = 0, p_h = 1, p_e = 0, κ = 0).
    assert rows[("rubric", "accuracy")].agreement.kappa is None
    assert rows[("rubric", "tone")].agreement.kappa == 0.0
    said = [(d.item, d.case, d.criterion, d.judge_said, d.human_said)
            for d in result.disagreements]
    assert said == [(3, "p3", "The reply apologises", "pass", "rejected"),
                    (5, "f2", "The reply apologises", "fail", "approved"),
                    (8, "r1", "tone", "fail", "approved")]
    data = result.to_json()
    assert data["format"] == "assay.judges/1"
    assert data["rows"][0]["table"] == {"both_pass": 2, "judge_pass_human_fail": 1,
                                        "judge_fail_human_pass": 1, "both_fail": 1}
    assert data["rows"][0]["excluded"] == 2
    assert data["disagreements"][0]["human_label"] == "fail"


def test_judges_are_apart_and_one_can_be_chosen() -> None:
    trials = [trial(1, "approved", judged("pass", model="judge-a"),
                    JudgedAssertion(1, "judge", JUDGE_ARG, [opinion("fail", "judge-b")]))]
    both = calibrate(trials)
    assert [(r.judge, r.agreement.n) for r in both.rows] == [("judge-a", 1), ("judge-b", 1)]
    only = calibrate(trials, judge="judge-b")
    assert [r.judge for r in only.rows] == ["judge-b"] and len(only.disagreements) == 1
    with pytest.raises(NoSuchJudge, match="judges seen: judge-a, judge-b"):
        calibrate(trials, judge="judge-c")


def test_similar_checks_are_not_judges_and_unknown_checks_are_counted() -> None:
    trials = [trial(1, "approved",
                    JudgedAssertion(0, "similar", {"to": "x", "threshold": 0.5},
                                    [opinion("0.9", "local-embedder")]),
                    JudgedAssertion(1, None, None, [opinion("pass")]))]
    result = calibrate(trials)
    assert result.rows == [] and result.unreadable == 1 and result.judged == 0


def test_a_hidden_criterion_and_case_are_never_shown() -> None:
    secret = {"criteria": f"{CANARY} must be mentioned", "threshold": 1.0}
    rubric = {"criteria": [{"name": f"{CANARY}-name", "description": CANARY, "weight": 1}],
              "pass_at": 0.5}
    trials = [
        trial(1, "rejected", judged("pass", arg=secret), case=f"{CANARY}-id", split="hidden",
              label="holdout-1"),
        trial(2, "approved", judged("fail", arg=secret), case=f"{CANARY}-id2", split="hidden",
              label="holdout-2"),
        trial(3, "approved", JudgedAssertion(0, "rubric", rubric, [opinion("2")]),
              case=f"{CANARY}-id3", split="hidden", label="holdout-3"),
        # A public case with the same text is a row of its own: public and hidden never pool.
        trial(4, "approved", judged("pass", arg=secret), case="public-one"),
    ]
    result = calibrate(trials)
    shown = {(r.check, r.criterion, r.hidden, r.agreement.n) for r in result.rows}
    assert ("judge", "hidden criterion 1", True, 2) in shown
    assert ("rubric", "hidden criterion 2", True, 1) in shown
    assert ("judge", f"{CANARY} must be mentioned", False, 1) in shown
    hidden_out = json.dumps([r.to_json() for r in result.rows if r.hidden]
                            + [d.to_json() for d in result.disagreements])
    assert CANARY not in hidden_out
    assert [d.case for d in result.disagreements] == ["holdout-1", "holdout-2", "holdout-3"]
    # Nor in a repr a stray log line might print: the rows and the store's own objects.
    assert CANARY not in repr([r for r in result.rows if r.hidden]) + repr(trials[:3])
    # A hidden criterion keeps its number whichever judge is shown.
    other = [trial(5, "approved", judged("pass", arg={"criteria": f"{CANARY} other"}),
                   case=f"{CANARY}-id5", split="hidden", label="holdout-5"),
             trial(6, "approved", judged("pass", arg=secret, model="judge-b"),
                   case=f"{CANARY}-id6", split="hidden", label="holdout-6")]
    assert [r.criterion for r in calibrate(other).rows] == \
        ["hidden criterion 1", "hidden criterion 2"]
    assert [r.criterion for r in calibrate(other, judge="judge-b").rows] == \
        ["hidden criterion 2"]


def test_a_decision_this_version_does_not_know_is_left_out_not_guessed() -> None:
    result = calibrate([trial(1, "approved", judged("pass")),
                        trial(2, "escalated", judged("fail"))])
    assert (result.reviewed, result.unknown_verdicts) == (1, 1)
    assert result.rows[0].agreement.n == 1 and result.disagreements == []

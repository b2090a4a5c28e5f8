"""Reading judge answers strictly, and folding a rubric: each form accepted and refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.judging import JudgeAnswer, ScoreAnswer, fold_rubric, read_judge, read_score
from assay.judging.answers import (
    EMPTY,
    OUT_OF_FORM_JUDGE,
    OUT_OF_FORM_SCORE,
    OUT_OF_RANGE,
    REFUSED,
)

ANY_TEXT = st.text(st.characters(exclude_categories=()))
PIECES = st.sampled_from(["pass", "FAIL", "7", "10", "/10", ".", ":", "**", "_", "`", "\n",
                          " ", "\r\n", "\u2028", "\ufeff", "\x00", "\ud800", "ſ", "I can't"])
NEAR_FORM = st.lists(st.one_of(PIECES, ANY_TEXT), max_size=10).map("".join)

# --- read_judge ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "outcome"),
    [
        ("pass", "pass"),
        ("fail", "fail"),
        ("PASS", "pass"),
        ("Fail", "fail"),
        ("  pass  \n", "pass"),
        ("\n\n   \nfail\nbecause", "fail"),
        ("**PASS**", "pass"),
        ("*fail*", "fail"),
        ("***pass***", "pass"),
        ("__pass__", "pass"),
        ("_fail_", "fail"),
        ("`pass`", "pass"),
        ("pass.", "pass"),
        ("fail:", "fail"),
        ("**pass.**", "pass"),
        ("**pass**.", "pass"),
        ("`fail`:", "fail"),
        ("\ufeffpass", "pass"),
        ("\u00a0pass\u3000", "pass"),
        ("pass\r\nIt apologises.", "pass"),
    ],
)
def test_accepted_verdicts(raw: str, outcome: str) -> None:
    answer = read_judge(raw)
    assert answer.outcome == outcome
    assert answer.why == ""
    assert answer.raw == raw


@pytest.mark.parametrize(
    "raw",
    [
        "pass or fail",
        "pass/fail",
        "pass fail",
        "Pass, although it fails the tone",
        "Verdict: pass",
        "pass!",
        "pass..",
        "**pass.**.",
        "**pass*",
        "pass**",
        "# pass",
        "\"pass\"",
        "yes",
        "no",
        "passed",
        "failure",
        "p a s s",
        "paſſ",  # long s casefolds to s; not an ASCII pass
        "ＰＡＳＳ",  # fullwidth letters
        "The answer apologises.\npass",
        "```\npass\n```",
        "1",
        "true",
    ],
)
def test_out_of_form_verdicts_are_inconclusive(raw: str) -> None:
    answer = read_judge(raw)
    assert answer == JudgeAnswer("inconclusive", answer.justification, raw, OUT_OF_FORM_JUDGE)


@pytest.mark.parametrize(
    "raw",
    [
        "I can't help with that.",
        "I can’t help with that.",
        "I cannot evaluate this content.",
        "I'm sorry, but I won't grade this.",
        "Sorry, I can't do that",
        "**I won't** judge this",
        "As an AI, I cannot decide",
        "I am unable to assess this.",
    ],
)
def test_refusals_are_inconclusive(raw: str) -> None:
    assert read_judge(raw) == JudgeAnswer("inconclusive", "", raw, REFUSED)


@pytest.mark.parametrize("raw", ["", " ", "\n\n", "\t \r\n \u2028 ", "\u200b", "\ufeff\n"])
def test_an_empty_answer_is_inconclusive(raw: str) -> None:
    assert read_judge(raw) == JudgeAnswer("inconclusive", "", raw, EMPTY)


def test_the_justification_is_the_rest_and_the_raw_is_whole() -> None:
    raw = "\n**fail**\n\nIt never offers a refund.\n  It does apologise.  \n"
    answer = read_judge(raw)
    assert answer.outcome == "fail"
    assert answer.justification == "It never offers a refund.\n  It does apologise."
    assert answer.raw == raw


def test_a_bare_verdict_is_accepted_with_no_justification() -> None:
    assert read_judge("pass") == JudgeAnswer("pass", "", "pass")


def test_the_first_line_decides_whatever_follows() -> None:
    assert read_judge("fail\nActually, pass.").outcome == "fail"


def test_why_never_quotes_the_answer() -> None:
    answer = read_judge("The secret reference is 42, so: pass")
    assert "42" not in answer.why and "secret" not in answer.why


@given(NEAR_FORM)
def test_read_judge_never_raises_and_keeps_the_raw(raw: str) -> None:
    answer = read_judge(raw)
    assert answer.raw is raw
    assert answer.outcome in ("pass", "fail", "inconclusive")
    assert (answer.outcome == "inconclusive") == bool(answer.why)


# --- read_score ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "points"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("10", 10.0),
        ("7.5", 7.5),
        ("10.0", 10.0),
        ("07", 7.0),
        ("7/10", 7.0),
        ("7 / 10", 7.0),
        ("**8**", 8.0),
        ("**8/10**", 8.0),
        ("`6`", 6.0),
        ("9.", 9.0),
        ("9.5:", 9.5),
        ("  \n 3 \nterse but right", 3.0),
    ],
)
def test_accepted_scores(raw: str, points: float) -> None:
    answer = read_score(raw)
    assert answer.points == points
    assert answer.value == pytest.approx(points / 10)
    assert answer.conclusive and answer.why == "" and answer.raw == raw


@pytest.mark.parametrize(
    "raw",
    [
        "Score: 7",
        "7 out of 10",
        "8/100",
        "7,5",
        ".5",
        "-1",
        "+7",
        "7 - good",
        "seven",
        "7/10 because it is polite",
        "١٠",  # Arabic-Indic digits
        "pass",
        "The score is\n7",
    ],
)
def test_out_of_form_scores_are_inconclusive(raw: str) -> None:
    answer = read_score(raw)
    assert answer == ScoreAnswer(None, None, answer.justification, raw, OUT_OF_FORM_SCORE)


@pytest.mark.parametrize("raw", ["11", "10.5", "10.01", "100", "9" * 400])
def test_out_of_range_scores_are_inconclusive(raw: str) -> None:
    assert read_score(raw) == ScoreAnswer(None, None, "", raw, OUT_OF_RANGE)


def test_empty_and_refused_scores_are_inconclusive() -> None:
    assert read_score(" \n ").why == EMPTY
    assert read_score("I'm sorry, I can't score this.").why == REFUSED


def test_a_score_keeps_its_justification() -> None:
    answer = read_score("6\nPolite, but never offers a remedy.")
    assert answer.justification == "Polite, but never offers a remedy."


@given(NEAR_FORM)
def test_read_score_never_raises_and_stays_in_range(raw: str) -> None:
    answer = read_score(raw)
    assert answer.raw is raw
    if answer.conclusive:
        assert answer.value is not None and 0 <= answer.value <= 1 and answer.why == ""
    else:
        assert answer.value is None and answer.why


# --- fold_rubric --------------------------------------------------------------------


def test_the_weighted_mean_by_hand() -> None:
    scores = [(2.0, read_score("8")), (1.0, read_score("5"))]
    # (2 * 0.8 + 1 * 0.5) / 3 = 2.1 / 3 = 0.7
    assert fold_rubric(scores, 0.7) == ("pass", pytest.approx(0.7))
    assert fold_rubric(scores, 0.71) == ("fail", pytest.approx(0.7))


def test_a_mean_equal_to_pass_at_passes_whatever_binary_rounding_says() -> None:
    # 0.1 as a float is a little above 1/10; a mean of exactly 1/10 still passes at 0.1.
    assert fold_rubric([(1, read_score("1"))], 0.1)[0] == "pass"
    assert fold_rubric([(3, read_score("1")), (7, read_score("1"))], 0.1)[0] == "pass"
    assert fold_rubric([(0.1, read_score("3")), (0.2, read_score("3"))], 0.3)[0] == "pass"


def test_weights_scale_together() -> None:
    one = fold_rubric([(1, read_score("9")), (3, read_score("2"))], 0.5)
    ten = fold_rubric([(10, read_score("9")), (30, read_score("2"))], 0.5)
    assert one == ten == ("fail", pytest.approx((9 + 6) / 40))


def test_extremes() -> None:
    assert fold_rubric([(1, read_score("0"))], 0) == ("pass", 0.0)
    assert fold_rubric([(1, read_score("10"))], 1) == ("pass", 1.0)
    assert fold_rubric([(1, read_score("9.9"))], 1) == ("fail", pytest.approx(0.99))


@pytest.mark.parametrize("bad", ["", "I can't", "eleven", "11"])
def test_one_inconclusive_criterion_makes_the_rubric_inconclusive(bad: str) -> None:
    scores = [(5.0, read_score("10")), (1.0, read_score(bad)), (5.0, read_score("10"))]
    assert fold_rubric(scores, 0.0) == ("inconclusive", None)


@pytest.mark.parametrize("weight", [0, -1, float("nan"), float("inf")])
def test_weights_must_be_positive_and_finite(weight: float) -> None:
    with pytest.raises(ValueError, match="weight must be > 0"):
        fold_rubric([(1, read_score("5")), (weight, read_score("5"))], 0.5)
    # Even when a criterion is inconclusive: the mistake is in the check, not the answer.
    with pytest.raises(ValueError, match="weight must be > 0"):
        fold_rubric([(weight, read_score(""))], 0.5)


@pytest.mark.parametrize("pass_at", [-0.1, 1.01, float("nan")])
def test_pass_at_must_be_within_0_and_1(pass_at: float) -> None:
    with pytest.raises(ValueError, match="pass_at"):
        fold_rubric([(1, read_score("5"))], pass_at)


def test_a_rubric_without_criteria_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one criterion"):
        fold_rubric([], 0.5)


@given(st.lists(st.tuples(st.floats(0.01, 100), st.integers(0, 100)), min_size=1, max_size=6),
       st.floats(0, 1))
def test_the_value_is_within_the_scores(pairs: list[tuple[float, int]], pass_at: float) -> None:
    scores = [(weight, read_score(f"{tenths / 10}")) for weight, tenths in pairs]
    outcome, value = fold_rubric(scores, pass_at)
    assert value is not None
    low = min(a.value for _, a in scores if a.value is not None)
    high = max(a.value for _, a in scores if a.value is not None)
    assert low - 1e-12 <= value <= high + 1e-12
    if abs(value - pass_at) > 1e-9:
        assert outcome == ("pass" if value > pass_at else "fail")

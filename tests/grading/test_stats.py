"""Wilson intervals, pass^k and the clustered standard error, by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.grading import clustered_se, pass_hat_k, wilson

# --- wilson -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),
        (1, 10, 0.0179, 0.4042),
        (5, 10, 0.2366, 0.7634),
        (4, 5, 0.3755, 0.9638),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
    ],
)
def test_wilson_matches_published_values(successes: int, n: int, low: float, high: float) -> None:
    got = wilson(successes, n)
    assert got[0] == pytest.approx(low, abs=5e-5)
    assert got[1] == pytest.approx(high, abs=5e-5)


def test_wilson_edges_are_exact() -> None:
    assert wilson(0, 7)[0] == 0.0
    assert wilson(7, 7)[1] == 1.0


def test_wilson_of_no_trials_is_the_whole_range() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_wilson_z_widens_the_interval() -> None:
    narrow = wilson(8, 10, z=1.0)
    wide = wilson(8, 10)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


@pytest.mark.parametrize(("successes", "n"), [(-1, 3), (4, 3), (0, -1)])
def test_wilson_refuses_impossible_counts(successes: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson(successes, n)


@given(st.integers(min_value=1, max_value=500).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
))
def test_wilson_holds_the_observed_rate(counts: tuple[int, int]) -> None:
    successes, n = counts
    low, high = wilson(successes, n)
    assert 0.0 <= low <= successes / n <= high <= 1.0
    assert low < high


# --- pass^k -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("c", "n", "k", "expected"),
    [
        (3, 5, 2, 0.3),  # C(3,2)/C(5,2) = 3/10
        (4, 5, 3, 0.4),  # C(4,3)/C(5,3) = 4/10
        (2, 5, 3, 0.0),  # fewer successes than k
        (5, 5, 5, 1.0),
        (4, 5, 5, 0.0),
        (19, 20, 1, 0.95),
        (3, 5, 0, 1.0),  # the empty conjunction
        (0, 0, 0, 1.0),
    ],
)
def test_pass_hat_k(c: int, n: int, k: int, expected: float) -> None:
    assert pass_hat_k(c, n, k) == pytest.approx(expected)


@pytest.mark.parametrize(("c", "n", "k"), [(2, 3, 4), (0, 0, 1), (1, 3, -1), (4, 3, 1), (-1, 3, 1)])
def test_pass_hat_k_refuses(c: int, n: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(c, n, k)


@given(st.integers(min_value=1, max_value=40).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
))
def test_pass_hat_k_starts_at_pass_at_1_and_never_rises(counts: tuple[int, int]) -> None:
    c, n = counts
    values = [pass_hat_k(c, n, k) for k in range(1, n + 1)]
    assert values[0] == pytest.approx(c / n)
    assert all(later <= earlier for earlier, later in zip(values, values[1:], strict=False))


# --- clustered standard error -------------------------------------------------


def test_clustered_se_hand_computed() -> None:
    # case means 2/3, 0, 1; their mean 5/9; squared deviations 1/81 + 25/81 + 16/81.
    scores = [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    assert clustered_se(scores) == pytest.approx(math.sqrt(42 / 81) / 3)
    assert clustered_se(scores) == pytest.approx(0.2400274)


def test_clustered_se_weighs_cases_equally() -> None:
    # means 1.0 and 0.0 whatever the trial counts: sqrt(0.25 + 0.25) / 2.
    assert clustered_se([[1.0], [0.0, 0.0, 0.0, 0.0]]) == pytest.approx(math.sqrt(0.5) / 2)


def test_clustered_se_is_larger_than_the_naive_one_when_trials_agree() -> None:
    # Two cases, three identical trials each: the six trials are really two samples.
    scores = [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    flat = [s for case in scores for s in case]
    mean = sum(flat) / len(flat)
    naive = math.sqrt(sum((s - mean) ** 2 for s in flat)) / len(flat)
    clustered = clustered_se(scores)
    assert clustered == pytest.approx(math.sqrt(0.5) / 2)
    assert naive == pytest.approx(math.sqrt(1.5) / 6)
    assert clustered is not None and clustered > naive


def test_clustered_se_edges() -> None:
    assert clustered_se([]) is None
    assert clustered_se([[1.0, 0.0]]) == 0.0
    with pytest.raises(ValueError):
        clustered_se([[1.0], []])


@given(
    st.integers(min_value=1, max_value=6).flatmap(
        lambda trials: st.lists(
            st.lists(st.sampled_from([0.0, 1.0]), min_size=trials, max_size=trials),
            min_size=1,
            max_size=12,
        )
    )
)
def test_clustered_se_equals_millers_trial_form_with_equal_trials(
    scores: list[list[float]],
) -> None:
    total = sum(len(case) for case in scores)
    grand = sum(s for case in scores for s in case) / total
    miller = math.sqrt(sum(sum(s - grand for s in case) ** 2 for case in scores)) / total
    assert clustered_se(scores) == pytest.approx(miller, abs=1e-12)

"""Wilson intervals, pass^k and the clustered standard error, by hand."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.grading import clustered_se, pass_hat_k, wilson
from assay.grading.stats import mcnemar_exact, paired_difference

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


# --- mcnemar_exact -----------------------------------------------------------
#
# n = b + c discordant cases; under "no difference" each goes either way with
# probability 1/2, so p = min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2^n):
#   b=1, c=4:  n=5,  sum = C(5,0)+C(5,1)         = 1+5        = 6   → 12/32   = 0.375
#   b=0, c=5:  n=5,  sum = C(5,0)                = 1               →  2/32   = 0.0625
#   b=2, c=8:  n=10, sum = C(10,0)+C(10,1)+C(10,2) = 1+10+45 = 56  → 112/1024 = 0.109375
#   b=0, c=1:  n=1,  sum = 1                                       →  2/2    = 1.0
#   b=3, c=3:  n=6,  sum = 1+6+15+20 = 42                          → 84/64 > 1 → 1.0
#   b=1, c=2:  n=3,  sum = 1+3 = 4                                 →  8/8    = 1.0


@pytest.mark.parametrize(("b", "c", "expected"), [
    (1, 4, 0.375),
    (4, 1, 0.375),
    (0, 5, 0.0625),
    (5, 0, 0.0625),
    (2, 8, 0.109375),
    (0, 1, 1.0),
    (3, 3, 1.0),
    (1, 2, 1.0),
    (0, 0, 1.0),
])
def test_mcnemar_exact_hand_computed(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-12)


def test_mcnemar_exact_of_equal_counts_is_one() -> None:
    for k in (1, 2, 7, 50, 1000):
        assert mcnemar_exact(k, k) == 1.0


def test_mcnemar_exact_large_n_neither_overflows_nor_leaves_the_unit_interval() -> None:
    # 2^3000 is far past a float: computed in integers, the ratio still comes out.
    for b, c in [(1400, 1600), (1500, 1500), (0, 3000), (2990, 10)]:
        p = mcnemar_exact(b, c)
        assert 0.0 <= p <= 1.0
        assert p == mcnemar_exact(c, b)
    assert mcnemar_exact(1400, 1600) < 1e-3   # 200 more one way in 3000: significant
    assert mcnemar_exact(1500, 1500) == 1.0


def test_mcnemar_exact_of_a_ten_thousand_case_comparison_is_right_and_quick() -> None:
    # The normal approximation with continuity correction is close at this n:
    # z = (|b − c| − 1) / sqrt(b + c) = 149 / sqrt(20150) = 1.04966 → p = 2(1 − Φ(z)) = 0.29387.
    z = 149 / math.sqrt(20150)
    normal = math.erfc(z / math.sqrt(2))
    started = time.process_time()
    p = mcnemar_exact(10_000, 10_150)
    spent = time.process_time() - started
    assert p == pytest.approx(normal, rel=2e-3)
    assert p == mcnemar_exact(10_150, 10_000)
    # Summing math.comb(n, i) afresh for every i took minutes here; the running term, ~0.1 s.
    assert spent < 10, f"mcnemar_exact(10000, 10150) took {spent:.1f}s of CPU"


def test_mcnemar_exact_equals_the_binomial_sum_written_out() -> None:
    for b in range(30):
        for c in range(30):
            n = b + c
            written = 1.0 if n == 0 else min(
                1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)
            assert mcnemar_exact(b, c) == written, (b, c)


@given(st.integers(0, 300), st.integers(0, 300))
def test_mcnemar_exact_is_a_symmetric_probability(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    assert 0.0 <= p <= 1.0
    assert p == mcnemar_exact(c, b)
    if b != c:  # one more discordant case the same way never raises the p-value
        low, high = min(b, c), max(b, c)
        assert mcnemar_exact(low, high + 1) <= p


def test_mcnemar_exact_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="counts"):
        mcnemar_exact(-1, 3)


# --- paired_difference -------------------------------------------------------


def test_paired_difference_hand_computed() -> None:
    # d = [0.5, -0.5, 0.0, 1.0]: mean = 1.0 / 4 = 0.25
    # deviations 0.25, -0.75, -0.25, 0.75 → squares 0.0625 + 0.5625 + 0.0625 + 0.5625 = 1.25
    # sample variance 1.25 / 3 = 0.41667; se = sqrt(0.41667 / 4) = sqrt(0.104167) = 0.322749
    mean, se = paired_difference([0.5, -0.5, 0.0, 1.0])
    assert mean == pytest.approx(0.25)
    assert se == pytest.approx(math.sqrt(1.25 / 3 / 4))
    assert se == pytest.approx(0.322749, abs=1e-6)


def test_paired_difference_of_identical_differences_has_no_spread() -> None:
    assert paired_difference([-1.0, -1.0, -1.0]) == (pytest.approx(-1.0), 0.0)


def test_paired_difference_of_one_pair_has_no_standard_error() -> None:
    assert paired_difference([-0.5]) == (-0.5, None)


def test_paired_difference_of_nothing_is_nothing() -> None:
    assert paired_difference([]) == (None, None)

"""The statistics grading needs: Wilson intervals, pass^k, clustered errors.

Each function is pure arithmetic on counts, so a report's numbers can be
recomputed by hand from the trials it lists (PRINCIPLES 7).
"""

from __future__ import annotations

import math

#: The two-sided 95% normal quantile, Φ⁻¹(0.975).
Z95 = 1.959963984540054

#: How far under a bar a rate may fall and still reach it: a rate summed from
#: exact fractions (2/3 + 1/3 …) can land a hair under the number it equals.
#: The one tolerance every comparison of a rate with a bar uses (pass marks,
#: thresholds, gate policies).
EPSILON = 1e-9


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n`` (95% by default).

    Wilson rather than the normal ("Wald") interval because it stays inside
    [0, 1] and does not collapse to a point at 0/n or n/n, which is exactly
    where small trial counts put us. With p = successes/n::

        centre = (p + z²/2n) / (1 + z²/n)
        half   = z / (1 + z²/n) · sqrt(p(1−p)/n + z²/4n²)

    No trials is no evidence: ``n == 0`` gives the whole range (0.0, 1.0).
    Raises ``ValueError`` when the counts are impossible.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"wilson: need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = (z / denominator) * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    # At the edges the exact bound is 0 or 1; rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def straddles(low: float, high: float, threshold: float) -> bool:
    """Whether the interval (low, high) straddles ``threshold``: ``low < threshold < high``.

    SPEC §5: a quality check ``straddles`` when its Wilson interval contains
    its threshold, i.e. the trials so far cannot tell a rate over the bar
    from one under it. Both ends are strict, so a bar on the interval's edge
    does not straddle: n/n at threshold 1.0 (high is exactly 1.0 there) and
    0/n at threshold 0.0 (low is exactly 0.0). A threshold of 1.0 is thus
    never straddled: n/n reaches it and anything less has high < 1.0. The
    fold (``fold._quality``) and ``--adaptive`` (``adaptive``) both ask this.
    """
    return low < threshold < high


def pass_hat_k(c: int, n: int, k: int) -> float:
    """pass^k: the chance that k fresh trials all succeed, estimated as C(c,k)/C(n,k).

    ``c`` of ``n`` trials succeeded. This is the unbiased estimate of p^k from
    drawing k of the n observed trials without replacement. ``k == 0`` is the
    empty conjunction, 1.0. ``k > n`` cannot be estimated from n trials and
    raises ``ValueError``, as do impossible counts.
    """
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"pass_hat_k: need 0 <= c <= n, got c={c}, n={n}")
    if k < 0:
        raise ValueError(f"pass_hat_k: k must be >= 0, got {k}")
    if k > n:
        raise ValueError(f"pass_hat_k: cannot estimate pass^{k} from {n} trials (k > n)")
    if k == 0:
        return 1.0
    return math.comb(c, k) / math.comb(n, k)


def clustered_se(case_scores: list[list[float]]) -> float | None:
    """Standard error of the mean of the cases' means, clustered by case.

    After Miller 2024, "Adding error bars to evals": the trials of one case
    are not independent samples, so each case is a cluster. With ``m_c`` the
    mean score of case c, ``x̄`` the mean of the ``m_c`` and ``C`` the number
    of cases::

        SE = sqrt( Σ_c (m_c − x̄)² ) / C

    Every case weighs the same, which is what "the mean of the cases'
    pass@1" means. With equal trials per case this equals Miller's clustered
    form sqrt(Σ_c (Σ_i (s_ic − s̄))²) / N, N the number of trials. One case
    gives 0.0 (one cluster has no spread to measure); no cases give ``None``.
    A case with no scores has no mean and raises ``ValueError``.
    """
    if not case_scores:
        return None
    means: list[float] = []
    for index, scores in enumerate(case_scores):
        if not scores:
            raise ValueError(f"clustered_se: case {index} has no trial scores")
        means.append(math.fsum(scores) / len(scores))
    return clustered_se_of_means(means)


def clustered_se_of_means(means: list[float]) -> float | None:
    """``clustered_se`` from each case's mean score (``grading.tally`` keeps only those)."""
    if not means:
        return None
    grand = math.fsum(means) / len(means)
    return math.sqrt(math.fsum((m - grand) ** 2 for m in means)) / len(means)


def mcnemar_exact(b: int, c: int) -> float:
    """The exact (binomial) two-sided McNemar p-value for ``b`` and ``c`` discordant pairs.

    Two runs over the same cases: ``b`` cases passed in the first and not in
    the second, ``c`` the other way round. Under "no difference" each
    discordant case goes either way with probability ½, so with n = b + c::

        p = min(1, 2 · Σ_{i=0}^{min(b,c)} C(n, i) / 2ⁿ)

    the exact form McNemar's test takes for the small counts a suite gives
    (Fagerland, Lydersen & Laake 2013, "The McNemar test for binary
    matched-pairs data"). No discordant case is no evidence of a difference:
    1.0. Computed in integers, so large n neither overflows nor underflows;
    each binomial coefficient from the one before (C(n, i+1) = C(n, i)·(n−i)/(i+1),
    exact), so 10,000 discordant cases take milliseconds, not minutes.
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: need counts >= 0, got {b} and {c}")
    n = b + c
    if b == c:  # the tail holds at least half of 2ⁿ: p ≥ 1 (and n = 0 is no evidence)
        return 1.0
    term = tail = 1
    for i in range(min(b, c)):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, (2 * tail) / (1 << n))  # int / int is exact-then-rounded in Python


def paired_difference(diffs: list[float]) -> tuple[float | None, float | None]:
    """The mean of paired differences and its standard error: (mean, se).

    One difference per case (candidate's pass@1 minus the baseline's), so the
    cases are the independent units and the trials inside a case are not
    (Miller 2024, "Adding error bars to evals", §4 on paired comparisons)::

        mean = Σdᵢ / n          se = sqrt( Σ(dᵢ − mean)² / (n − 1) / n )

    No case gives (None, None); one case gives its difference and no error
    (None): one pair says nothing about the spread.
    """
    n = len(diffs)
    if n == 0:
        return (None, None)
    mean = math.fsum(diffs) / n
    if n == 1:
        return (mean, None)
    spread = math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)
    return (mean, math.sqrt(spread / n))

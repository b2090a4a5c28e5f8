"""When ``--adaptive`` adds a trial: the stopping rule, pure (SPEC §5, §9).

SPEC §5 reports a quality check's pass rate c/n with its Wilson 95%
interval, and says it ``straddles`` when that interval contains the
threshold t; §9: ``--adaptive [--max-trials N]`` "adds trials to a case
while a quality check's interval straddles its threshold and stops as soon
as it does not". With (low, high) = ``stats.wilson(c, n)``::

    add a trial  ⇔  n < max_trials  and  (n < MIN_TRIALS  or  low < t < high)

``low < t < high`` is ``stats.straddles``, the very test the fold reports
as ``straddles`` (``fold._quality``), so a case stops exactly when its
report would stop saying ``straddles``, or at the cap, where it still says
so and ``gate --confident`` refuses it (PRINCIPLES 3: undecided is said,
never turned into a pass). A case adds a trial while ANY of its quality
checks would; a case without quality checks never adds one.

The counts are the fold's: ``passed`` quality verdicts over the trials that
ran (an inconclusive verdict or a missing one counts in n, not in c;
broken trials count in neither). The cap counts every trial the case ran,
broken ones too: each cost a run, and a harness that always breaks must
still stop.

How many trials a clear verdict takes. Every trial passing, the interval's
low end is n/(n + z²), so it clears t only when::

    n > z² · t / (1 − t)        (z² = 3.8415)

16 trials at t = 0.8, 9 at 0.7, 35 at 0.9, 73 at 0.95. Every trial failing,
high = z²/(n + z²) clears t when n > z²(1 − t)/t: 1 trial at 0.8. So a
good agent costs more to confirm than a bad one to reject, and at
t ≥ 0.9 the default cap ends every all-pass case still straddling: raise
``--max-trials`` for such bars.

Defaults: start at the case's configured trials, never fewer than
``MIN_TRIALS`` = 3 (fewer is smoke evidence, SPEC §5: the interval of 2
trials says little and the report would label it smoke); stop at
``DEFAULT_MAX_TRIALS`` = 30, enough for a clear verdict at t = 0.8 (16
needed when all pass) with room for a few failures (29/30 has low 0.833),
ten times the usual three trials' cost at most. ``bench/adaptive.py``
measures what the rule costs and how often it ends wrong or undecided
(docs/performance.md, "Adaptive trials"). Near the bar, stopping at the
first clear look is optional stopping: with p = t = 0.8 about one battery in
six ends a clear ``fail`` (one in ten at the first look alone: 1/3 has high
0.792), against 2% for 30 fixed trials.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .stats import straddles, wilson

#: The fewest trials an adaptive case runs: from 3 a rate is a reliability figure (SPEC §5).
MIN_TRIALS = 3

#: The most trials an adaptive case runs unless ``--max-trials`` says otherwise.
DEFAULT_MAX_TRIALS = 30


class QualityCount(Protocol):
    """A quality check's counts so far (``model.result.RateSummary`` is one)."""

    @property
    def passed(self) -> int: ...

    @property
    def trials(self) -> int: ...

    @property
    def threshold(self) -> float: ...


def first_trials(configured: int, max_trials: int = DEFAULT_MAX_TRIALS) -> int:
    """How many trials an adaptive case runs before the rule is asked.

    The case's configured trials, at least ``MIN_TRIALS``, at most
    ``max_trials`` (the cap always wins: ``--max-trials 2`` is smoke, and
    the report says so). Raises ``ValueError`` when ``max_trials < 1``.
    """
    _check_cap(max_trials)
    return min(max(configured, MIN_TRIALS), max_trials)


def add_trial(passed: int, trials: int, threshold: float,
              max_trials: int = DEFAULT_MAX_TRIALS) -> bool:
    """Whether one quality check, ``passed`` of ``trials``, asks for another trial.

    True while ``trials < max_trials`` and either ``trials < MIN_TRIALS`` or
    the Wilson 95% interval of passed/trials straddles ``threshold``
    (``low < threshold < high``, as the fold reports it). Raises
    ``ValueError`` on impossible counts or ``max_trials < 1``.
    """
    _check_cap(max_trials)
    low, high = wilson(passed, trials)  # validates the counts first
    if trials >= max_trials:
        return False
    return trials < MIN_TRIALS or straddles(low, high, threshold)


def case_adds_trial(trials: int, checks: Iterable[QualityCount],
                    max_trials: int = DEFAULT_MAX_TRIALS) -> bool:
    """Whether a case that ran ``trials`` trials adds one: while ANY quality check asks.

    ``trials`` is every trial the case ran, broken ones included, and is
    what the cap counts; each check's own ``trials`` (those that ran) is
    what its interval is computed over. No quality checks: no trial added.
    """
    _check_cap(max_trials)
    if trials >= max_trials:
        return False
    return any(add_trial(c.passed, c.trials, c.threshold, max_trials) for c in checks)


def _check_cap(max_trials: int) -> None:
    if max_trials < 1:
        raise ValueError(f"adaptive: max_trials must be at least 1, got {max_trials}")

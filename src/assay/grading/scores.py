"""From case results to the run's headline numbers (SPEC §5).

Public, hidden and synthetic cases are scored apart and never blended
(PRINCIPLES 4): ``overall`` covers the observed cases (public and hidden),
and synthetic cases only ever reach their own number. Each figure is read
through a ``grading.tally.Tally`` of the list, the one way a run is scored
whether its cases are held (here) or counted as they finish (a battery).
"""

from __future__ import annotations

from typing import Literal

from ..model.result import CaseResult, Reliability, Scores, SplitCounts
from .tally import EPSILON, RELIABILITY_TRIALS, TUNING_GAP, Tally

__all__ = ["EPSILON", "RELIABILITY_TRIALS", "TUNING_GAP", "evidence_level", "reliability",
           "score", "split_counts"]


def split_counts(cases: list[CaseResult]) -> dict[str, SplitCounts]:
    """How many cases of each split passed, failed, were inconclusive or broke.

    ``public`` and ``hidden`` are always present and hold observed cases
    only; ``synthetic`` appears when the run had synthetic cases.
    """
    return Tally.of(cases).split_counts()


def score(cases: list[CaseResult], pass_mark: float) -> Scores:
    """The scores of a run and whether it passed.

    public = passed public cases / public cases, hidden likewise, overall
    over all observed cases; ``synthetic`` apart. The run passes when
    overall reaches ``pass_mark`` and no observed case is inconclusive or
    broken. Flags: ``no-cases`` (nothing ran), ``no-observed-cases`` (only
    synthetic cases), ``possibly-tuned`` (public − hidden > 0.2).
    """
    return Tally.of(cases).scores(pass_mark)


def reliability(cases: list[CaseResult]) -> dict[str, Reliability]:
    """pass@1 per split with its standard error clustered by case.

    Keys: ``public`` and ``hidden`` when they have observed cases,
    ``synthetic`` when there are synthetic cases. pass@1 is the mean of the
    cases' pass@1; a trial scores 1 when it passed, else 0. A case that ran
    no trials contributes one 0 score, as its pass@1 is 0.
    """
    return Tally.of(cases).reliability()


def evidence_level(cases: list[CaseResult]) -> Literal["smoke", "reliability"]:
    """``reliability`` when every case ran at least 3 trials, else ``smoke``.

    No cases at all is smoke: nothing was measured.
    """
    return Tally.of(cases).evidence_level()

"""From case results to the run's headline numbers (SPEC §5).

Public, hidden and synthetic cases are scored apart and never blended
(PRINCIPLES 4): ``overall`` covers the observed cases (public and hidden),
and synthetic cases only ever reach their own number. Each figure is read
through a ``grading.tally.Tally`` of the list, the one way a run is scored
whether its cases are held (here) or counted as they finish (a battery).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ..model.result import CaseResult, Reliability, Scores, SplitCounts
from .stats import EPSILON
from .tally import RELIABILITY_TRIALS, TUNING_GAP, Tally

__all__ = ["EPSILON", "RELIABILITY_TRIALS", "TUNING_GAP", "evidence_level", "reliability",
           "score", "shortfalls", "split_counts"]


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


def shortfalls(scores: Scores, counts: Mapping[str, SplitCounts], *,
               interrupted: bool) -> list[str]:
    """Why a run did not pass, a few words each; empty when it passed.

    The reasons of ``score``'s decision, in the order a reader checks them:
    the run was cut short, overall is under the pass mark, observed cases
    are inconclusive or broken (synthetic ones never decide a run), there
    was nothing to score. A run that did not pass always has one.
    """
    if scores.passed:
        return []
    reasons = []
    if interrupted:
        reasons.append("interrupted")
    if scores.overall is not None and scores.overall < scores.pass_mark - EPSILON:
        reasons.append(f"overall {scores.overall * 100:.1f}% under the pass mark "
                       f"{scores.pass_mark * 100:.1f}%")
    undecided = sum(c.inconclusive + c.broken for k, c in counts.items() if k != "synthetic")
    if undecided:
        reasons.append(f"{undecided} case(s) inconclusive or broken")
    if scores.overall is None:
        reasons.append("no cases")
    return reasons or ["see cases"]


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

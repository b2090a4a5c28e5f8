"""From case results to the run's headline numbers (SPEC §5).

Public, hidden and synthetic cases are scored apart and never blended
(PRINCIPLES 4): ``overall`` covers the observed cases (public and hidden),
and synthetic cases only ever reach their own number.
"""

from __future__ import annotations

from typing import Literal

from ..model.result import CaseResult, Reliability, Scores, SplitCounts
from .stats import clustered_se

#: Tolerance for comparing a score with the pass mark or the tuning gap.
EPSILON = 1e-9

#: How much better public must do than hidden to flag ``possibly-tuned``.
TUNING_GAP = 0.2

#: Trials per case from which a figure is reliability, not smoke (SPEC §5).
RELIABILITY_TRIALS = 3


def _groups(cases: list[CaseResult]) -> dict[str, list[CaseResult]]:
    """Cases by where they are reported: public, hidden (observed), synthetic."""
    groups: dict[str, list[CaseResult]] = {"public": [], "hidden": [], "synthetic": []}
    for case in cases:
        groups["synthetic" if case.synthetic else case.split].append(case)
    return groups


def _rate(cases: list[CaseResult]) -> float | None:
    """Passed cases over cases; ``None`` when there are none."""
    if not cases:
        return None
    return sum(1 for c in cases if c.outcome == "pass") / len(cases)


def split_counts(cases: list[CaseResult]) -> dict[str, SplitCounts]:
    """How many cases of each split passed, failed, were inconclusive or broke.

    ``public`` and ``hidden`` are always present and hold observed cases
    only; ``synthetic`` appears when the run had synthetic cases.
    """
    counts: dict[str, SplitCounts] = {}
    for name, group in _groups(cases).items():
        if name == "synthetic" and not group:
            continue
        counts[name] = SplitCounts(
            total=len(group),
            passed=sum(1 for c in group if c.outcome == "pass"),
            failed=sum(1 for c in group if c.outcome == "fail"),
            inconclusive=sum(1 for c in group if c.outcome == "inconclusive"),
            broken=sum(1 for c in group if c.outcome == "broken"),
        )
    return counts


def score(cases: list[CaseResult], pass_mark: float) -> Scores:
    """The scores of a run and whether it passed.

    public = passed public cases / public cases, hidden likewise, overall
    over all observed cases; ``synthetic`` apart. The run passes when
    overall reaches ``pass_mark`` and no observed case is inconclusive or
    broken. Flags: ``no-cases`` (nothing ran), ``no-observed-cases`` (only
    synthetic cases), ``possibly-tuned`` (public − hidden > 0.2).
    """
    groups = _groups(cases)
    observed = groups["public"] + groups["hidden"]
    public = _rate(groups["public"])
    hidden = _rate(groups["hidden"])
    overall = _rate(observed)

    flags: list[str] = []
    if not cases:
        flags.append("no-cases")
    elif not observed:
        flags.append("no-observed-cases")
    if public is not None and hidden is not None and public - hidden > TUNING_GAP + EPSILON:
        flags.append("possibly-tuned")

    undecided = any(c.outcome in ("inconclusive", "broken") for c in observed)
    passed = overall is not None and overall >= pass_mark - EPSILON and not undecided
    return Scores(
        public=public,
        hidden=hidden,
        overall=overall,
        synthetic=_rate(groups["synthetic"]),
        pass_mark=pass_mark,
        passed=passed,
        flags=flags,
    )


def reliability(cases: list[CaseResult]) -> dict[str, Reliability]:
    """pass@1 per split with its standard error clustered by case.

    Keys: ``public`` and ``hidden`` when they have observed cases,
    ``synthetic`` when there are synthetic cases. pass@1 is the mean of the
    cases' pass@1; a trial scores 1 when it passed, else 0. A case that ran
    no trials contributes one 0 score, as its pass@1 is 0.
    """
    result: dict[str, Reliability] = {}
    for name, group in _groups(cases).items():
        if not group:
            continue
        scores = [[1.0 if t.outcome == "pass" else 0.0 for t in c.trials] or [0.0] for c in group]
        result[name] = Reliability(
            pass_at_1=sum(c.pass_at_1 for c in group) / len(group),
            se=clustered_se(scores),
            cases=len(group),
        )
    return result


def evidence_level(cases: list[CaseResult]) -> Literal["smoke", "reliability"]:
    """``reliability`` when every case ran at least 3 trials, else ``smoke``.

    No cases at all is smoke: nothing was measured.
    """
    if cases and all(len(c.trials) >= RELIABILITY_TRIALS for c in cases):
        return "reliability"
    return "smoke"

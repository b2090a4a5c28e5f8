"""Assemble the report of a run, and redact its hidden cases (SPEC §5, §6).

``build_report`` gives the full report, for the store; everything that
leaves the harness (files, terminal, pages, receipts) is built from
``redact(report)``, in which a hidden case is a name and an outcome only
(PRINCIPLES 5).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from ..model.result import CaseResult, Cost, HoldoutResult, Report, SuiteRef, TargetRef
from .scores import evidence_level, reliability, score, split_counts


class RunInfo(BaseModel):
    """What the engine knows of a run besides its case results.

    The times are given, not read from a clock, so building a report stays a
    pure function of its inputs (PRINCIPLES 7).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    suite: SuiteRef
    target: TargetRef
    started_at: str
    finished_at: str
    trials_per_case: int
    pass_mark: float
    seed: int | None = None
    interrupted: bool = False


def build_report(info: RunInfo, cases: list[CaseResult]) -> Report:
    """The full, unredacted report of a run.

    Scores, counts, reliability and evidence level come from the case
    results; cost is the sum of every trial's usage. An interrupted run does
    not pass and carries the flag ``interrupted``.
    """
    scores = score(cases, info.pass_mark)
    if info.interrupted:
        scores = scores.model_copy(
            update={"passed": False, "flags": [*scores.flags, "interrupted"]}
        )
    usages = [t.usage for c in cases for t in c.trials]
    cost = Cost(
        usd=math.fsum(u.cost_usd for u in usages),
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
    )
    return Report(
        run_id=info.run_id,
        suite=info.suite,
        target=info.target,
        started_at=info.started_at,
        finished_at=info.finished_at,
        trials_per_case=info.trials_per_case,
        evidence=evidence_level(cases),
        scores=scores,
        counts=split_counts(cases),
        cost=cost,
        reliability=reliability(cases),
        cases=list(cases),
        interrupted=info.interrupted,
        seed=info.seed,
    )


def redact(report: Report) -> Report:
    """The report as it may leave the harness: hidden cases as holdouts.

    Every hidden case becomes ``HoldoutResult(id="holdout-<i>", outcome=…)``,
    numbered 1..N in report order; nothing else of it survives (no id,
    reason, tags, trials, notes or quality summaries). Public cases are left
    as they are. Redacting a redacted report changes nothing.
    """
    cases: list[CaseResult | HoldoutResult] = []
    hidden = 0
    for case in report.cases:
        if case.split == "hidden":
            hidden += 1
            cases.append(HoldoutResult(id=f"holdout-{hidden}", outcome=case.outcome))
        else:
            cases.append(case)
    return report.model_copy(update={"cases": cases})

"""Assemble the report of a run, and redact its hidden cases (SPEC §5, §6).

``build_report`` gives the full report, for the store; everything that
leaves the harness (files, terminal, pages, receipts) is built from
``redact(report)``, in which a hidden case is a name and an outcome only
(PRINCIPLES 5).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from ..model.evidence import Evidence
from ..model.result import (
    Adaptive,
    CaseResult,
    Cost,
    HoldoutResult,
    Report,
    SuiteRef,
    TargetRef,
    TrialResult,
)
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
    rejudge_of: str | None = None
    #: An ``--adaptive`` run's cap (None: each case ran its configured trials).
    adaptive: Adaptive | None = None


def build_report(info: RunInfo, cases: list[CaseResult]) -> Report:
    """The full, unredacted report of a run.

    Scores, counts, reliability and evidence level come from the case
    results; cost sums every trial's usage and says how much went unreported
    (``spent``). An interrupted run does
    not pass and carries the flag ``interrupted``. A run whose target had
    the agent cache on (its ``agent_cache`` facet) carries the flag
    ``agent-cache``: some answers may be kept ones, not calls made now
    (docs/decisions/0033-agent-cache.md).
    """
    scores = score(cases, info.pass_mark)
    if info.target.facets.get("agent_cache") == "on":
        scores = scores.model_copy(update={"flags": [*scores.flags, "agent-cache"]})
    if info.interrupted:
        scores = scores.model_copy(
            update={"passed": False, "flags": [*scores.flags, "interrupted"]}
        )
    cost = spent(cases, info.target.evidence)
    return Report(
        run_id=info.run_id,
        suite=info.suite,
        target=info.target,
        started_at=info.started_at,
        finished_at=info.finished_at,
        trials_per_case=info.trials_per_case,
        adaptive=info.adaptive,
        evidence=evidence_level(cases),
        scores=scores,
        counts=split_counts(cases),
        cost=cost,
        reliability=reliability(cases),
        cases=list(cases),
        interrupted=info.interrupted,
        seed=info.seed,
        rejudge_of=info.rejudge_of,
    )


def spent(cases: list[CaseResult], evidence: dict[str, Evidence]) -> Cost:
    """What every trial of the run reported spending, and how many reported nothing.

    ``evidence`` is the target's map, read for a trial whose trace is not at
    hand; a fact no trial reported is unavailable.
    """
    trials = [t for c in cases for t in c.trials]
    tokens = [t for t in trials if t.usage.tokens is not None]
    money = [t for t in trials if t.usage.cost_usd is not None]
    judged = _judges_spent(trials)
    return Cost(**judged,  # type: ignore[arg-type]
        usd=math.fsum(t.usage.cost_usd or 0.0 for t in money) if money else None,
        input_tokens=sum(t.usage.input_tokens or 0 for t in tokens) if tokens else None,
        output_tokens=sum(t.usage.output_tokens or 0 for t in tokens) if tokens else None,
        trials=len(trials),
        unreported={"tokens": len(trials) - len(tokens), "cost": len(trials) - len(money)},
        evidence={"tokens": _weakest("tokens", tokens, evidence),
                  "cost": _weakest("cost", money, evidence)},
    )


def _judges_spent(trials: list[TrialResult]) -> dict[str, float | int | None]:
    """The judges' cost over the run's opinions (none: nothing, and no keys in the report)."""
    opinions = [o for t in trials for answers in t.opinions.values() for o in answers]
    if not opinions:
        return {}
    asked = [o for o in opinions if not getattr(o, "cached", False)]
    priced = [o.cost_usd for o in asked if o.cost_usd is not None]
    counted = [o for o in asked if o.input_tokens is not None and o.output_tokens is not None]
    return {
        "judge_usd": math.fsum(priced) if priced or not asked else None,
        "judge_input_tokens": sum(o.input_tokens for o in counted) if counted or not asked
        else None,
        "judge_output_tokens": sum(o.output_tokens for o in counted) if counted or not asked
        else None,
        "judge_calls": len(asked),
        "judge_cached": len(opinions) - len(asked),
    }


def _weakest(fact: str, trials: list[TrialResult], evidence: dict[str, Evidence]) -> Evidence:
    seen = [t.trace.evidence_for(fact) if t.trace is not None
            else evidence.get(fact, Evidence.UNAVAILABLE) for t in trials]
    return min(seen, key=lambda e: e.rank, default=Evidence.UNAVAILABLE)


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

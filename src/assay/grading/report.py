"""Assemble the report of a run, and redact its hidden cases (SPEC §5, §6).

``build_report`` gives the full report, for the store; everything that
leaves the harness (files, terminal, pages, receipts) is built from
``redact(report)``, in which a hidden case is a name and an outcome only
(PRINCIPLES 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from ..model.evidence import Evidence
from ..model.result import (
    Adaptive,
    CaseResult,
    Cost,
    HoldoutResult,
    KeptCases,
    Report,
    SuiteRef,
    TargetRef,
)
from .tally import Tally


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
    #: Only some of the suite's cases ran (``--case``, ``--tag``, ``pytest -k``).
    part: bool = False


def build_report(info: RunInfo, cases: list[CaseResult]) -> Report:
    """The full, unredacted report of a run.

    Scores, counts, reliability and evidence level come from the case
    results; cost sums every trial's usage and says how much went unreported
    (``spent``). An interrupted run does
    not pass and carries the flag ``interrupted``. A run whose target had
    the agent cache on (its ``agent_cache`` facet) carries the flag
    ``agent-cache``: some answers may be kept ones, not calls made now
    (docs/decisions/0033-agent-cache.md). A run of some of the suite's cases
    carries ``part-of-suite``: its scores are not the suite's.
    """
    return tallied_report(info, Tally.of(cases), list(cases))


def tallied_report(info: RunInfo, tally: Tally,
                   cases: Sequence[CaseResult | HoldoutResult]) -> Report:
    """``build_report`` from a tally of the cases, and the cases as a sequence.

    ``cases`` is what the report lists, in the tally's order: a list, or a
    sequence that reads each case back as it is asked for (a battery's
    spool, ``engine.spool``), which the report holds as it is.
    """
    scores = tally.scores(info.pass_mark)
    if info.target.facets.get("agent_cache") == "on":
        scores = scores.model_copy(update={"flags": [*scores.flags, "agent-cache"]})
    if info.part:
        scores = scores.model_copy(update={"flags": [*scores.flags, "part-of-suite"]})
    if info.interrupted:
        scores = scores.model_copy(
            update={"passed": False, "flags": [*scores.flags, "interrupted"]}
        )
    report = Report(
        run_id=info.run_id, suite=info.suite, target=info.target, started_at=info.started_at,
        finished_at=info.finished_at, trials_per_case=info.trials_per_case,
        adaptive=info.adaptive, evidence=tally.evidence_level(), scores=scores,
        counts=tally.split_counts(), cost=tally.cost(info.target.evidence),
        reliability=tally.reliability(), cases=[], interrupted=info.interrupted,
        seed=info.seed, rejudge_of=info.rejudge_of,
    )
    # Validated without its cases, which are taken as they are.
    report.__dict__["cases"] = cases
    return report


def spent(cases: list[CaseResult], evidence: dict[str, Evidence]) -> Cost:
    """What every trial of the run reported spending, and how many reported nothing.

    ``evidence`` is the target's map, read for a trial whose trace is not at
    hand; a fact no trial reported is unavailable.
    """
    return Tally.of(cases).cost(evidence)


def redact(report: Report) -> Report:
    """The report as it may leave the harness: hidden cases as holdouts.

    Every hidden case becomes ``HoldoutResult(id="holdout-<i>", outcome=…)``,
    numbered 1..N in report order; nothing else of it survives (no id,
    reason, tags, trials, notes or quality summaries). Public cases are left
    as they are. Redacting a redacted report changes nothing.
    """
    if isinstance(report.cases, KeptCases):  # read back as asked for: so is the redaction
        return report.model_copy(update={"cases": report.cases.redacted()})
    cases: list[CaseResult | HoldoutResult] = []
    hidden = 0
    for case in report.cases:
        if case.split == "hidden":
            hidden += 1
            cases.append(HoldoutResult(id=f"holdout-{hidden}", outcome=case.outcome))
        else:
            cases.append(case)
    return report.model_copy(update={"cases": cases})


def outward_names(cases: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each case id's shown name, from (id, split) in report order: hidden ones as holdout-N.

    The same numbering as ``redact`` above, so a name here is the name
    ``assay show`` gives the case.
    """
    names: dict[str, str] = {}
    hidden = 0
    for case_id, split in cases:
        if split == "hidden":
            hidden += 1
            names[case_id] = f"holdout-{hidden}"
        else:
            names[case_id] = case_id
    return names

"""Replay: re-grade a stored run's traces with its stored suite, list what differs.

Grading is pure, so replay is the same function on stored traces (DESIGN):
each trace goes through ``grade_trace(case.expect, trace)`` and ``fold_trial``
exactly as the battery did, and every recomputed verdict (outcome, evidence)
and trial outcome is compared with the stored row. A difference means the
stored record and the grading disagree: a forged row, or grading that changed.

What replay returns may be shown: hidden cases are named ``holdout-N`` (the
report's redaction numbering) and their assertions by position only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..checks import grade_trace
from ..errors import UsageError
from ..grading import fold_trial
from ..model import Trace
from ..store.database import StoredRun, StoredVerdict
from ..store.recording import load_stored_suite


@dataclass(frozen=True)
class Difference:
    """One stored value that re-grading does not reproduce.

    ``assertion`` is None for a trial-level difference; ``position`` is the
    assertion's 1-based place in the case's ``expect``.
    """

    case: str
    trial: int
    position: int | None
    assertion: str | None
    field: str
    stored: str
    recomputed: str


@dataclass(frozen=True)
class Unreplayable:
    """A trial whose stored trace could not be read back (erased or missing)."""

    case: str
    trial: int
    reason: str


@dataclass
class ReplayResult:
    """The outcome of a replay: counts, differences and trials that could not be re-graded."""

    run_id: str
    trials: int = 0
    verdicts: int = 0
    differences: list[Difference] = field(default_factory=list)
    unreplayable: list[Unreplayable] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every stored trial was re-graded and everything matched."""
        return not self.differences and not self.unreplayable


def _names(report_json: str) -> dict[str, str]:
    """Each case id's outward name: hidden ones as ``holdout-N``, numbered as ``redact`` does."""
    names: dict[str, str] = {}
    hidden = 0
    for case in json.loads(report_json).get("cases", []):
        if case.get("split") == "hidden":
            hidden += 1
            names[case["id"]] = f"holdout-{hidden}"
    return names


def replay(run: StoredRun) -> ReplayResult:
    """Re-grade every stored trial of ``run``; raises ``UsageError`` when it has no suite."""
    if run.suite is None:
        raise UsageError(f"run {run.run_id} was stored without its suite "
                         "(before store revision 0003): it cannot be replayed")
    try:
        suite = load_stored_suite(json.loads(run.suite))
    except (ValueError, KeyError, TypeError):
        # Not the error's text: it would quote the suite, hidden cases included.
        raise UsageError(f"run {run.run_id}: the stored suite cannot be read") from None
    cases = {case.id: case for case in suite.cases}
    hidden = _names(run.report)
    stored: dict[tuple[str, int], list[StoredVerdict]] = {}
    for v in run.verdicts:
        stored.setdefault((v.case_id, v.n), []).append(v)
    result = ReplayResult(run.run_id)

    for trial in run.trials:
        secret = trial.case_id in hidden or (
            trial.case_id in cases and cases[trial.case_id].split == "hidden")
        name = hidden.get(trial.case_id, "holdout-?") if secret else trial.case_id
        rows = sorted(stored.get((trial.case_id, trial.n), []), key=lambda v: v.position)
        result.trials += 1
        case = cases.get(trial.case_id)
        if case is None:
            result.unreplayable.append(Unreplayable(name, trial.n, "case not in the stored suite"))
            continue
        if trial.trace_digest is None:
            # A broken trial has no trace to re-grade: only its outcome can be checked.
            if trial.outcome != "broken":
                result.differences.append(Difference(
                    name, trial.n, None, None, "outcome", trial.outcome, "broken"))
            if rows:
                result.differences.append(Difference(
                    name, trial.n, None, None, "verdict count", str(len(rows)), "0"))
            continue
        if trial.trace is None:
            result.unreplayable.append(Unreplayable(name, trial.n, "trace content erased"))
            continue
        trace = Trace.model_validate_json(trial.trace)
        verdicts = grade_trace(case.expect, trace)
        recomputed = fold_trial(trial.n, verdicts, trace=trace)
        result.verdicts += len(verdicts)
        if recomputed.outcome != trial.outcome:
            result.differences.append(Difference(
                name, trial.n, None, None, "outcome", trial.outcome, recomputed.outcome))
        if len(rows) != len(verdicts):
            result.differences.append(Difference(
                name, trial.n, None, None, "verdict count", str(len(rows)), str(len(verdicts))))
        for row, verdict in zip(rows, verdicts, strict=False):
            label = None if secret else verdict.assertion
            for what, old, new in (("outcome", row.outcome, verdict.outcome),
                                   ("evidence", row.evidence, str(verdict.evidence))):
                if old != new:
                    result.differences.append(Difference(
                        name, trial.n, row.position + 1, label, what, old, new))
    return result

"""A trial's verdicts, the trial and its case as plain records, for the battery's hot path.

The pydantic models of ``model.result`` are what a user, a file or the API
sees: each is validated as it is made, which costs microseconds a model.
A battery makes a verdict per assertion, a trial and a case for every trial
it runs, all from values that are valid already (the fold made them), and
hands them on to the record, the spool and the tally, which only read them.
These records carry the same fields under the same names, so everything
that only reads a result takes either; ``to_model`` gives the validated
model where one is wanted (an edge), and ``json_dict`` the values the
model's compact JSON holds, in its order, with what it leaves out left out
(``case_json`` writes them: the same bytes as the model's).

What a record holds is made storable where it is built (``storable_note``:
the models' only validators), so the model made from it validates it to the
same values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .result import CaseResult, RateSummary, TrialResult, Verdict
from .trace import Usage

if TYPE_CHECKING:
    from .changes import FileChange
    from .evidence import Evidence
    from .trace import Trace
    from .turns import TurnSummary


@dataclass(slots=True)
class PlainVerdict:
    """``model.result.Verdict``'s fields, unvalidated (``note`` storable already)."""

    assertion: str
    check: str
    family: str
    outcome: str
    evidence: Evidence
    note: str
    provenance: str
    threshold: float | None
    score: float | None

    def to_model(self) -> Verdict:
        """The validated ``Verdict``."""
        return Verdict(assertion=self.assertion, check=self.check, family=self.family,  # type: ignore[arg-type]
                       outcome=self.outcome, evidence=self.evidence,  # type: ignore[arg-type]
                       note=self.note, provenance=self.provenance, threshold=self.threshold,
                       score=self.score)

    def json_dict(self) -> dict[str, Any]:
        """What ``Verdict``'s JSON holds, in its order (``score`` only when given)."""
        found = {"assertion": self.assertion, "check": self.check, "family": self.family,
                 "outcome": self.outcome, "evidence": self.evidence.value, "note": self.note,
                 "provenance": self.provenance, "threshold": self.threshold}
        if self.score is not None:
            found["score"] = self.score
        return found


def verdict_model(verdict: PlainVerdict | Verdict) -> Verdict:
    """A verdict as the model, whichever it was made as."""
    return verdict if isinstance(verdict, Verdict) else verdict.to_model()


def _verdict_dict(verdict: PlainVerdict | Verdict) -> dict[str, Any]:
    if isinstance(verdict, PlainVerdict):
        return verdict.json_dict()
    return verdict.model_dump(mode="json")


@dataclass(slots=True, weakref_slot=True)
class PlainTrial:
    """``model.result.TrialResult``'s fields, unvalidated (``reason`` storable already)."""

    n: int
    outcome: str
    reason: str | None
    duration_s: float
    usage: Usage
    verdicts: list[PlainVerdict | Verdict]
    changes: list[FileChange] | None
    turns: list[TurnSummary] | None
    trace: Trace | None
    opinions: dict[int, list[Any]]

    def to_model(self) -> TrialResult:
        """The validated ``TrialResult``."""
        return TrialResult(n=self.n, outcome=self.outcome, reason=self.reason,  # type: ignore[arg-type]
                           duration_s=self.duration_s, usage=self.usage,
                           verdicts=[verdict_model(v) for v in self.verdicts],
                           changes=self.changes, turns=self.turns, trace=self.trace,
                           opinions=self.opinions)

    def json_dict(self) -> dict[str, Any]:
        """What ``TrialResult``'s JSON holds, in its order (no trace, no opinions)."""
        usage = self.usage
        found: dict[str, Any] = {
            "n": self.n, "outcome": self.outcome, "reason": self.reason,
            "duration_s": self.duration_s,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                      "cost_usd": usage.cost_usd},
            "verdicts": [_verdict_dict(v) for v in self.verdicts]}
        if self.changes is not None:
            found["changes"] = [change.model_dump(mode="json") for change in self.changes]
        if self.turns is not None:
            found["turns"] = [turn.model_dump(mode="json") for turn in self.turns]
        return found


def trial_model(trial: PlainTrial | TrialResult) -> TrialResult:
    """A trial as the model, whichever it was made as."""
    return trial if isinstance(trial, TrialResult) else trial.to_model()


def _trial_dict(trial: PlainTrial | TrialResult) -> dict[str, Any]:
    if isinstance(trial, PlainTrial):
        return trial.json_dict()
    return trial.model_dump(mode="json")


@dataclass(slots=True)
class PlainCase:
    """``model.result.CaseResult``'s fields, unvalidated."""

    id: str
    split: str
    outcome: str
    reason: str | None
    pass_at_1: float
    pass_hat_k: float
    k: int
    pass_hat: dict[str, float]
    synthetic: bool
    tags: list[str]
    quality: list[RateSummary]
    score: float | None
    trials: list[PlainTrial | TrialResult]
    facets: dict[str, str]

    def to_model(self) -> CaseResult:
        """The validated ``CaseResult``."""
        return CaseResult(id=self.id, split=self.split, outcome=self.outcome,  # type: ignore[arg-type]
                          reason=self.reason, pass_at_1=self.pass_at_1,
                          pass_hat_k=self.pass_hat_k, k=self.k, pass_hat=self.pass_hat,
                          synthetic=self.synthetic, tags=self.tags, quality=self.quality,
                          score=self.score, trials=[trial_model(t) for t in self.trials],
                          facets=self.facets)

    def json_dict(self) -> dict[str, Any]:
        """What ``CaseResult``'s JSON holds, in its order (``score``, ``facets`` when given)."""
        found: dict[str, Any] = {
            "id": self.id, "split": self.split, "outcome": self.outcome, "reason": self.reason,
            "pass_at_1": self.pass_at_1, "pass_hat_k": self.pass_hat_k, "k": self.k,
            "pass_hat": self.pass_hat, "synthetic": self.synthetic, "tags": self.tags,
            "quality": [q.model_dump(mode="json") for q in self.quality]}
        if self.score is not None:
            found["score"] = self.score
        found["trials"] = [_trial_dict(t) for t in self.trials]
        if self.facets:
            found["facets"] = self.facets
        return found

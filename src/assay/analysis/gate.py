"""A release decision on a stored run: allowed or blocked, every reason named (SPEC §8).

``decide`` is pure: the run's facts, the policies and (for ``--baseline``)
the baseline's facts give the decision. ``gate`` reads the store, decides and
seals the decision as a ``gate`` ledger entry that names both runs by their
seals, so an auditor (``assay replay``) can decide again from what is stored
and see whether the entry still says the same (docs/decisions/0029-compare-and-gate.md).

Policies combine; each is checked only when given, except the first:

- always: no structural breach in the run (one breach is a breach), and the
  run was not interrupted (it did not run every case);
- ``baseline``: blocked when the run's overall + ``tolerance`` is under the
  baseline's overall, both taken over the cases aligned between them;
- ``min_score``: the run's overall is at least it;
- ``min_cases``: the run has at least that many cases;
- ``critical``: each named case passed (a missing one did not);
- ``confident``: no quality check's interval straddles its threshold.

Reasons name public cases by id and hidden ones as ``holdout-N`` only, and
say nothing else of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import AssayError, UsageError
from ..grading.stats import EPSILON
from .compare import align
from .run_facts import CaseFacts, RunFacts

if TYPE_CHECKING:
    from ..store.database import Store
    from ..store.ledger.replaying import LedgerEntry
    from .replay import Difference

Decision = Literal["allowed", "blocked"]
T = TypeVar("T")

#: ``--tolerance``'s default: the run may be this much under the baseline's overall.
DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Policies:
    """What a gate checks beyond "no structural breach" (SPEC §8); None: not asked."""

    baseline: str | None = None
    tolerance: float | None = None
    min_score: float | None = None
    min_cases: int | None = None
    critical: tuple[str, ...] = ()
    confident: bool = False

    def check(self) -> None:
        """Refuse a policy that could not be checked, or would silently do nothing."""
        if self.tolerance is not None:
            if self.baseline is None:
                raise UsageError("--tolerance applies to --baseline: give the baseline run")
            if not (math.isfinite(self.tolerance) and 0 <= self.tolerance <= 1):
                raise UsageError(f"--tolerance must be between 0 and 1, got {self.tolerance}")
        if self.min_score is not None and not (0 <= self.min_score <= 1):
            raise UsageError(f"--min-score must be between 0 and 1, got {self.min_score}")
        if self.min_cases is not None and self.min_cases < 0:
            raise UsageError(f"--min-cases must be 0 or more, got {self.min_cases}")

    def to_json(self) -> dict[str, Any]:
        """What was asked, as the ledger entry and ``assay.gate/1`` record it."""
        asked: dict[str, Any] = {"structural": True}
        if self.baseline is not None:
            asked["baseline"] = self.baseline
            asked["tolerance"] = (DEFAULT_TOLERANCE if self.tolerance is None
                                  else self.tolerance)
        if self.min_score is not None:
            asked["min_score"] = self.min_score
        if self.min_cases is not None:
            asked["min_cases"] = self.min_cases
        if self.critical:
            asked["critical"] = list(self.critical)
        if self.confident:
            asked["confident"] = True
        return asked

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policies:
        """The policies a gate entry recorded (``to_json``'s inverse)."""
        return cls(baseline=data.get("baseline"), tolerance=data.get("tolerance"),
                   min_score=data.get("min_score"), min_cases=data.get("min_cases"),
                   critical=tuple(data.get("critical") or ()),
                   confident=bool(data.get("confident", False)))


@dataclass(frozen=True)
class GateResult:
    """A decision, its reasons, and per policy what was found."""

    run_id: str
    decision: Decision
    reasons: list[str]
    policies: dict[str, Any]
    #: The ledger entry that sealed it (``gate``); None until recorded.
    seal: dict[str, Any] | None = field(default=None)
    #: What it was decided on (the run's and the baseline's facts), for a caller
    #: that keeps them (``commands.common.outlive``); not part of the decision.
    facts: tuple[RunFacts | None, ...] = field(default=(), repr=False, compare=False)

    @property
    def allowed(self) -> bool:
        """Whether the decision is ``allowed``."""
        return self.decision == "allowed"

    def to_json(self) -> dict[str, Any]:
        """``assay.gate/1``."""
        return {"schema": "assay.gate/1", "run_id": self.run_id, "decision": self.decision,
                "reasons": list(self.reasons), "policies": self.policies, "seal": self.seal}


def decide(run: RunFacts, policies: Policies, baseline: RunFacts | None = None) -> GateResult:
    """The decision on ``run`` under ``policies`` (``baseline``: the facts of that run)."""
    reasons: list[str] = []
    found: dict[str, Any] = {}

    breached = [c for c in run.cases if c.breaches]
    found["structural"] = {"ok": not breached, "breached_cases": len(breached)}
    for case in breached:
        reasons.append(f"{case.label}: a structural check failed" if case.split == "hidden"
                       else f"{case.label}: structural check failed: {'; '.join(case.breaches)}")
    if run.interrupted:
        found["structural"]["ok"] = False
        found["structural"]["interrupted"] = True
        reasons.append("the run was interrupted: not every case ran")

    if policies.baseline is not None:
        if baseline is None:
            raise UsageError("--baseline: the baseline run's facts were not given")
        tolerance = DEFAULT_TOLERANCE if policies.tolerance is None else policies.tolerance
        found["baseline"] = _against_baseline(run, baseline, tolerance, reasons)

    if policies.min_score is not None:
        ok = run.overall is not None and run.overall + EPSILON >= policies.min_score
        found["min_score"] = {"ok": ok, "required": policies.min_score, "overall": run.overall}
        if not ok:
            reasons.append(f"overall {_pct(run.overall)} is under the required "
                           f"{_pct(policies.min_score)}")

    if policies.min_cases is not None:
        ok = len(run.cases) >= policies.min_cases
        found["min_cases"] = {"ok": ok, "required": policies.min_cases, "cases": len(run.cases)}
        if not ok:
            reasons.append(f"{len(run.cases)} case(s), fewer than the required "
                           f"{policies.min_cases}")

    if policies.critical:
        found["critical"] = _critical(run, policies.critical, reasons)

    if policies.confident:
        straddling = [c for c in run.cases if c.straddles]
        found["confident"] = {"ok": not straddling, "straddling_cases": len(straddling)}
        for case in straddling:
            reasons.append(f"{case.label}: a quality check's interval straddles its threshold"
                           if case.split == "hidden" else
                           f"{case.label}: interval straddles the threshold: "
                           f"{'; '.join(case.straddles)}")

    decision: Decision = "blocked" if reasons else "allowed"
    asked = policies.to_json()
    if policies.critical:
        # A hidden case named by its id is recorded (and shown) as holdout-N: its
        # id is its content's to keep, and the entry must be fit to show.
        hidden = {c.id: c.label for c in run.cases if c.split == "hidden"}
        asked["critical"] = [hidden.get(name, name) for name in policies.critical]
    return GateResult(run.run_id, decision, reasons, {"asked": asked, **found})


def _against_baseline(run: RunFacts, baseline: RunFacts, tolerance: float,
                      reasons: list[str]) -> dict[str, Any]:
    # align() refuses runs of two suites; the rows it keeps are the cases both ran alike.
    rows = [r for r in align(baseline, run)
            if r.alignment == "aligned" and r.base_case is not None and r.cand_case is not None
            and not r.base_case.synthetic]
    found: dict[str, Any] = {"run_id": baseline.run_id, "tolerance": tolerance,
                             "aligned": len(rows)}
    if not rows:
        found.update(ok=False, overall=None, baseline_overall=None)
        reasons.append(f"no case is aligned with the baseline {baseline.run_id}: the gate "
                       "cannot show the run is not worse")
        return found
    mine = sum(1 for r in rows if r.cand == "pass") / len(rows)
    theirs = sum(1 for r in rows if r.base == "pass") / len(rows)
    ok = mine + tolerance + EPSILON >= theirs
    found.update(ok=ok, overall=mine, baseline_overall=theirs)
    if not ok:
        reasons.append(f"overall {_pct(mine)} on {len(rows)} aligned case(s) is more than "
                       f"{_pct(tolerance)} under the baseline {baseline.run_id}'s "
                       f"{_pct(theirs)}")
    return found


def _critical(run: RunFacts, names: Sequence[str], reasons: list[str]) -> dict[str, Any]:
    by_id: dict[str, CaseFacts] = {}
    for case in run.cases:
        by_id.setdefault(case.id, case)
        by_id.setdefault(case.label, case)  # holdout-N names a hidden case too
    failed = 0
    for name in names:
        named = by_id.get(name)
        if named is None:
            failed += 1
            reasons.append(f"critical case {name} is not in the run")
        elif named.outcome != "pass":
            failed += 1
            reasons.append(f"critical case {named.label} did not pass ({named.outcome})")
    return {"ok": not failed, "cases": len(names), "not_passed": failed}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


# --- the store ------------------------------------------------------------------------

def gate(store: Store, run_id: str, policies: Policies) -> GateResult:
    """Decide on a stored, sealed run and seal the decision as a ``gate`` ledger entry."""
    from .run_facts import load_stored

    policies.check()
    run = load_stored(store, run_id)
    baseline = load_stored(store, policies.baseline) if policies.baseline is not None else None
    result = decide(run, policies, baseline)
    entry = store.ledger.append("gate", entry_content(result, run, baseline))
    return GateResult(result.run_id, result.decision, result.reasons, result.policies,
                      {"entry": entry.index, "hash": entry.hash}, (run, baseline))


def entry_content(result: GateResult, run: RunFacts, baseline: RunFacts | None
                  ) -> dict[str, Any]:
    """What a ``gate`` entry records: the decision, its reasons, and the runs by their seals."""
    def sealed(facts: RunFacts) -> dict[str, Any]:
        return {"run_id": facts.run_id, "seal": dict(facts.seal) if facts.seal else None}

    return {"run_id": result.run_id, "decision": result.decision, "reasons": result.reasons,
            "policies": result.policies["asked"], "run": sealed(run),
            "baseline": sealed(baseline) if baseline is not None else None}


class PolicyDenied(AssayError):
    """``publish_gated`` refused to publish: the gate blocked the run. ``reasons`` says why."""

    exit_code = 1

    def __init__(self, run_id: str, reasons: Sequence[str], seal: Mapping[str, Any] | None
                 ) -> None:
        self.run_id = run_id
        self.reasons = list(reasons)
        self.seal = dict(seal) if seal else None
        super().__init__(f"run {run_id} may not be published: " + "; ".join(self.reasons))


def publish_gated(run_id: str, publish: Callable[[], T], *, baseline: str | None = None,
                  tolerance: float = DEFAULT_TOLERANCE, min_score: float | None = None,
                  min_cases: int | None = None, critical: Sequence[str] = (),
                  confident: bool = False, db: str | None = None) -> T:
    """Call ``publish()`` only if the gate allows ``run_id``; else raise :class:`PolicyDenied`.

    The decision is sealed in the ledger either way, as ``assay gate`` seals it.
    With no ``baseline`` (a first publish) only the other policies apply.
    Returns what ``publish`` returns.
    """
    from ..store.database import open_store

    policies = Policies(baseline=baseline, tolerance=tolerance if baseline is not None else None,
                        min_score=min_score, min_cases=min_cases, critical=tuple(critical),
                        confident=confident)
    store = open_store(db)
    try:
        result = gate(store, run_id, policies)
    finally:
        store.close()
    if not result.allowed:
        raise PolicyDenied(run_id, result.reasons, result.seal)
    return publish()


# --- replay -------------------------------------------------------------------------

def recheck(entries: Sequence[LedgerEntry], load: Callable[[str], RunFacts]
            ) -> tuple[int, list[Difference]]:
    """Decide each ``gate`` entry again from the stored runs; name what no longer holds.

    For ``assay replay RUN``: the entry must be intact, name the run's seal as
    it is stored now, and give the same decision and reasons under the
    policies it recorded. Nothing from an entry is quoted but enum words and
    counts (a forged entry could hold any text). Returns how many entries were
    checked and the differences.
    """
    from .replay import Difference

    found: list[Difference] = []
    checked = 0
    for entry in entries:
        if entry.kind != "gate":
            continue
        checked += 1
        where = f"gate entry {entry.index}"

        def differ(what: str, ledger: str, now: str, where: str = where) -> None:
            found.append(Difference(None, None, None, None, f"{where}: {what}",
                                    (("ledger", ledger), ("recomputed", now))))

        if not entry.intact:
            found.append(Difference(None, None, None, None,
                                    f"{where} does not match its digest or hash"))
            continue
        content = entry.content
        if content is None:
            continue  # erased: nothing of a decision is personal, but nothing to check either
        try:
            run = load(str(content["run_id"]))
            base_ref = (content.get("baseline") or {}).get("run_id")
            baseline = load(str(base_ref)) if base_ref is not None else None
            again = decide(run, Policies.from_json(content.get("policies") or {}), baseline)
        except (AssayError, KeyError, TypeError, AttributeError, ValueError):
            differ("its runs", "recorded", "cannot be read or decided again")
            continue
        recorded_seal = (content.get("run") or {}).get("seal")
        if recorded_seal != (dict(run.seal) if run.seal else None):
            differ("the run's seal", "as recorded", "another seal")
        decision = content.get("decision")
        if decision != again.decision:
            differ("decision", decision if decision in ("allowed", "blocked") else "(not one)",
                   again.decision)
        elif content.get("reasons") != again.reasons:
            reasons = content.get("reasons")
            differ("reasons", f"{len(reasons) if isinstance(reasons, list) else 0} reason(s)",
                   f"{len(again.reasons)} reason(s), not the same")
    return checked, found

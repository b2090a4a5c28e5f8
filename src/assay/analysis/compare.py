"""Compare two runs of one suite: per-case changes, totals, significance, a verdict (SPEC §8).

A pure function of two :class:`RunFacts`. Rows are cases aligned by id: a
stored run's hidden cases by their real id, a report file's by ``holdout-N``
when both runs ran the same hidden set. A row claims a delta only when both
sides ran the same thing:

- ``aligned``: every facet both sides recorded matches (the case, its
  fixture, assertions and graders as digests; harness, host version,
  invocation, model);
- ``unverified``: nothing differs, but a side did not record some facet
  (a run stored before facets were kept);
- ``non-comparable``: a facet differs — no delta is claimed for the row.

Only aligned rows decide the verdict and the significance figures; every row
shows its change. Facet names are shown, never their values (a hidden case's
facets are digests of its content). docs/decisions/0029-compare-and-gate.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import UsageError
from ..grading.stats import mcnemar_exact, paired_difference
from .run_facts import RUN_FACETS, CaseFacts, RunFacts

Alignment = Literal["aligned", "unverified", "non-comparable"]
Change = Literal["same", "fixed", "regressed", "added", "removed"]
Verdict = Literal["worse", "better", "same", "non-comparable"]

#: More cost or tokens than this fraction, for the same outcomes, is a regression.
DEFAULT_COST_TOLERANCE = 0.25


@dataclass(slots=True)  # not frozen: 10,000 rows are made in one comparison
class Row:
    """One case in both runs (or one of them)."""

    label: str
    split: str
    base: str | None
    cand: str | None
    change: Change
    alignment: Alignment
    #: Facets recorded by both sides that differ (names only).
    differs: tuple[str, ...] = ()
    #: Facets only one side recorded (names only).
    unrecorded: tuple[str, ...] = ()
    base_case: CaseFacts | None = field(default=None, repr=False, compare=False)
    cand_case: CaseFacts | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The row as ``assay.compare/1`` writes it."""
        return {"case": self.label, "split": self.split, "base": self.base, "cand": self.cand,
                "change": self.change, "alignment": self.alignment,
                "differs": list(self.differs), "unrecorded": list(self.unrecorded)}


@dataclass(frozen=True)
class Totals:
    """One side's whole run: counts, pass@1, cost, tokens, mean trial duration."""

    total: int
    passed: int
    failed: int
    inconclusive: int
    broken: int
    pass_at_1: float | None
    cost_usd: float | None
    tokens: int | None
    mean_duration_s: float | None

    def to_json(self) -> dict[str, Any]:
        """As the JSON's ``totals.base`` / ``totals.cand``."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Comparison:
    """What ``assay compare`` found."""

    base: RunFacts
    cand: RunFacts
    rows: list[Row]
    base_totals: Totals
    cand_totals: Totals
    #: Paired pass@1 difference (cand − base) over aligned rows, its SE, McNemar's p.
    diff: float | None
    se: float | None
    mcnemar_p: float
    #: Cost and tokens over aligned rows (base, cand), and which grew past the tolerance.
    aligned_cost: Mapping[str, tuple[float | None, float | None]]
    dearer: tuple[str, ...]
    cost_tolerance: float
    verdict: Verdict

    @property
    def aligned(self) -> list[Row]:
        """The rows a delta is claimed for."""
        return [r for r in self.rows if r.alignment == "aligned" and r.base and r.cand]

    def to_json(self) -> dict[str, Any]:
        """``assay.compare/1``: hidden cases as holdout-N, facets by name only."""
        return {
            "schema": "assay.compare/1",
            "base": _side(self.base), "cand": _side(self.cand),
            "rows": [r.to_json() for r in self.rows],
            "totals": {"base": self.base_totals.to_json(), "cand": self.cand_totals.to_json()},
            "significance": {"pass_at_1_diff": self.diff, "se": self.se,
                             "mcnemar_p": self.mcnemar_p, "aligned": len(self.aligned)},
            "cost": {"tolerance": self.cost_tolerance, "dearer": list(self.dearer),
                     "aligned": {k: {"base": v[0], "cand": v[1]}
                                 for k, v in self.aligned_cost.items()}},
            "verdict": self.verdict,
        }


def _side(run: RunFacts) -> dict[str, Any]:
    return {"run_id": run.run_id, "suite": run.suite_id, "suite_digest": run.suite_digest,
            "target": {"uri": run.target_uri, "digest": run.target_digest},
            "started_at": run.started_at, "source": run.source}


def compare(base: RunFacts, cand: RunFacts,
            cost_tolerance: float = DEFAULT_COST_TOLERANCE) -> Comparison:
    """Compare ``cand`` with ``base`` (see the module doc); runs of two suites are refused."""
    if not (cost_tolerance >= 0 and math.isfinite(cost_tolerance)):
        raise UsageError(f"--cost-tolerance must be a number >= 0, got {cost_tolerance}")
    rows = align(base, cand)
    aligned = [r for r in rows if r.alignment == "aligned" and r.base and r.cand]
    pairs = [(r.base_case, r.cand_case) for r in aligned]
    diffs = [c.pass_at_1 - b.pass_at_1 for b, c in pairs if b is not None and c is not None]
    diff, se = paired_difference(diffs)
    regressed = sum(1 for r in aligned if r.change == "regressed")
    fixed = sum(1 for r in aligned if r.change == "fixed")
    cost = _aligned_cost(aligned)
    dearer = tuple(name for name, (b, c) in cost.items()
                   if b is not None and c is not None and _grew(b, c, cost_tolerance))
    verdict: Verdict
    if not aligned:
        verdict = "non-comparable"
    elif regressed or (not fixed and dearer):
        verdict = "worse"
    elif fixed:
        verdict = "better"
    else:
        verdict = "same"
    return Comparison(base, cand, rows, totals(base), totals(cand), diff, se,
                      mcnemar_exact(regressed, fixed), cost, dearer, cost_tolerance, verdict)


def align(base: RunFacts, cand: RunFacts) -> list[Row]:
    """One row per case of either run, base's order first, then the candidate's new cases.

    Hidden cases are matched by id when both runs come from the store; when
    either is a report file, both sides' hidden cases are ``holdout-N`` in their
    own order, and match only if both ran the same hidden set (a ``hidden_set``
    facet says so, or that they did not; a side that does not say leaves the
    row unverified). Runs of two suites are refused.
    """
    if base.suite_id != cand.suite_id:
        raise UsageError(f"run {base.run_id} is of suite {base.suite_id} and run "
                         f"{cand.run_id} of {cand.suite_id}: compare runs of one suite")
    by_identity = base.source == "store" and cand.source == "store"
    left = _keyed(base, by_identity)
    right = _keyed(cand, by_identity)
    rows: list[Row] = []
    holdouts = 0
    for key in [*left, *(k for k in right if k not in left)]:
        b, c = left.get(key), right.get(key)
        case = b or c
        assert case is not None
        label = case.label
        needs: tuple[str, ...] = ()
        if case.split == "hidden":
            holdouts += 1
            label = f"holdout-{holdouts}"
            if not by_identity:  # matched by position: only the set's digest vouches for it
                needs = ("hidden_set",)
        rows.append(_row(label, case.split, b, c, needs))
    return rows


def _keyed(run: RunFacts, by_identity: bool) -> dict[tuple[str, str], CaseFacts]:
    keyed: dict[tuple[str, str], CaseFacts] = {}
    for case in run.cases:
        if case.split == "hidden" and not by_identity:
            # A hidden case of a file is known by position only: the set's digest
            # stands for "the same case" (it covers every hidden case's content).
            # A report that does not say its hidden set records no such facet (the row
            # is then unverified, never aligned by position alone).
            facets = {**case.facets, **({"hidden_set": run.hidden_set} if run.hidden_set
                                        else {})}
            pass_at_1 = case.pass_at_1
            if run.source == "store":  # its own facets would not be on the file's side,
                facets = {k: v for k, v in facets.items() if k in (*RUN_FACETS, "hidden_set")}
                # nor its pass@1 over trials: paired, both sides say what the file can
                pass_at_1 = 1.0 if case.outcome == "pass" else 0.0
            case = CaseFacts(case.id, case.label, case.split, case.outcome, pass_at_1,
                             facets, case.usd, case.tokens, case.duration_s, case.trials,
                             case.breaches, case.straddles, case.synthetic)
            keyed[("hidden", case.label)] = case
        else:
            keyed[(case.split, case.id)] = case
    return keyed


def _row(label: str, split: str, b: CaseFacts | None, c: CaseFacts | None,
         needs: tuple[str, ...] = ()) -> Row:
    """The row of one case; a facet in ``needs`` that a side lacks is unrecorded."""
    if b is None or c is None:
        present = b or c
        assert present is not None
        return Row(label, split, b.outcome if b else None, c.outcome if c else None,
                   "added" if b is None else "removed", "non-comparable",
                   base_case=b, cand_case=c)
    if b.facets == c.facets:  # the usual row: one comparison in C
        differs: tuple[str, ...] = ()
        unrecorded = tuple(k for k in needs if k not in b.facets)
    else:
        differs = tuple(sorted(k for k in set(b.facets) & set(c.facets)
                               if b.facets[k] != c.facets[k]))
        unrecorded = tuple(sorted((set(b.facets) ^ set(c.facets))
                                  | {k for k in needs if k not in b.facets or k not in c.facets}))
    alignment: Alignment = ("non-comparable" if differs
                            else "unverified" if unrecorded else "aligned")
    was, now = b.outcome == "pass", c.outcome == "pass"
    change: Change = "same" if was == now else "fixed" if now else "regressed"
    return Row(label, split, b.outcome, c.outcome, change, alignment, differs, unrecorded,
               base_case=b, cand_case=c)


def _aligned_cost(rows: list[Row]) -> dict[str, tuple[float | None, float | None]]:
    """Cost and tokens summed over the aligned rows where both sides reported them."""
    found: dict[str, tuple[float | None, float | None]] = {}
    for name in ("usd", "tokens"):
        both = [(getattr(r.base_case, name), getattr(r.cand_case, name)) for r in rows]
        both = [(b, c) for b, c in both if b is not None and c is not None]
        found[name] = ((math.fsum(b for b, _ in both), math.fsum(c for _, c in both))
                       if both else (None, None))
    return found


def _grew(base: float, cand: float, tolerance: float) -> bool:
    """Whether ``cand`` is more than ``tolerance`` (a fraction) above ``base``."""
    if base <= 0:
        return cand > 0
    return cand > base * (1 + tolerance) * (1 + 1e-12)


def totals(run: RunFacts) -> Totals:
    """A side's totals over all its cases (SPEC §8)."""
    outcomes = [c.outcome for c in run.cases]
    durations = [c.duration_s for c in run.cases if c.trials]
    trials = sum(c.trials for c in run.cases)
    return Totals(
        total=len(outcomes), passed=outcomes.count("pass"), failed=outcomes.count("fail"),
        inconclusive=outcomes.count("inconclusive"), broken=outcomes.count("broken"),
        pass_at_1=(math.fsum(c.pass_at_1 for c in run.cases) / len(run.cases)
                   if run.cases else None),
        cost_usd=run.usd, tokens=run.tokens,
        mean_duration_s=math.fsum(durations) / trials if trials else None,
    )

"""Drift: did the world move under an unchanged agent, or did someone change something? (SPEC §8)

A pure function of the newest two sealed batteries of one suite version and
one target digest (the command picks them; docs/decisions/0028-drift.md):

- ``changed``: what ran moved between them. The target digest covers the
  agent's definition only; an ``openai:`` alias the server silently points
  at another model keeps its digest, so the facets that say what actually
  answered are compared too: the run's ``model`` and ``host_version``, each
  case's served ``model`` (and its other facets: the case, fixture,
  assertions, graders), and the suite's and hidden set's digests;
- ``drift``: nothing moved, but a case's outcome flipped (pass ↔ not pass);
- ``stable``: neither.

``changed`` wins over ``drift``: flips under a changed model are explained
by the change, not by the world (they are still listed).

A hidden case is named ``holdout-N`` and its facets by name only: its model
may be a pin written in the hidden case, and its other facets are digests of
its content (PRINCIPLES 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import UsageError
from .compare import align
from .run_facts import RUN_DEFAULTS, RunFacts

Status = Literal["changed", "drift", "stable"]

#: The run's facets that say what answered (SPEC §8); the harness is part of the digest.
#: ``agent_cache``: whether answers may have been served from the agent cache.
WATCHED = ("model", "host_version", "agent_cache")
#: A public case's facets whose values are names, shown; the rest are digests, named only.
_NAMES = frozenset({"model", "host_version", "harness"})


@dataclass(frozen=True)
class Moved:
    """One facet that moved: the run's (``case`` None) or one case's."""

    facet: str
    #: The values, or None when not shown (a hidden case's, a digest) or not recorded.
    base: str | None
    cand: str | None
    #: The case's label (``holdout-N`` for a hidden case) and split; None for the run.
    case: str | None = None
    split: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As ``assay.drift/1``'s ``changed`` entries."""
        found: dict[str, Any] = {"facet": self.facet, "base": self.base, "cand": self.cand}
        if self.case is not None:
            found.update(case=self.case, split=self.split)
        return found


@dataclass(frozen=True)
class Flip:
    """A case whose outcome flipped between the two batteries."""

    case: str
    split: str
    base: str
    cand: str
    change: Literal["fixed", "regressed"]

    def to_json(self) -> dict[str, Any]:
        """As ``assay.drift/1``'s ``flipped`` entries."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Drift:
    """What ``assay drift`` found."""

    base: RunFacts
    cand: RunFacts
    status: Status
    changed: list[Moved]
    flipped: list[Flip]

    def to_json(self) -> dict[str, Any]:
        """``assay.drift/1``: hidden cases as holdout-N, their facets by name only."""
        return {
            "schema": "assay.drift/1",
            "suite": self.cand.suite_id,
            "target": {"uri": self.cand.target_uri, "digest": self.cand.target_digest},
            "base": _side(self.base), "cand": _side(self.cand),
            "status": self.status,
            "changed": [m.to_json() for m in self.changed],
            "flipped": [f.to_json() for f in self.flipped],
        }


def _side(run: RunFacts) -> dict[str, Any]:
    return {"run_id": run.run_id, "started_at": run.started_at,
            "facets": {k: run.facets[k] for k in WATCHED if k in run.facets}}


def drift(base: RunFacts, cand: RunFacts) -> Drift:
    """Compare the older battery ``base`` with the newer ``cand`` (see the module doc)."""
    if (base.suite_id, base.target_digest) != (cand.suite_id, cand.target_digest):
        raise UsageError(f"runs {base.run_id} and {cand.run_id} are not batteries of one "
                         "suite version and one agent version")
    changed = _run_moves(base, cand)
    explained = {(m.facet, m.base, m.cand) for m in changed}
    flipped: list[Flip] = []
    for row in align(base, cand):
        b, c = row.base_case, row.cand_case
        if b is None or c is None:
            continue  # a case of one battery only: the suite's digests say it moved
        for facet in row.differs:
            was, now = b.facets[facet], c.facets[facet]
            if (facet, was, now) in explained:
                continue  # the run's own move, seen by every case
            shown = row.split != "hidden" and facet in _NAMES
            changed.append(Moved(facet, was if shown else None, now if shown else None,
                                 row.label, row.split))
        if row.change in ("fixed", "regressed") and row.base and row.cand:
            flipped.append(Flip(row.label, row.split, row.base, row.cand, row.change))
    status: Status = "changed" if changed else "drift" if flipped else "stable"
    return Drift(base, cand, status, changed, flipped)


def _run_moves(base: RunFacts, cand: RunFacts) -> list[Moved]:
    """The run-level facets and the suite digests that moved, values shown."""
    def said(run: RunFacts, name: str) -> str | None:
        return run.facets.get(name, RUN_DEFAULTS.get(name))

    moved = [Moved(name, said(base, name), said(cand, name)) for name in WATCHED
             if said(base, name) != said(cand, name)]
    if base.suite_digest != cand.suite_digest:
        moved.append(Moved("suite", base.suite_digest, cand.suite_digest))
    if base.hidden_set != cand.hidden_set:
        moved.append(Moved("hidden_set", base.hidden_set, cand.hidden_set))
    return moved

"""Agents: the registry's names, a page per agent, and two versions of one compared.

``/agents`` lists the names ``assay agent publish --name`` filed versions
under. ``/agents/NAME`` is one agent (SPEC §11): its versions, newest
first, each with its state and its newest whole battery per suite — public
and hidden scores side by side, never blended, hidden cases only as counts —
the ``possibly-tuned`` warning where a battery raised it, what ``assay
drift`` says of each suite's newest two batteries of the version, and the
current version compared with the previous one. ``/agents/NAME/comparison``
is ``assay compare --agent NAME A B`` on the page; its twin is the same
``assay.compare/1`` document. Nothing here stores anything.
docs/decisions/0065-agent-names.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from .render import BadRequest, NotFound, respond

if TYPE_CHECKING:
    from ..analysis.registry import Named
    from ..store.database import Store
    from ..store.runs.listing import ListedRun

router = APIRouter()

#: Versions of one agent whose batteries and drift the page shows (the newest).
VERSIONS_SHOWN = 20
#: Suites compared between the current and the previous version (each reads two reports).
COMPARED_SUITES = 5
#: Drift notices per version (each reads two reports).
DRIFT_SHOWN = 3
#: The splits a battery is scored on, side by side (SPEC §5).
SPLITS = ("public", "hidden", "synthetic")


class _Registry:
    """The store's registry, read once per page: entries, run facts, names and states."""

    def __init__(self, store: Store) -> None:
        from ..analysis.registry import fold, names
        from ..store.registry import load

        self.entries, self.runs = load(store)
        self.named: dict[str, Named] = names(self.entries)
        self.states = fold(self.entries)

    def agent(self, name: str) -> Named:
        """The agent of that name; a 404 naming it when there is none."""
        found = self.named.get(name)
        if found is None:
            raise NotFound(f"no agent is published under the name {name!r}")
        return found

    def compare(self, store: Store, name: str, base: str, cand: str, suite: str | None,
                cost_tolerance: float = 0.25) -> Any:
        """``assay compare --agent`` over what was read already."""
        from ..analysis.agents import compare_versions

        return compare_versions(store, name, base, cand, suite, cost_tolerance,
                                registry=(self.entries, self.runs))


@router.get("/agents")
@router.get("/api/agents")
def agents_page(request: Request) -> Response:
    """Every agent name with its number of versions and its current one."""
    store = request.app.state.bench.open()
    registry = _Registry(store)
    agents = []
    for agent in registry.named.values():
        current = registry.states.get(agent.current)
        agents.append({"name": agent.name, "versions": len(agent.versions),
                       "current": agent.current,
                       "state": current.state if current is not None else "published",
                       "published_at": agent.published_at.get(agent.current)})
    return respond(request, "agents.html", {"agents": agents})


@router.get("/agents/{name}")
@router.get("/api/agents/{name}")
def agent_page(request: Request, name: str) -> Response:
    """One agent: its versions and their newest batteries, warnings, drift, current vs previous."""
    from ..analysis.registry import newest_batteries

    store = request.app.state.bench.open()
    registry = _Registry(store)
    agent, states, runs = registry.agent(name), registry.states, registry.runs
    shown = list(reversed(agent.versions))[:VERSIONS_SHOWN]
    listed = _listed(store, [r.run_id for v in shown
                             for r in newest_batteries(v, runs).values()])
    versions, warnings = [], []
    for version in shown:
        state = states.get(version)
        batteries = [_battery(listed[run.run_id]) for run in sorted(
            newest_batteries(version, runs).values(), key=lambda r: r.suite_id)
            if run.run_id in listed]
        for battery in batteries:
            if "possibly-tuned" in battery["flags"]:
                warnings.append({"version": version, "suite": battery["suite"],
                                 "run_id": battery["run_id"], "flag": "possibly-tuned"})
        versions.append({
            "version": version,
            "role": "current" if version == agent.current
            else "previous" if version == agent.previous else None,
            "uri": state.uri if state is not None else None,
            "state": state.state if state is not None else "published",
            "published_at": agent.published_at.get(version),
            "batteries": batteries,
            "drift": _drift(store, version, [b["suite"] for b in batteries]),
        })
    return respond(request, "agent.html", {
        "name": agent.name, "total_versions": len(agent.versions), "versions": versions,
        "warnings": warnings, "comparisons": _current_vs_previous(store, agent, registry)})


def _listed(store: Store, run_ids: list[str]) -> dict[str, ListedRun]:
    from ..store.runs.listing import listed_run

    found = {}
    for run_id in run_ids:
        row = listed_run(store, run_id)
        if row is not None:
            found[run_id] = row
    return found


def _battery(row: ListedRun) -> dict[str, Any]:
    """One battery as the agent page shows it: counts per split, never a case."""
    counts = row.listing.get("counts") or {}
    splits = {}
    for split in SPLITS:
        numbers = counts.get(split) or {}
        total = int(numbers.get("total") or 0)
        splits[split] = None if total <= 0 else {"passed": int(numbers.get("passed") or 0),
                                                 "total": total}
    return {"suite": row.suite_id, "run_id": row.run_id, "started_at": row.started_at,
            "scores": {"public": row.public, "hidden": row.hidden,
                       "pass_mark": row.pass_mark, "passed": row.passed},
            "counts": splits, "flags": list(row.listing.get("flags") or []),
            "cost_usd": row.listing.get("cost_usd"), "seal": {"entry": row.seal_entry,
                                                              "hash": row.seal_hash}}


def _drift(store: Store, version: str, suites: list[str]) -> list[dict[str, Any]]:
    """``assay.drift/1`` of the version's newest two batteries, per suite that has two."""
    from ..analysis.drift import drift
    from ..analysis.run_facts import load_stored
    from ..store.runs.batteries import newest_pairs

    notices = []
    for suite in suites[:DRIFT_SHOWN]:
        for pair in newest_pairs(store, suite, version=version):
            if pair.target_digest == version:
                notices.append(drift(load_stored(store, pair.base),
                                     load_stored(store, pair.cand)).to_json())
    return notices


def _current_vs_previous(store: Store, agent: Named, registry: _Registry) -> dict[str, Any]:
    """The current version against the previous one, per suite both have a battery of."""
    from ..analysis.registry import newest_batteries
    from ..errors import AssayError

    if agent.previous is None:
        return {"suites": [], "why": "the agent has one version: nothing to compare yet"}
    common = sorted(set(newest_batteries(agent.previous, registry.runs))
                    & set(newest_batteries(agent.current, registry.runs)))
    if not common:
        return {"suites": [], "why": "the current and the previous version have no battery "
                                     "of one suite in common"}
    found: list[dict[str, Any]] = []
    for suite in common[:COMPARED_SUITES]:
        try:
            result = registry.compare(store, agent.name, "previous", "current", suite)
        except AssayError as error:  # a report that cannot be read: said, not a 500
            found.append({"suite": suite, "error": str(error)})
            continue
        data = result.to_json()
        found.append({"suite": suite, "verdict": data["verdict"], "totals": data["totals"],
                      "base": data["base"]["run_id"], "cand": data["cand"]["run_id"],
                      "changes": {change: sum(1 for r in data["rows"] if r["change"] == change)
                                  for change in ("regressed", "fixed", "added", "removed")}})
    return {"suites": found, "why": None, "more": max(0, len(common) - COMPARED_SUITES)}


@router.get("/agents/{name}/comparison")
@router.get("/api/agents/{name}/comparison")
def agent_comparison(request: Request, name: str, a: str = "previous", b: str = "current",
                     suite: str | None = None, cost_tolerance: float = 0.25) -> Response:
    """Two versions of the agent, each by its newest battery: ``assay compare --agent``."""
    from ..errors import UsageError

    store = request.app.state.bench.open()
    registry = _Registry(store)
    registry.agent(name)
    try:
        result = registry.compare(store, name, a, b, suite or None, cost_tolerance)
    except UsageError as error:  # an unknown or ambiguous version, no battery: named, 400
        raise BadRequest(str(error)) from None
    return respond(request, "compare.html", result.to_json())

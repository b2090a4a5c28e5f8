"""Compare and trends: two runs side by side (SPEC §8), a suite's pass rates over time.

``/compare?base=…&cand=…`` is ``assay compare`` on the page: its JSON twin
is the ``assay.compare/1`` document, made by the same ``analysis.compare``
from the same stored reports, so the page, the twin and the command cannot
disagree. Without both runs it is a form that suggests recent sealed runs.

``/trends?suite=…`` draws each sealed run's pass rate with its Wilson
interval, public, hidden and synthetic apart (never blended), grouped by
agent version, from the ``runs`` rows and their ``listing`` counts (no
report is read for a point); and what ``assay drift`` would say of each
recent version's newest two batteries. docs/decisions/0045-compare-and-trends.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from .render import BadRequest, NotFound, respond
from .stored import run_row

if TYPE_CHECKING:
    from ..analysis.run_facts import RunFacts
    from ..store.database import Store
    from ..store.runs.listing import ListedRun

router = APIRouter()

#: Recent sealed runs the compare form suggests.
CHOICES = 50
#: Runs on one page of trends (the newest; older ones a page further): a hundred
#: slots leave each whisker room to be seen on a chart 700 units wide.
TREND_SIZE = 100
#: Agent versions whose drift the trends page says (each reads two reports).
DRIFT_SHOWN = 3
#: The splits a run is scored on, each drawn apart (SPEC §5, PRINCIPLES 4).
SPLITS = ("public", "hidden", "synthetic")
#: Colours a chart cycles through (``static/compare.css``: ``.s0`` … ``.s7``).
SERIES = 8
ROW_VIEWS = ("all", "changes", "flips")


@router.get("/compare")
@router.get("/api/compare")
def compare_page(request: Request, base: str | None = None, cand: str | None = None,
                 cost_tolerance: float = 0.25, rows: str = "all") -> Response:
    """Two runs compared as ``assay compare`` does; with fewer than two, the form to pick them."""
    from ..analysis.compare import compare
    from ..errors import UsageError

    if rows not in ROW_VIEWS:
        raise BadRequest("rows is all, changes or flips")
    base, cand = (base or "").strip(), (cand or "").strip()
    store = request.app.state.bench.open()
    if not (base and cand):
        return respond(request, "compare_form.html", _form(store, base, cand))
    for run_id in (base, cand):
        run_row(store, run_id)  # an unknown run is a 404 that names it
    try:
        result = compare(_facts(store, base), _facts(store, cand), cost_tolerance)
    except UsageError as error:  # not sealed, two suites, a bad tolerance: named, 400
        raise BadRequest(str(error)) from None
    return respond(request, "compare.html", result.to_json())


def _facts(store: Store, run_id: str) -> RunFacts:
    from ..analysis.run_facts import load_stored

    return load_stored(store, run_id)


def _form(store: Store, base: str, cand: str) -> dict[str, Any]:
    """The form's data: the runs given so far, and recent sealed runs to pick from.

    Given one run, the choices are its suite's (compare refuses two suites)
    and the other side is suggested: the newest sealed run of the suite that
    started before the candidate (or after the base).
    """
    from ..store.runs.listing import RunFilter, list_runs

    given = {side: run_row(store, run_id) for side, run_id in (("base", base), ("cand", cand))
             if run_id}
    suite = next((row.suite_id for row in given.values()), None)
    choices, total = list_runs(store, RunFilter(suite=suite, status="sealed"), limit=CHOICES)
    if "cand" in given and not base:
        base = _before(choices, given["cand"])
    elif "base" in given and not cand:
        cand = _after(choices, given["base"])
    return {"base": base, "cand": cand, "suite": suite,
            "choices": [row.as_json() for row in choices], "total": total}


def _before(choices: list[ListedRun], run: ListedRun) -> str:
    """The newest choice that started before ``run`` (choices are newest first)."""
    mark = (run.started_at, run.run_id)
    return next((row.run_id for row in choices if (row.started_at, row.run_id) < mark), "")


def _after(choices: list[ListedRun], run: ListedRun) -> str:
    """The oldest choice that started after ``run``."""
    mark = (run.started_at, run.run_id)
    later = [row.run_id for row in choices if (row.started_at, row.run_id) > mark]
    return later[-1] if later else ""


@router.get("/trends")
@router.get("/api/trends")
def trends_page(request: Request, suite: str | None = None, target: str | None = None,
                version: str | None = None, page: int = Query(1, ge=1)) -> Response:
    """A suite's sealed runs, oldest to newest, as pass rates with intervals; drift per version."""
    from ..store.runs.listing import RunFilter, list_runs, suite_ids

    store = request.app.state.bench.open()
    suites = suite_ids(store)
    filters = {"suite": suite or "", "target": target or "", "version": version or ""}
    data: dict[str, Any] = {"filters": filters, "suites": suites, "points": [],
                            "versions": [], "charts": {}, "drift": [], "drift_versions": 0,
                            "total": 0, "page": page, "pages": 1}
    if not suite:
        return respond(request, "trends.html", data)
    if suite not in suites:
        raise NotFound(f"no run of suite {suite} in this store")
    wanted = RunFilter(suite=suite, target=target or None, version=version or None,
                       status="sealed")
    rows, total = list_runs(store, wanted, limit=TREND_SIZE, offset=(page - 1) * TREND_SIZE)
    points = [_point(row) for row in reversed(rows)]  # oldest first, left to right
    series: dict[str, int] = {}
    for point in points:
        series.setdefault(point["version"], len(series) % SERIES)
    from .chart import trend_chart

    data.update(
        points=points, total=total, pages=max(1, -(-total // TREND_SIZE)),
        versions=_versions(points, series),
        charts={split: chart for split in SPLITS
                if (chart := trend_chart(points, split, series)) is not None})
    data["drift"], data["drift_versions"] = _drift(store, suite, target, version)
    return respond(request, "trends.html", data)


def _point(row: ListedRun) -> dict[str, Any]:
    """One run as a point: per split its passed cases of all, the rate and its Wilson interval."""
    from ..grading.stats import wilson

    counts = row.listing.get("counts") or {}
    point: dict[str, Any] = {"run_id": row.run_id, "started_at": row.started_at,
                             "version": row.target_digest, "target": row.target_uri,
                             "model": row.model, "interrupted": bool(row.interrupted),
                             "pass_mark": row.pass_mark}
    for split in SPLITS:
        numbers = counts.get(split) or {}
        total, passed = int(numbers.get("total") or 0), int(numbers.get("passed") or 0)
        if total <= 0 or not 0 <= passed <= total:
            point[split] = None
            continue
        low, high = wilson(passed, total)
        point[split] = {"passed": passed, "total": total, "rate": passed / total,
                        "low": low, "high": high}
    return point


def _versions(points: list[dict[str, Any]], series: dict[str, int]) -> list[dict[str, Any]]:
    """The agent versions drawn, oldest first: digest, target, model, colour, runs."""
    found: dict[str, dict[str, Any]] = {}
    for point in points:
        entry = found.setdefault(point["version"], {
            "version": point["version"], "target": point["target"], "model": point["model"],
            "series": series[point["version"]], "runs": 0})
        entry["runs"] += 1
        entry["target"], entry["model"] = point["target"], point["model"]  # the newest's
    return list(found.values())


def _drift(store: Store, suite: str, target: str | None,
           version: str | None) -> tuple[list[dict[str, Any]], int]:
    """``assay.drift/1`` of the newest versions with two batteries, and how many have two."""
    from ..analysis.drift import drift
    from ..store.runs.batteries import newest_pairs

    pairs = newest_pairs(store, suite, target=target or None, version=version or None)
    notices = [drift(_facts(store, pair.base), _facts(store, pair.cand)).to_json()
               for pair in pairs[:DRIFT_SHOWN]]
    return notices, len(pairs)

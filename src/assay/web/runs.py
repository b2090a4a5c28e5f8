"""Runs: the list (filters, pages) and one run (scores, counts, cost, cases, seal).

A run's public and hidden scores stand side by side and are never blended
into one figure here; the overall score a report computes is left to the
report. An open run shows its progress (``live``) instead of its cases.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from .render import BadRequest, respond
from .stored import redacted_report, run_row

router = APIRouter()

PAGE_SIZE = 50


@router.get("/")
def home() -> Response:
    """The workbench opens on its runs."""
    return RedirectResponse("/runs", status_code=303)


@router.get("/runs")
@router.get("/api/runs")
def runs_page(request: Request, suite: str | None = None, target: str | None = None,
              version: str | None = None, status: str | None = None,
              result: str | None = None, page: int = Query(1, ge=1)) -> Response:
    """Every stored run, newest first, fifty to a page, with the filters kept in links."""
    from ..store.runs.listing import RunFilter, list_runs, suite_ids

    if status not in (None, "", "open", "sealed"):
        raise BadRequest("status is open or sealed")
    if result not in (None, "", "passed", "not-passed"):
        raise BadRequest("result is passed or not-passed")
    wanted = RunFilter(suite=suite or None, target=target or None, version=version or None,
                       status=status or None, result=result or None)
    store = request.app.state.bench.open()
    rows, total = list_runs(store, wanted, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    data = {
        "runs": [row.as_json() for row in rows],
        "total": total, "page": page, "pages": max(1, -(-total // PAGE_SIZE)),
        "filters": {"suite": suite or "", "target": target or "", "version": version or "",
                    "status": status or "", "result": result or ""},
        "suites": suite_ids(store),
    }
    return respond(request, "runs.html", data)


@router.get("/runs/{run_id}")
@router.get("/api/runs/{run_id}")
def run_page(request: Request, run_id: str) -> Response:
    """One run: its row, and once sealed its cases with their trials' outcomes."""
    store = request.app.state.bench.open()
    row = run_row(store, run_id)
    report = redacted_report(store, run_id)
    data: dict[str, Any] = {"run": row.as_json(), "cases": [], "reliability": {}}
    if report is not None:
        data["cases"] = [_case(index, case) for index, case in enumerate(report.cases, 1)]
        data["reliability"] = {split: value.model_dump(mode="json")
                               for split, value in report.reliability.items()}
        data["trials_per_case"] = report.trials_per_case
        data["cost"] = report.cost.model_dump(mode="json", exclude={"evidence"})
    return respond(request, "run.html", data)


@router.get("/runs/{run_id}/report.json")
def report_download(request: Request, run_id: str) -> Response:
    """The run's JSON report (schema assay.report/1), redacted as every report is."""
    from fastapi.responses import JSONResponse

    from ..reports.json_report import as_json

    store = request.app.state.bench.open()
    report = redacted_report(store, run_id)
    if report is None:
        run_row(store, run_id)  # no such run: 404
        raise BadRequest(f"run {run_id} is not sealed: it has no report yet")
    return JSONResponse(as_json(report), headers={
        "content-disposition": f'attachment; filename="{run_id}.json"'})


def _case(index: int, case: Any) -> dict[str, Any]:
    """A case as the run page lists it; a holdout is its label and outcome, nothing else."""
    if case.split == "hidden":
        return {"index": index, "label": case.id, "split": "hidden", "outcome": case.outcome}
    return {
        "index": index, "label": case.id, "split": case.split, "outcome": case.outcome,
        "reason": case.reason, "pass_hat_k": case.pass_hat_k, "k": case.k,
        "tags": list(case.tags), "synthetic": case.synthetic,
        "trials": [{"n": t.n, "outcome": t.outcome, "duration_s": t.duration_s,
                    "cost_usd": t.usage.cost_usd} for t in case.trials],
    }

"""Runs from the page and runs as they go: the suites to start, a run's live progress, cancel.

- ``/suites``: the suites found under the server's paths, each with a form
  that starts it; a file that does not load shows its error (file, line;
  a hidden case's in the safe wording ``suites.build.Problem`` gives).
- ``POST /suites/start``: ``assay run`` in a child process (``children``),
  then to the run's page as soon as the run is registered — or the reason
  it did not start, in the words ``assay run`` gave.
- ``/runs/{id}/events``: server-sent events for any open run, whoever
  started it, read from the store (``store.runs.progress``) every tenth of a
  second and sent only when something changed: a server-rendered progress
  fragment on the page (htmx's SSE extension swaps it), JSON under
  ``/api/``; then ``sealed`` (the page reloads the run) and ``end``.
- ``POST /runs/{id}/cancel``: Ctrl-C to the child that runs it; the run is
  sealed as interrupted with what finished. A run started elsewhere is
  stopped where it runs (409, saying where).

Counts and outcomes only: nothing here reads a case, so no event, fragment
or answer can carry a hidden one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.responses import RedirectResponse, Response

from .render import BadRequest, NotFound, fragment, is_api, path_part, respond

if TYPE_CHECKING:
    from ..store.runs.progress import RunProgress
    from .bench import Workbench
    from .children import Child, Children

router = APIRouter()

#: How often an open run's progress is read from the store (seconds).
POLL_S = 0.1
#: At most this share of the time goes to reading one run's progress: a run so large
#: that counting it takes longer is read less often.
POLL_SHARE = 0.1
#: How long starting a run waits for it to be registered before answering "still starting".
START_WAIT_S = 60.0
#: How long a cancel waits for the run to be sealed before showing the page.
CANCEL_WAIT_S = 15.0
#: The most trials per case the start form accepts (``--trials``).
MAX_TRIALS = 10_000

_children_lock = threading.Lock()


def children(bench: Workbench) -> Children:
    """The runs this server started (``Workbench.live``), made on first use."""
    from .children import Children

    with _children_lock:
        if bench.live is None:
            bench.live = Children(bench)
        live: Children = bench.live
        return live


# -- suites ---------------------------------------------------------------------------------

@router.get("/suites")
@router.get("/api/suites")
def suites_page(request: Request) -> Response:
    """The suites found under the server's paths, each startable; the files that did not load."""
    from ..suites import survey
    from ..suites.loader import hidden_fallback

    bench: Workbench = request.app.state.bench
    found = survey(_roots(bench), _hidden_root(bench))
    data = {
        "paths": [str(path) for path in (bench.paths or (Path("evals"),))],
        "suites": [{**_suite(item, bench),
                    "note": hidden_fallback(item) if item.hidden_missing is not None else None}
                   for item in found.suites],
        "problems": [{"file": _shown_path(Path(error.file or ""), bench), "line": error.line,
                      "message": error.message} for error in found.problems],
        "started": [_child(child) for child in children(bench).children()[:20]],
    }
    return respond(request, "suites.html", data)


@router.post("/suites/start")
@router.post("/api/suites/start")
def start_run(request: Request, suite: str = Form(...), target: str = Form(""),
              trials: str = Form("")) -> Response:
    """Start ``assay run`` of a discovered suite; the run's page once it is registered."""
    from ..suites import survey
    from .children import StartRequest

    bench: Workbench = request.app.state.bench
    count = _trials(trials)
    target = target.strip()
    if "\n" in target or "\r" in target or len(target) > 4096:
        raise BadRequest("target is one URI, on one line")
    found = survey(_roots(bench), _hidden_root(bench))
    item = next((s for s in found.suites if s.suite.id == suite), None)
    if item is None:
        raise NotFound(f"no suite {suite} under {', '.join(str(p) for p in _roots(bench))} "
                       "(or its file did not load: see Suites)")
    if not target and not item.suite.target:
        raise BadRequest(f"suite {suite} names no target: give one")
    try:
        child = children(bench).start(StartRequest(suite, item.path, target or None, count))
    except RuntimeError as stopping:
        return respond(request, "error.html", {"error": str(stopping), "status": 503}, 503)
    child.settled.wait(START_WAIT_S)
    if child.run_id is not None:
        if is_api(request):
            return respond(request, "", {"run_id": child.run_id, "run": f"/runs/{child.run_id}",
                                         "events": f"/api/runs/{child.run_id}/events"}, 201)
        return RedirectResponse(f"/runs/{path_part(child.run_id)}", status_code=303)
    data = {"suite": suite, "target": target or item.suite.target, "trials": count,
            "state": child.state}
    if child.exit_code is None:  # still starting its target: it will appear under Runs
        return respond(request, "start_failed.html", {**data, "status": 202}, 202)
    return respond(request, "start_failed.html",
                   {**data, "status": 400, "exit_code": child.exit_code,
                    "error": child.failure()}, 400)


@router.get("/suites/start")
def start_form() -> Response:
    """Starting is a POST from the suites page; a GET (a link followed, a reload) goes there."""
    return RedirectResponse("/suites", status_code=303)


# -- progress -------------------------------------------------------------------------------

def _known_run(request: Request, run_id: str) -> str:
    """The run id, when the store has it; else a 404 before any event is sent."""
    from ..store.runs.progress import run_progress

    if run_progress(request.app.state.bench.open(), run_id) is None:
        raise NotFound(f"no run {run_id} in this store")
    return run_id


@router.get("/runs/{run_id}/progress")
@router.get("/api/runs/{run_id}/progress")
def progress_page(request: Request, run_id: str) -> Response:
    """The run's progress now: what each event gives, once."""
    from ..store.runs.progress import run_progress

    bench: Workbench = request.app.state.bench
    child = children(bench).started(run_id)
    ended = child is not None and child.ended.is_set()
    reading = run_progress(bench.open(), run_id)
    if reading is None:
        raise NotFound(f"no run {run_id} in this store")
    return respond(request, "progress.html", _progress(reading, child, ended))


@router.get("/runs/{run_id}/events", response_class=EventSourceResponse)
@router.get("/api/runs/{run_id}/events", response_class=EventSourceResponse)
async def run_events(request: Request,
                     run_id: str = Depends(_known_run)) -> AsyncIterator[ServerSentEvent]:
    """The run's progress as server-sent events, each when something changed; then its end.

    Events: ``progress`` (the fragment on the page, the numbers as JSON under
    ``/api/``), ``control`` (on the page only: its cancel button, or where to
    stop a run started elsewhere), ``sealed`` once the run is sealed, and
    ``end`` last — also when the process that ran it ended without sealing it.
    """
    import anyio

    from ..store.runs.progress import run_progress

    bench: Workbench = request.app.state.bench
    store = bench.open()
    api = is_api(request)
    live = children(bench)
    shown: tuple[Any, ...] | None = None
    control: str | None = None
    while not live.closing.is_set():  # the server stops: so does the stream
        child = live.started(run_id)
        # Looked at before the store: a child that ended had sealed (or not) by then.
        ended = child is not None and child.ended.is_set()
        began = time.monotonic()
        reading = await anyio.to_thread.run_sync(run_progress, store, run_id)
        cost = time.monotonic() - began
        if reading is None:  # erased meanwhile
            yield ServerSentEvent(event="end", data={"run_id": run_id})
            return
        data = _progress(reading, child, ended)
        now_shown = (tuple(sorted(reading.counts.items())), data["state"])
        if now_shown != shown:
            shown = now_shown
            yield _event("progress", "_live_progress.html", data, api)
        now_control = data["state"] + str(data["started_here"])
        if now_control != control and not api:  # the page's button: the twin has the fields
            control = now_control
            yield _event("control", "_live_control.html", data, api)
        if data["state"] not in ("running", "stopping"):
            if reading.status == "sealed":
                yield ServerSentEvent(event="sealed", data={
                    "run_id": run_id, "interrupted": bool(reading.interrupted)})
            yield ServerSentEvent(event="end", data={"run_id": run_id, "state": data["state"]})
            return
        await asyncio.sleep(max(POLL_S, cost / POLL_SHARE))


def _event(name: str, template: str, data: dict[str, Any], api: bool) -> ServerSentEvent:
    if api:
        return ServerSentEvent(event=name, data=data)
    return ServerSentEvent(event=name, raw_data=fragment(template, page=data))


def _progress(reading: RunProgress, child: Child | None, ended: bool) -> dict[str, Any]:
    """One reading as the page and the twin give it: counts, pace, state, who can stop it."""
    from ..analysis.progress import elapsed, pace

    counts = reading.counts
    until = datetime.now(UTC)
    if reading.finished_at:
        until = datetime.fromisoformat(reading.finished_at.replace("Z", "+00:00"))
    seconds = elapsed(reading.started_at, until)
    figures = pace(reading.done, reading.planned, seconds)
    if reading.status == "sealed":
        state = "interrupted" if reading.interrupted else "sealed"
    elif ended:
        state = "ended"  # its process exited without sealing it: resumable
    elif child is not None and child.stopping:
        state = "stopping"
    else:
        state = "running"
    return {
        "run_id": reading.run_id, "status": reading.status, "state": state,
        "done": reading.done, "planned": reading.planned,
        "passed": counts.get("pass", 0), "failed": counts.get("fail", 0),
        "inconclusive": counts.get("inconclusive", 0), "broken": counts.get("broken", 0),
        "rate": figures.rate, "eta_s": figures.eta_s if state == "running" else None,
        "elapsed_s": seconds, "started_at": reading.started_at,
        "finished_at": reading.finished_at,
        "started_here": child is not None,
        "exit_code": child.exit_code if child is not None and ended else None,
    }


# -- cancel ---------------------------------------------------------------------------------

@router.post("/runs/{run_id}/cancel")
@router.post("/api/runs/{run_id}/cancel")
def cancel_run(request: Request, run_id: str) -> Response:
    """Stop a run this server started: Ctrl-C to its ``assay run``, which seals what finished."""
    from ..store.runs.progress import run_progress

    bench: Workbench = request.app.state.bench
    store = bench.open()
    reading = run_progress(store, run_id)
    if reading is None:
        raise NotFound(f"no run {run_id} in this store")
    live = children(bench)
    child = live.started(run_id)
    if reading.status != "open":
        return _refused(request, f"run {run_id} is sealed already: there is nothing to stop")
    if child is None:
        return _refused(request, (
            f"run {run_id} was not started from this workbench: stop it where it runs "
            "(Ctrl-C in the terminal of its assay run, which seals what finished; or its "
            f"queue worker). A run whose process is gone stays open: assay run --resume "
            f"{run_id} finishes it."))
    if child.ended.is_set():
        return _refused(request, (
            f"the assay run of run {run_id} ended without sealing it (exit "
            f"{child.exit_code}): assay run --resume {run_id} finishes it"))
    live.cancel(child)
    child.ended.wait(CANCEL_WAIT_S)
    if is_api(request):
        after = run_progress(store, run_id) or reading
        return respond(request, "", _progress(after, child, child.ended.is_set()))
    return RedirectResponse(f"/runs/{path_part(run_id)}", status_code=303)


@router.get("/runs/{run_id}/cancel")
def cancel_form(run_id: str) -> Response:
    """Cancelling is a POST from the run's page; a GET goes to that page."""
    return RedirectResponse(f"/runs/{path_part(run_id)}", status_code=303)


def _refused(request: Request, text: str) -> Response:
    return respond(request, "error.html", {"error": text, "status": 409}, 409)


# -- helpers --------------------------------------------------------------------------------

def _roots(bench: Workbench) -> list[Path]:
    """Where suites are found: the server's paths (default evals/), from its working folder."""
    return [Path(bench.workdir, path) for path in (bench.paths or (Path("evals"),))]


def _hidden_root(bench: Workbench) -> Path | None:
    return None if bench.hidden_dir is None else Path(bench.workdir, bench.hidden_dir)


def _shown_path(path: Path, bench: Workbench) -> str:
    """A file as the user named it: relative to the working folder when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path(bench.workdir).resolve()))
    except ValueError:
        return str(path)


def _suite(item: Any, bench: Workbench) -> dict[str, Any]:
    """A suite as the page lists it: hidden cases as a count, nothing of them more."""
    suite = item.suite
    return {
        "id": suite.id, "title": suite.title, "file": _shown_path(item.path, bench),
        "target": suite.target, "trials": suite.trials, "pass_mark": suite.pass_mark,
        "public_cases": len(suite.public_cases()), "hidden_cases": len(suite.hidden_cases()),
        "hidden_source": item.hidden_source,
    }


def _child(child: Child) -> dict[str, Any]:
    request = child.request
    return {"suite": request.suite_id, "target": request.target, "trials": request.trials,
            "run_id": child.run_id, "state": child.state, "exit_code": child.exit_code}


def _trials(text: str) -> int | None:
    """The form's trials: empty (the suite's own) or a whole number from 1 to ``MAX_TRIALS``."""
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_TRIALS:
        raise BadRequest(f"trials is a whole number from 1 to {MAX_TRIALS:,}")
    return int(text)

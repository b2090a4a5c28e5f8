"""Review: the annotation queue in the browser, with the verdicts ``assay review`` takes.

The queue lists items oldest first, fifty to a page, as ``assay review
--export`` gives them (``review.queue.shown``: one JSON shape for both). An
item's page shows what the review screen shows (``review.detail.view``):
its label, run, trial, outcome and reason, and for a public case the trace
and verdicts. A hidden case's item is ``holdout-N`` and nothing else: the
web never reveals it (SPEC §11), so ``view`` is always asked with
``reveal=False`` and hands back a ``Withheld`` that holds no evidence to leak.

A decision is a form POST (verdict, note, reviewer) that
``store.reviews.items.decide`` seals as a ``review`` ledger entry; the browser
then goes on to the next open item (303). An item someone decided in the
meantime is not overwritten: the page says who decided it and how (409).
The reviewer's name is kept in a cookie for the next item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import RedirectResponse, Response

from .render import BadRequest, NotFound, is_api, respond

if TYPE_CHECKING:
    from ..store.database import Store
    from ..store.reviews.items import StoredItem

router = APIRouter()

PAGE_SIZE = 50
#: Which items the queue lists: ``show=`` → ``list_items(decided=…)``.
SHOWS: dict[str, bool | None] = {"open": False, "decided": True, "all": None}
#: The cookie that remembers the reviewer's name for the next item (percent-encoded).
REVIEWER_COOKIE = "assay_reviewer"
#: The longest reviewer name the store keeps (``review_items.reviewer``).
REVIEWER_CHARS = 200
#: A stored value longer than this is cut on the page, saying how much was left out.
LIMIT = 20_000


@router.get("/review")
@router.get("/api/review")
def queue_page(request: Request, show: str = "open",
               page: int = Query(1, ge=1)) -> Response:
    """The queue, oldest first, fifty to a page: open items, decided ones, or all."""
    from ..review.queue import shown
    from ..store.reviews.items import count_items, list_items

    if show not in SHOWS:
        raise BadRequest(f"show is {', '.join(SHOWS)}")
    store = request.app.state.bench.open()
    decided = SHOWS[show]
    total = count_items(store, decided=decided)
    rows = list_items(store, decided=decided, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    data = {
        "show": show,
        "items": [shown(row).to_json() for row in rows],
        "total": total, "page": page, "pages": max(1, -(-total // PAGE_SIZE)),
        "open": total if decided is False else count_items(store, decided=False),
    }
    return respond(request, "review.html", data)


@router.get("/review/{item}")
@router.get("/api/review/{item}")
def item_page(request: Request, item: int) -> Response:
    """One item: what it is, its evidence (public cases only), its decision or the form."""
    store = request.app.state.bench.open()
    data = _item_data(store, _load(store, item), reviewer=_reviewer_cookie(request))
    return respond(request, "review_item.html", data)


@router.post("/review/{item}")
@router.post("/api/review/{item}")
def decide_item(request: Request, item: int, verdict: str = Form(""), note: str = Form(""),
                reviewer: str = Form("")) -> Response:
    """Take the decision on one item; then the next open item (the page) or the decision (JSON)."""
    from ..review.queue import VERDICTS, shown
    from ..store.reviews.items import AlreadyDecided, NoSuchItem, decide, next_open

    store = request.app.state.bench.open()
    row = _load(store, item)
    reviewer = reviewer.strip()
    problem = None
    if verdict not in VERDICTS:
        problem = f"verdict: choose {', '.join(VERDICTS[:-1])} or {VERDICTS[-1]}"
    elif not reviewer:
        problem = "reviewer: give your name (who takes this decision)"
    elif len(reviewer) > REVIEWER_CHARS:
        problem = f"reviewer: a name of at most {REVIEWER_CHARS} characters"
    if problem is not None:
        return _refused(request, store, row, problem, 400,
                        {"verdict": verdict, "note": note, "reviewer": reviewer})
    try:
        decided = decide(store, item, verdict, note, reviewer)
    except NoSuchItem:
        raise NotFound(f"no review item {item} in this store") from None
    except AlreadyDecided as taken:
        before = taken.row
        return _refused(request, store, before,
                        f"item {item} was decided already: {before.verdict} by "
                        f"{before.reviewer} at {before.decided_at}; nothing was changed", 409,
                        {"verdict": verdict, "note": note, "reviewer": reviewer})
    following = next_open(store, decided)
    if is_api(request):
        from fastapi.responses import JSONResponse

        return JSONResponse({"item": shown(decided).to_json(), "entry": decided.entry,
                             "next": None if following is None else following.id})
    target = "/review" if following is None else f"/review/{following.id}"
    answer = RedirectResponse(target, status_code=303)
    answer.set_cookie(REVIEWER_COOKIE, quote(reviewer, safe=""), max_age=365 * 24 * 3600,
                      path="/review", httponly=True, samesite="strict")
    return answer


def _load(store: Store, item: int) -> StoredItem:
    from ..store.reviews.items import NoSuchItem, load_item

    try:
        return load_item(store, item)
    except NoSuchItem:
        raise NotFound(f"no review item {item} in this store") from None


def _reviewer_cookie(request: Request) -> str:
    return unquote(request.cookies.get(REVIEWER_COOKIE, ""))[:REVIEWER_CHARS]


def _refused(request: Request, store: Store, row: StoredItem, problem: str, status: int,
             form: dict[str, str]) -> Response:
    """A decision not taken: the item's page again, saying why, with what was typed kept."""
    if is_api(request):
        from fastapi.responses import JSONResponse

        return JSONResponse({"error": problem, "status": status}, status_code=status)
    data = _item_data(store, row, reviewer=form["reviewer"])
    data["form"] = form
    data["error"] = problem
    return respond(request, "review_item.html", data, status)


def _item_data(store: Store, row: StoredItem, *, reviewer: str) -> dict[str, Any]:
    """What an item's page and its twin show; a hidden item's evidence is never read."""
    from ..review.detail import Whole, view
    from ..review.queue import VERDICTS
    from ..store.reviews.items import count_items, next_open

    seen = view(store, row, reveal=False)  # the web never reveals a hidden case
    following = next_open(store, row)
    data: dict[str, Any] = {
        "item": seen.item.to_json(), "entry": row.entry,
        "withheld": not isinstance(seen, Whole),
        "trace": None, "verdicts": [],
        "next": None if following is None else following.id,
        "open": count_items(store, decided=False),
        "choices": list(VERDICTS),
        "form": {"verdict": "", "note": "", "reviewer": reviewer},
        "error": None,
    }
    if isinstance(seen, Whole):
        data["trace"] = _trace(seen.evidence.trace)
        data["verdicts"] = [_verdict(v) for v in seen.evidence.verdicts]
    return data


def _trace(stored: bytes | None) -> dict[str, Any] | None:
    """A trace as the page reads it: its summary, its events in order, its output as text."""
    from pydantic import ValidationError

    from ..model import Trace

    if stored is None:
        return None
    try:
        trace = Trace.model_validate_json(stored)
    except ValidationError:  # not a trace this version reads: the stored JSON as it is
        return {"unread": _text(stored.decode("utf-8", "replace"))}
    return {
        "status": trace.status, "duration_s": trace.duration_s, "steps": trace.steps,
        "tokens": trace.usage.tokens, "cost_usd": trace.usage.cost_usd,
        "partial": trace.partial, "error": None if trace.error is None else _text(trace.error),
        "events": [{"kind": e.kind, "name": e.name, "is_error": e.is_error, "turn": e.turn,
                    "text": None if e.text is None else _text(e.text),
                    "value": _value(e.arguments if e.kind in ("tool_call", "message")
                                    else e.result)}
                   for e in trace.events
                   if e.kind != "message" or e.text is not None or e.arguments is not None],
        "output": _value(trace.output),
        "stdout": _text(trace.stdout) if trace.stdout else None,
    }


def _verdict(row: dict[str, Any]) -> dict[str, Any]:
    return {"position": row.get("position"), "check": row.get("check"),
            "family": row.get("family"), "outcome": row.get("outcome"),
            "evidence": row.get("evidence"), "assertion": _text(str(row.get("assertion") or "")),
            "note": None if row.get("note") is None else _text(str(row["note"])),
            "provenance": row.get("provenance"), "threshold": row.get("threshold"),
            "score": row.get("score")}


def _value(value: Any) -> str | None:
    """A JSON value for reading, as the trial page shows it (``render.recorded``), cut."""
    from .render import recorded

    return None if value is None else _text(recorded(value))


def _text(text: str) -> str:
    """Recorded text as the trial page shows it (control characters visible), cut at LIMIT."""
    from ..reports.safe import inert

    text = inert(text)
    if len(text) <= LIMIT:
        return text
    return f"{text[:LIMIT]}… ({len(text) - LIMIT} more characters not shown)"

"""One answer, two forms: a page renders the dict its JSON twin gives.

Every page function builds plain data once; ``respond`` gives it as JSON
under ``/api/`` and through the page's template elsewhere, so the page and
its twin cannot disagree. Templates autoescape everything (always, not by
file name), so agent output, tool arguments and judge answers reach the
browser as text; nothing a run recorded is ever marked safe.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from jinja2 import Environment
    from starlette.responses import Response


class NotFound(LookupError):
    """What a page was asked for is not in the store: a 404 that names it."""


class BadRequest(ValueError):
    """A page's parameters cannot be served: a 400 that says why."""


def is_api(request: Request) -> bool:
    """Whether the request asked for the JSON twin."""
    return request.url.path.startswith("/api/")


def respond(request: Request, template: str, data: dict[str, Any],
            status: int = 200) -> Response:
    """``data`` as JSON under ``/api/``, else rendered by ``template`` (``data`` as ``page``)."""
    from fastapi.responses import HTMLResponse, JSONResponse

    if is_api(request):
        return JSONResponse(data, status_code=status)
    html = environment().get_template(template).render(page=data, request=request)
    return HTMLResponse(html, status_code=status)


def fragment(template: str, **values: Any) -> str:
    """A template rendered alone (a progress event's HTML), escaped like a page."""
    return environment().get_template(template).render(**values)


@cache
def environment() -> Environment:
    """The templates beside this module, autoescaped without exception."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                      autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True)
    env.filters.update(pct=pct, usd=usd, short=short, when=when, num=num, seconds=seconds,
                       recorded=recorded)
    env.globals.update(query=query, path_part=path_part)
    return env


def pct(value: Any) -> str:
    """A rate 0..1 as a percentage; ``–`` when there is none."""
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return "–"
    return f"{100 * value:.1f}%"


def usd(value: Any) -> str:
    """A cost in dollars; ``–`` when nothing was reported."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def num(value: Any) -> str:
    """A count with thousands separated; ``–`` when unknown."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3g}"


def seconds(value: Any) -> str:
    """A duration in seconds, to the millisecond below ten seconds."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:.3f} s" if value < 10 else f"{value:,.1f} s"


def recorded(value: Any) -> str:
    """A value a run recorded, for reading (then autoescaped): text as it is, the rest as JSON.

    Indented JSON for anything but a string. Control characters, and the
    bidi overrides that would make text read otherwise than it is, are shown
    as visible stand-ins (``reports.safe``; in JSON, as ``\\uXXXX`` escapes),
    as every other surface shows them.
    """
    from ..reports.safe import inert, json_text

    if value is None:
        return ""
    return inert(value) if isinstance(value, str) else json_text(value)


def short(digest: Any, size: int = 12) -> str:
    """A digest cut to its first ``size`` hex digits (``sha256:`` dropped)."""
    text = str(digest or "")
    return text.partition(":")[2][:size] if ":" in text else text[:size]


def when(stamp: Any) -> str:
    """A stored UTC stamp as date and time to the second."""
    text = str(stamp or "")
    return text.replace("T", " ")[:19] + (" UTC" if text else "")


def query(**values: Any) -> str:
    """A query string of the values that are set (a link that keeps a page's filters)."""
    return urlencode({k: v for k, v in values.items() if v not in (None, "")})


def path_part(value: Any) -> str:
    """One path segment, every reserved character escaped (a case id may hold ``/``)."""
    return quote(str(value), safe="")


def install_errors(app: FastAPI) -> None:
    """404 and 400 as a page (or JSON under ``/api/``) that says what was not found."""
    from starlette.exceptions import HTTPException

    async def not_found(request: Request, error: Exception) -> Response:
        return respond(request, "error.html", {"error": str(error), "status": 404}, 404)

    async def bad_request(request: Request, error: Exception) -> Response:
        return respond(request, "error.html", {"error": str(error), "status": 400}, 400)

    async def http_error(request: Request, error: Exception) -> Response:
        status = getattr(error, "status_code", 500)
        detail = getattr(error, "detail", "error")
        text = detail if isinstance(detail, str) else "the request's parameters are not valid"
        return respond(request, "error.html", {"error": text, "status": status}, status)

    async def invalid(request: Request, error: Exception) -> Response:
        # FastAPI's validation detail echoes the input; name only the fields.
        fields = sorted({".".join(str(p) for p in item.get("loc", ())[1:])
                         for item in getattr(error, "errors", lambda: [])()})
        text = "invalid parameter(s): " + (", ".join(fields) or "request")
        return respond(request, "error.html", {"error": text, "status": 400}, 400)

    from fastapi.exceptions import RequestValidationError

    app.add_exception_handler(NotFound, not_found)
    app.add_exception_handler(BadRequest, bad_request)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)

"""The workbench's application: its pages and its rules, over a ``Workbench`` (``bench``).

``create_app`` builds a FastAPI app over one store. Pages are plain sync
functions (FastAPI runs them on its thread pool, so a slow query never holds
the event loop that streams progress); each returns the dict its JSON twin
gives and its template renders (``render.respond``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .bench import Workbench

if TYPE_CHECKING:
    from fastapi import FastAPI


def create_app(bench: Workbench) -> FastAPI:
    """The workbench over ``bench``'s store, every page family mounted."""
    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles

    from . import agents, compare, ledger, live, review, runs, trials
    from .guard import Guard
    from .render import install_errors

    app = FastAPI(title="assay workbench", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.bench = bench
    app.mount("/static", StaticFiles(directory=Path(__file__).parent / "static"),
              name="static")
    for family in (runs, live, trials, compare, agents, review, ledger):
        app.include_router(family.router)
    install_errors(app)
    app.add_middleware(Guard, bench=bench)
    return app


__all__ = ["Workbench", "create_app"]

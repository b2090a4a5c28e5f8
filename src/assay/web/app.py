"""The workbench's application: its settings, its pages, its rules.

``create_app`` builds a FastAPI app over one store. Pages are plain sync
functions (FastAPI runs them on its thread pool, so a slow query never holds
the event loop that streams progress); each returns the dict its JSON twin
gives and its template renders (``render.respond``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..store.database import Store


@dataclass
class Workbench:
    """What ``assay serve`` was given: the store, where suites are found, who may look."""

    db: str | None = None
    #: Where the page finds suites to start (``assay serve PATHS``; default evals/).
    paths: tuple[Path, ...] = ()
    hidden_dir: Path | None = None
    #: Required of every request when set (``--token``): a bearer header or the cookie.
    token: str | None = None
    #: The host names a request may address (its ``Host`` header) without a token.
    hosts: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1"})
    #: The folder runs started from the page run in (their relative paths resolve here).
    workdir: Path = field(default_factory=Path.cwd)
    store: Store | None = None
    #: The runs this server started (``web.children.Children``), made on first start.
    live: Any = None

    def open(self) -> Store:
        """The store, opened (and migrated) on first use."""
        if self.store is None:
            from ..store.database import open_store

            self.store = open_store(self.db)
        return self.store


def create_app(bench: Workbench) -> FastAPI:
    """The workbench over ``bench``'s store, every page family mounted."""
    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles

    from . import compare, ledger, live, review, runs, trials
    from .guard import Guard
    from .render import install_errors

    app = FastAPI(title="assay workbench", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.bench = bench
    app.mount("/static", StaticFiles(directory=Path(__file__).parent / "static"),
              name="static")
    for family in (runs, live, trials, compare, review, ledger):
        app.include_router(family.router)
    install_errors(app)
    app.add_middleware(Guard, bench=bench)
    return app

"""What ``assay serve`` was given, shared by every page family: the store, where suites
are found, who may look. Its own module, below the pages and the app that mounts
them, so that each page reads it without reaching back up for the app."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

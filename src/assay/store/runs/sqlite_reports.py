"""Reading stored reports from a SQLite store without SQLAlchemy, for commands that only read.

Importing SQLAlchemy costs a quarter to nearly half a second on the machine
this was measured on: more than half of what ``assay compare`` of two
10,000-case runs otherwise takes (docs/performance.md). A command that only
reads reports from the default store does not need it. So, for a plain
SQLite file store already at the schema's head revision, the reports are
read here through the standard library's ``sqlite3``, with the very query
``Store.report_document`` makes; anything else (another database, a URL
with options, a store to create or migrate, any error) answers None and the
caller takes the ordinary path, which opens (and migrates) the store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

#: The URL prefixes of a plain SQLite file (what ``open_store`` is given or defaults to).
_PREFIXES = ("sqlite:///", "sqlite+pysqlite:///")

Document = tuple[str, str | None, dict[str, Any] | None]


def sqlite_file(url: str | None) -> Path | None:
    """The file of a plain SQLite store URL (``None``: the default store), else None."""
    if not url:
        return Path(".assay/assay.db")
    for prefix in _PREFIXES:
        if url.startswith(prefix):
            path = url[len(prefix):]
            if not path or "?" in path or path.startswith(":memory:"):
                return None
            return Path(path)
    return None


def report_documents(url: str | None, run_ids: list[str], head: str
                     ) -> dict[str, Document | None] | None:
    """Each run's ``(status, report JSON, seal)`` as ``Store.report_document`` gives it.

    A run not in the store maps to None. Returns None altogether when this
    path does not apply (not a plain SQLite file, no such file, not at
    revision ``head``, anything unexpected): the caller then opens the store.
    """
    path = sqlite_file(url)
    if path is None or not path.is_file():
        return None
    try:
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        version = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        if version != [(head,)]:
            return None
        found: dict[str, Document | None] = {}
        for run_id in run_ids:
            row = connection.execute(
                "SELECT report, status, seal_entry, seal_hash FROM runs WHERE run_id = ?",
                (run_id,)).fetchone()
            if row is None:
                found[run_id] = None
                continue
            report, status, entry, hashed = row
            if report is None:  # a large report is kept in parts (store.runs.texts)
                parts = connection.execute(
                    "SELECT body FROM run_texts WHERE run_id = ? AND kind = 'report' "
                    "ORDER BY part", (run_id,)).fetchall()
                report = "".join(part for (part,) in parts) if parts else None
            seal = None if entry is None else {"entry": int(entry), "hash": hashed}
            found[run_id] = (status, report, seal)
        return found
    except sqlite3.Error:
        return None
    finally:
        connection.close()

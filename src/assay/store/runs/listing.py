"""Runs as a list shows them: one short row each, filtered and paged in the database.

The workbench lists runs from the ``runs`` columns and the small ``listing``
document written at the seal (``records.listing_of``), never from the
reports: a store of a thousand runs answers a page of fifty in one query.
Nothing here holds a case, so nothing here can hold a hidden one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .. import schema

if TYPE_CHECKING:
    from ..database import Store


@dataclass(frozen=True)
class RunFilter:
    """What a list of runs keeps; an empty field keeps every run."""

    suite: str | None = None
    #: A part of the target's URI.
    target: str | None = None
    #: The start of the agent version's digest (``sha256:ab12…`` or ``ab12…``).
    version: str | None = None
    #: ``open`` or ``sealed``.
    status: str | None = None
    #: ``passed`` or ``not-passed`` (sealed runs only).
    result: str | None = None


@dataclass(frozen=True)
class ListedRun:
    """One run in a list: what ran, against what, how it scored, what it cost, its seal."""

    run_id: str
    suite_id: str
    target_uri: str
    target_digest: str
    model: str | None
    started_at: str
    finished_at: str | None
    status: str
    public: float | None
    hidden: float | None
    pass_mark: float
    passed: bool | None
    interrupted: bool | None
    seal_entry: int | None
    seal_hash: str | None
    window: str | None
    listing: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The row as the JSON twin gives it."""
        listing = self.listing
        return {
            "run_id": self.run_id, "suite": self.suite_id,
            "target": {"uri": self.target_uri, "version": self.target_digest,
                       "model": self.model},
            "started_at": self.started_at, "finished_at": self.finished_at,
            "status": self.status,
            "scores": {"public": self.public, "hidden": self.hidden,
                       "pass_mark": self.pass_mark, "passed": self.passed},
            "interrupted": self.interrupted,
            "evidence": listing.get("evidence"), "flags": listing.get("flags", []),
            "cost": {"usd": listing.get("cost_usd"), "judge_usd": listing.get("judge_usd"),
                     "tokens": listing.get("tokens")},
            "counts": listing.get("counts", {}),
            "window": self.window,
            "seal": None if self.seal_entry is None
            else {"entry": self.seal_entry, "hash": self.seal_hash},
        }


def _where(wanted: RunFilter) -> list[Any]:
    r = schema.runs.c
    conditions: list[Any] = []
    if wanted.suite:
        conditions.append(r.suite_id == wanted.suite)
    if wanted.target:
        conditions.append(r.target_uri.contains(wanted.target, autoescape=True))
    if wanted.version:
        digest = wanted.version if ":" in wanted.version else f"sha256:{wanted.version}"
        conditions.append(r.target_digest.startswith(digest, autoescape=True))
    if wanted.status:
        conditions.append(r.status == wanted.status)
    if wanted.result == "passed":
        conditions.append(r.passed.is_(True))
    elif wanted.result == "not-passed":
        conditions.append(sa.and_(r.status == "sealed", sa.not_(r.passed)))
    return conditions


def list_runs(store: Store, wanted: RunFilter, *, limit: int = 50,
              offset: int = 0) -> tuple[list[ListedRun], int]:
    """A page of runs, newest first, and how many runs the filter keeps in all.

    Two steps: the page's run ids and the count come from a covering index
    (``ix_runs_listed``, ``ix_runs_suite_listed``), then only those rows are read.
    """
    r = schema.runs.c
    conditions = _where(wanted)
    order = (r.started_at.desc(), r.run_id.desc())
    ids = sa.select(r.run_id).where(*conditions).order_by(*order).limit(limit).offset(offset)
    count = sa.select(sa.func.count()).select_from(schema.runs).where(*conditions)
    with store.engine.connect() as connection:
        chosen = [row[0] for row in connection.execute(ids)]
        total = int(connection.execute(count).scalar_one())
        rows = connection.execute(_row_query().where(r.run_id.in_(chosen))
                                  .order_by(*order)).all() if chosen else []
    return [_listed(row) for row in rows], total


def _row_query() -> sa.Select[Any]:
    r = schema.runs.c
    return sa.select(r.run_id, r.suite_id, r.target_uri, r.target_digest, r.target_facets,
                     r.started_at, r.finished_at, r.status, r.score_public, r.score_hidden,
                     r.pass_mark, r.passed, r.interrupted, r.seal_entry, r.seal_hash,
                     r.window_size, r.window_start, r.listing)


def listed_run(store: Store, run_id: str) -> ListedRun | None:
    """One run's row as a list shows it; None when the store has no such run."""
    query = _row_query().where(schema.runs.c.run_id == run_id)
    with store.engine.connect() as connection:
        row = connection.execute(query).first()
    return None if row is None else _listed(row)


def suite_ids(store: Store) -> list[str]:
    """Every suite id with a stored run, sorted (a filter's choices)."""
    r = schema.runs.c
    with store.engine.connect() as connection:
        return [row[0] for row in connection.execute(
            sa.select(r.suite_id).distinct().order_by(r.suite_id))]


def _listed(row: Any) -> ListedRun:
    try:
        listing = json.loads(row.listing) if row.listing else {}
    except ValueError:
        listing = {}
    facets = row.target_facets if isinstance(row.target_facets, dict) else {}
    window = None if row.window_size is None else f"{row.window_size}@{row.window_start}"
    return ListedRun(
        run_id=row.run_id, suite_id=row.suite_id, target_uri=row.target_uri,
        target_digest=row.target_digest, model=facets.get("model"),
        started_at=row.started_at, finished_at=row.finished_at, status=row.status,
        public=row.score_public, hidden=row.score_hidden, pass_mark=row.pass_mark,
        passed=None if row.passed is None else bool(row.passed),
        interrupted=None if row.interrupted is None else bool(row.interrupted),
        seal_entry=None if row.seal_entry is None else int(row.seal_entry),
        seal_hash=row.seal_hash, window=window,
        listing=listing if isinstance(listing, dict) else {})

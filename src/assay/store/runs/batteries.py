"""A suite's batteries by agent version: which versions ran two, and their newest two.

``assay drift`` compares the newest two sealed, whole batteries of one agent
version (``Store.batteries``). The workbench's trends page says the same of
every recent version at once; asking ``Store.batteries`` once per version
would be a query per version, so one query ranks every battery within its
version and keeps the newest two of the versions that have two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

from .. import schema

if TYPE_CHECKING:
    from ..database import Store


@dataclass(frozen=True)
class VersionPair:
    """One agent version's newest two batteries: what ``assay drift`` would compare."""

    target_digest: str
    #: The URI its newer battery ran against.
    target_uri: str
    #: The older battery's run id (drift's base) and the newer's (its candidate).
    base: str
    cand: str
    #: When the newer battery started: versions are listed newest first by it.
    newest: str


def newest_pairs(store: Store, suite_id: str, *, target: str | None = None,
                 version: str | None = None) -> list[VersionPair]:
    """Every version of ``suite_id`` with two sealed, whole batteries, its newest first.

    A battery is what ``Store.batteries`` lists: sealed and not interrupted,
    with or without a window; newest by ``started_at``, then run id. ``target``
    keeps versions whose batteries ran against a URI containing it, ``version``
    those whose digest starts with it (``sha256:`` optional).
    """
    r = schema.runs.c
    conditions = [r.suite_id == suite_id, r.status == "sealed",
                  sa.or_(r.interrupted.is_(None), r.interrupted == sa.false())]
    if target:
        conditions.append(r.target_uri.contains(target, autoescape=True))
    if version:
        digest = version if ":" in version else f"sha256:{version}"
        conditions.append(r.target_digest.startswith(digest, autoescape=True))
    within = sa.func.row_number().over(partition_by=r.target_digest,
                                       order_by=(r.started_at.desc(), r.run_id.desc()))
    ranked = (sa.select(r.run_id, r.target_uri, r.target_digest, r.started_at,
                        within.label("rank"),
                        sa.func.count().over(partition_by=r.target_digest).label("runs"))
              .where(*conditions).subquery())
    query = (sa.select(ranked.c.run_id, ranked.c.target_uri, ranked.c.target_digest,
                       ranked.c.started_at, ranked.c.rank)
             .where(ranked.c.rank <= 2, ranked.c.runs >= 2)
             .order_by(ranked.c.target_digest, ranked.c.rank))
    with store.engine.connect() as connection:
        rows = connection.execute(query).all()
    pairs = [VersionPair(newer.target_digest, newer.target_uri, older.run_id, newer.run_id,
                         newer.started_at)
             for newer, older in zip(rows[0::2], rows[1::2], strict=True)]
    pairs.sort(key=lambda pair: (pair.newest, pair.cand), reverse=True)
    return pairs

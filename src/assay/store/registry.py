"""The registry in the store: read ``agent`` entries and run facts, append in one transaction.

The rules are :mod:`assay.analysis.registry`'s (pure) and the three entries
are decided in :mod:`assay.analysis.agents`; this module only reads what they
need and appends what they decided (``record``). A decision and its entry share
one transaction that holds the ledger's write lock (SQLite's ``BEGIN
IMMEDIATE``; on PostgreSQL the appenders' advisory lock, taken before the
read), so no battery can be sealed, and no second publish land, between what
was read and what is appended: two publishes of one version make one entry,
and a start rests on the batteries sealed before it — the set ``audit``
later re-checks. Each append signs a tree head in the same transaction (when
the store's key is given), as a sealed run does, so a registry entry dropped
from the end is caught by ``assay ledger verify``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..canonical import canonical
from ..grading.report import outward_names
from ..model.agents import AgentEntry, BatteryFacts
from . import schema
from .database import Store, StoreError
from .ledger.chain import Entry, entry_hash
from .ledger.entries import LOCK_KEY, append_bodies
from .runs.texts import read_text

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_T = TypeVar("_T")
#: What a decision returns: the content to append (None: nothing), and its answer.
Decide = Callable[[list[AgentEntry], Connection], tuple[dict[str, Any] | None, _T]]

KIND = "agent"


def _parse(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def read_entries(connection: Connection) -> list[AgentEntry]:
    """Every ``agent`` entry, by index, with whether its content and hash still hold."""
    lg, b = schema.ledger.c, schema.blobs.c
    rows = connection.execute(
        sa.select(lg.index, lg.kind, lg.content_digest, lg.prev_hash, lg.hash, b.content)
        .outerjoin(schema.blobs, b.digest == lg.content_digest)
        .where(lg.kind == KIND).order_by(lg.index))
    entries = []
    for row in rows:
        index = int(row[0])
        raw = None if row.content is None else bytes(row.content)
        intact = (raw is not None
                  and entry_hash(index, row.kind, row.content_digest, row.prev_hash) == row.hash
                  and "sha256:" + hashlib.sha256(raw).hexdigest() == row.content_digest)
        entries.append(AgentEntry(index, _parse(raw), intact))
    return entries


def read_runs(connection: Connection, versions: Collection[str]) -> list[BatteryFacts]:
    """The facts of every run against one of ``versions``, structural breaches named.

    A breach is a verdict of the ``structural`` family whose outcome is
    ``fail``; its case is named as ``assay show`` names it (hidden cases as
    ``holdout-N``, numbered from the run's stored report), and a case the
    report does not list is not named at all.
    """
    if not versions:
        return []
    r, v = schema.runs.c, schema.verdicts.c
    rows = connection.execute(
        sa.select(r.run_id, r.suite_id, r.target_digest, r.status, r.seal_entry, r.seal_hash,
                  r.passed, r.interrupted)
        .where(r.target_digest.in_(sorted(versions))).order_by(r.run_id)).all()
    ids = [row.run_id for row in rows]
    breached: dict[str, set[str]] = {}
    if ids:
        for hit in connection.execute(
                sa.select(v.run_id, v.case_id).distinct()
                .where(v.run_id.in_(ids), v.family == "structural", v.outcome == "fail")):
            breached.setdefault(hit.run_id, set()).add(hit.case_id)
    facts = []
    for row in rows:
        names: tuple[str, ...] = ()
        if row.run_id in breached:
            names = _breach_names(connection, row.run_id, breached[row.run_id])
        facts.append(BatteryFacts(
            run_id=row.run_id, suite_id=row.suite_id, target_digest=row.target_digest,
            status=row.status, seal_entry=None if row.seal_entry is None else int(row.seal_entry),
            seal_hash=row.seal_hash, passed=None if row.passed is None else bool(row.passed),
            interrupted=None if row.interrupted is None else bool(row.interrupted),
            breaches=names))
    return facts


def _breach_names(connection: Connection, run_id: str, case_ids: set[str]) -> tuple[str, ...]:
    r = schema.runs.c
    body = read_text(connection, run_id, "report",
                     connection.scalar(sa.select(r.report).where(r.run_id == run_id)))
    order: list[tuple[str, str]] = []
    report = _parse(body.encode("utf-8") if isinstance(body, str) else None) or {}
    for case in report.get("cases") or []:
        if isinstance(case, dict) and isinstance(case.get("id"), str):
            order.append((case["id"], str(case.get("split"))))
    names = outward_names(order)
    # A breach in a case the report does not list (an open run, an edited report)
    # is counted, never quoted: its id could be a hidden case's.
    unnamed = sum(1 for case_id in case_ids if case_id not in names)
    shown = sorted(names[case_id] for case_id in case_ids if case_id in names)
    return (*shown, *(["a case its report does not list"] * unnamed))


@contextmanager
def _locked(store: Store) -> Iterator[Connection]:
    """One write transaction holding the ledger's write lock from its first read."""
    try:
        with store.engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(LOCK_KEY)))
            yield connection
    except sa.exc.SQLAlchemyError as error:
        raise StoreError(f"cannot record in the registry ({type(error).__name__})") from None


def record(store: Store, decide: Decide[_T], key: Ed25519PrivateKey | None = None
           ) -> tuple[Entry | None, _T]:
    """Read the entries, let ``decide`` choose what to append, append it and sign a head.

    All in one locked transaction (see the module doc). ``decide`` gets the
    entries and the connection (to read run facts); it returns the content of
    the ``agent`` entry to append, or None, and an answer handed back as is.
    """
    with _locked(store) as connection:
        content, answer = decide(read_entries(connection), connection)
        if content is None:
            return None, answer
        entry = append_bodies(connection, [(KIND, canonical(content))])[-1]
        if key is not None:
            from .ledger.heads import record_head

            record_head(connection, key)
    return entry, answer


def load(store: Store) -> tuple[list[AgentEntry], list[BatteryFacts]]:
    """Every ``agent`` entry, and the facts of every run against a version they name."""
    try:
        with store.engine.connect() as connection:
            entries = read_entries(connection)
            versions = {e.version for e in entries if e.version is not None}
            return entries, read_runs(connection, versions)
    except sa.exc.SQLAlchemyError as error:
        raise StoreError(f"cannot read the registry ({type(error).__name__})") from None

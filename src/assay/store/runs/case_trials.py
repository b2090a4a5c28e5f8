"""One case of one stored run, as ``assay promote`` reads it: the case as it ran, its trials.

Reads only, and nothing here is redacted: the caller (``commands/promote``)
decides whether a hidden case may be shown before any of its content leaves
this module's answer. One query for the run's row, one for the case's trial
rows with their traces: a large run's other trials are never read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...errors import UsageError
from .. import schema
from .texts import read_text

if TYPE_CHECKING:
    from ..database import Store


@dataclass(frozen=True)
class RunCases:
    """What a sealed run recorded of its cases, in report order.

    ``cases``: each case's entry in the run's stored suite (the model's JSON,
    hidden ones included), by id. ``order``: (case id, split) in report order,
    which is how ``holdout-N`` is numbered. ``facets``: each case's facets from
    the report (its ``fixture`` digest among them). ``files``: the file each
    case's assertions were read from, as the run saw it.
    """

    run_id: str
    suite_id: str
    hidden_set: str | None
    target_uri: str
    cases: dict[str, dict[str, Any]]
    order: list[tuple[str, str]]
    facets: dict[str, dict[str, str]]
    files: dict[str, list[str | None]]


@dataclass(frozen=True)
class CaseTrial:
    """One trial row of a case, with its trace's bytes (None: it broke, or was erased)."""

    n: int
    outcome: str
    reason: str | None
    trace: bytes | None
    has_trace: bool


def run_cases(store: Store, run_id: str) -> RunCases:
    """The cases a sealed run recorded; ``UsageError`` for no such run or one not sealed."""
    r = schema.runs.c
    with store.engine.connect() as connection:
        row = connection.execute(sa.select(r.suite_id, r.hidden_set, r.target_uri, r.report,
                                           r.suite).where(r.run_id == run_id)).first()
        if row is not None:
            texts = (read_text(connection, run_id, "report", row.report),
                     read_text(connection, run_id, "suite", row.suite))
    if row is None:
        raise UsageError(f"no run {run_id} in the store (assay runs lists them)")
    body, suite = texts
    if body is None:
        raise UsageError(f"run {run_id} is not sealed: it stopped part-way (resume it with "
                         f"`assay run --resume {run_id}`, then promote from it)")
    if suite is None:
        raise UsageError(f"run {run_id} was stored before runs kept their suite: its cases' "
                         "inputs are not in the store")
    report = json.loads(body)
    stored = json.loads(suite)
    cases = {case["id"]: case for case in stored["suite"].get("cases", [])}
    order = [(case["id"], case.get("split", "public")) for case in report.get("cases", [])]
    facets = {case["id"]: dict(case.get("facets") or {}) for case in report.get("cases", [])}
    return RunCases(run_id, row.suite_id, row.hidden_set, row.target_uri, cases, order, facets,
                    dict(stored.get("files") or {}))


def case_trials(store: Store, run_id: str, case_id: str) -> list[CaseTrial]:
    """The case's trials in this run, by trial number."""
    t, b = schema.trials.c, schema.blobs.c
    query = (sa.select(t.n, t.outcome, t.reason, t.trace_digest, b.content)
             .outerjoin(schema.blobs, b.digest == t.trace_digest)
             .where(t.run_id == run_id, t.case_id == case_id).order_by(t.n))
    with store.engine.connect() as connection:
        return [CaseTrial(int(x.n), x.outcome, x.reason,
                          None if x.content is None else bytes(x.content),
                          x.trace_digest is not None)
                for x in connection.execute(query)]

"""A queued run's seal: its report folded from the store, sealed as any run is.

The last chunk to finish enqueues this (``fence.seal_when_done``); the job's
``lock`` keeps two seals of one run from running at once, and a run sealed
already is left as it is. The report is folded by the same battery code as
the local executor's, from the trials the workers recorded, and sealed in one
transaction with its ``run-sealed`` entry, its review queue and a signed head.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..store import schema

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..store.database import Store


#: Cases whose recorded trials the seal reads and folds at once.
SEAL_CASES = 500


class _Registered:
    """The agent as the run registered it: the report's target, for a battery that runs nothing."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.facets: dict[str, str] = {}
        self.evidence: dict[str, Any] = {}


def seal_queued(store: Store, key: Ed25519PrivateKey | None, run_id: str,
                workers: int) -> str | None:
    """Fold and seal the queued run ``run_id`` if all its chunks are done; its id if sealed here.

    None when the run is sealed already or still has chunks to run.
    """
    from ..engine.battery import Battery, Resume
    from ..engine.clock import SystemClock, stamp
    from ..engine.record import RunRecorder
    from ..model import Evidence, TargetRef
    from ..review.queue import sealed_items
    from ..store.runs.record import LocalSink
    from .registered import battery_options, load_registered, make_panel, make_users, queue_options

    stored = store.open_run(run_id)
    if stored.status != "open" or _left(store, run_id):
        return None
    loaded, settings = load_registered(stored, workers)
    queued = queue_options(stored)
    battery = Battery(loaded, _Registered(stored.target_uri),  # type: ignore[arg-type]
                      battery_options(settings), panel=make_panel(loaded, settings),
                      users=make_users(loaded, settings),  # for its cases' user facet
                      resume=Resume(run_id=run_id, seed=stored.seed or 0,
                                    started_at=stored.started_at, done={}))
    battery.target_digest = stored.target_digest
    # Folded a few hundred cases at a time, each let go once final: the seal holds
    # what those cases recorded, not the run's.
    ids = [case.id for case in loaded.suite.cases]
    for start in range(0, len(ids), SEAL_CASES):
        battery.fold_recorded(store.load_trials(run_id, ids[start:start + SEAL_CASES],
                                                for_folding=True))
    target = TargetRef(uri=stored.target_uri, digest=stored.target_digest,
                       facets=_facets(store, run_id),
                       evidence={k: Evidence(v) for k, v in
                                 (queued.get("evidence") or {}).items()})
    report = battery.report(run_id, stored.started_at, stamp(SystemClock().now()),
                            target=target)
    recorder = RunRecorder(LocalSink(store, key))
    recorder.reopen(run_id)
    recorder.seal(report, sealed_items(report, settings.review, report.finished_at))
    return run_id


def _left(store: Store, run_id: str) -> int:
    c = schema.run_chunks.c
    with store.engine.connect() as connection:
        return int(connection.scalar(sa.select(sa.func.count()).select_from(schema.run_chunks)
                                     .where(c.run_id == run_id, c.state == "todo")) or 0)


def _facets(store: Store, run_id: str) -> dict[str, str]:
    """The target's facets: as registered, then as each worker's target saw them (chunk order)."""
    r, c = schema.runs.c, schema.run_chunks.c
    with store.engine.connect() as connection:
        registered = connection.scalar(sa.select(r.target_facets).where(r.run_id == run_id))
        seen = connection.execute(sa.select(c.facets).where(
            c.run_id == run_id, c.facets.is_not(None)).order_by(c.chunk)).scalars().all()
    facets: dict[str, str] = dict(registered or {})
    for text in seen:
        found = json.loads(text)
        if isinstance(found, dict):
            facets.update({str(k): str(v) for k, v in found.items()})
    return facets

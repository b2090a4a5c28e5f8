"""Following a queued run from the store: ``assay show RUN --follow``, ``assay run --resume RUN``.

A queued run belongs to its workers, not to the command that enqueued it:
whoever follows it reads its progress from the store until a worker seals
it. So a submitter that died is replaced by any follower, and nothing of
the battery is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine.runs import RunResult, Watcher


def follow_queued(run_id: str, db: str | None, watcher: Watcher) -> RunResult | None:
    """Follow ``run_id`` to its seal if it was queued; None if it was not (a local run)."""
    from ..engine.runs import RunResult
    from ..store.database import open_store
    from .submit import follow_to_seal, sealed_report

    store = open_store(db)
    try:
        stored = store.open_run(run_id)
        if not isinstance(stored.options.get("queue"), dict):
            return None
        result = RunResult(suite_id=stored.suite_id, target_uri=stored.target_uri,
                           run_id=run_id)
        if stored.status != "open":
            result.report = sealed_report(store, run_id)
            return result
        planned = stored.options.get("planned")
        watcher.notice(f"run {run_id} is queued: following it until a worker seals it")
        return follow_to_seal(store, run_id, stored.suite_id,
                              planned if isinstance(planned, int) else None, watcher, result)
    finally:
        store.close()

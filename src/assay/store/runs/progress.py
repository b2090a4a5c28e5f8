"""How far a run has got, as its store shows it: its trials counted by outcome.

Whoever runs a battery (``assay run`` in a terminal, the workbench's child
process, a queue worker) records its trials in batches as they finish
(``engine.record``); a reader follows the run by asking this, cheaply and
often: one short read of the run's row and one count of its trials by
outcome, answered from the ``ix_trials_outcome`` index alone. Outcomes and
counts only, never a case: nothing here can hold a hidden one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .. import schema

if TYPE_CHECKING:
    from ..database import Store

#: The outcomes a trial has (SPEC §5), in the order progress shows them.
OUTCOMES = ("pass", "fail", "inconclusive", "broken")


@dataclass(frozen=True)
class RunProgress:
    """One reading of a run: its state, how many trials it planned and how many are in."""

    run_id: str
    #: ``open`` until sealed, then ``sealed``.
    status: str
    started_at: str
    finished_at: str | None
    interrupted: bool | None
    #: The trials the run planned when it was registered; None for an adaptive run
    #: (its cases add trials as they go) and for runs registered before this was kept.
    planned: int | None
    #: Recorded trials by outcome (every outcome present, zero when none).
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> int:
        """The trials recorded so far."""
        return sum(self.counts.values())


def run_progress(store: Store, run_id: str) -> RunProgress | None:
    """The run's progress now; None when the store has no such run.

    The row and the count are read in one transaction, so a sealed run's
    counts are its final ones.
    """
    r, t = schema.runs.c, schema.trials.c
    with store.engine.connect() as connection:
        row = connection.execute(
            sa.select(r.status, r.started_at, r.finished_at, r.interrupted, r.options)
            .where(r.run_id == run_id)).first()
        if row is None:
            return None
        counted = connection.execute(
            sa.select(t.outcome, sa.func.count()).where(t.run_id == run_id)
            .group_by(t.outcome)).all()
    counts = dict.fromkeys(OUTCOMES, 0)
    for outcome, number in counted:
        counts[str(outcome)] = counts.get(str(outcome), 0) + int(number)
    return RunProgress(
        run_id=run_id, status=row.status, started_at=row.started_at,
        finished_at=row.finished_at,
        interrupted=None if row.interrupted is None else bool(row.interrupted),
        planned=_planned(row.options), counts=counts)


def _planned(options: str | None) -> int | None:
    """The ``planned`` trials a run's registration kept with its options (``engine.runs``)."""
    try:
        found: Any = json.loads(options or "{}").get("planned")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, int) and not isinstance(found, bool) else None

"""What several pages read of a stored run: its row and its report, redacted.

The report is read from its stored text (no traces): a page that shows a
run's cases needs their outcomes, not a hundred traces. It is redacted here,
once, so a page never holds a hidden case's content to leak
(``grading.redact``): hidden cases are ``holdout-N`` and nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .render import NotFound

if TYPE_CHECKING:
    from ..model import Report
    from ..store.database import Store
    from ..store.runs.listing import ListedRun


def run_row(store: Store, run_id: str) -> ListedRun:
    """The run's row as lists show it; ``NotFound`` when the store has no such run."""
    from ..store.runs.listing import listed_run

    row = listed_run(store, run_id)
    if row is None:
        raise NotFound(f"no run {run_id} in this store")
    return row


def redacted_report(store: Store, run_id: str) -> Report | None:
    """The sealed run's report with hidden cases as holdouts; None while the run is open."""
    from ..grading import redact
    from ..model import Report

    _status, body, seal = store.report_document(run_id)
    if body is None:
        return None
    report = Report.model_validate_json(body)
    report.seal = seal
    return redact(report)

"""The annotation queue: what a sealed run queues, what a decision is, how an item is shown.

Pure: the rows live in the store (``store.reviews.items``). A run queues its
failing and inconclusive trials when it is sealed (``assay run --review
failing|inconclusive|both|none``, default both); a broken trial is not
queued — it never produced an answer for a person to judge, and its reason
already says what broke. Items are served oldest first.

A hidden case's item is ``holdout-N`` (numbered as ``redact`` numbers the
run's hidden cases) and keeps no reason: the reason of a failed check may
quote the output. Shown items (``shown``) are what every surface prints;
a hidden item's case id, reason and note appear only when the operator
proved they hold the hidden set (``reveal``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Report
    from ..store.reviews.items import StoredItem

#: A decision on an item.
VERDICTS = ("approved", "rejected", "needs-fix")
#: What ``--review`` may name, and the trial outcomes each queues.
POLICIES: dict[str, frozenset[str]] = {
    "both": frozenset({"fail", "inconclusive"}),
    "failing": frozenset({"fail"}),
    "inconclusive": frozenset({"inconclusive"}),
    "none": frozenset(),
}
DEFAULT_POLICY = "both"
#: The shape of one exported line (``assay review --export``).
EXPORT_FORMAT = "assay.review-item/1"


#: The most characters of a label (the ``review_items.label`` column holds 200).
LABEL_CHARS = 200


def call_label(name: str, number: int) -> str:
    """The label of a sampled call that is no case: what was called, and which call it was."""
    label = f"{name} (call {number})"
    if len(label) > LABEL_CHARS:
        label = f"{name[:LABEL_CHARS - 20]}… (call {number})"
    return label


def outcomes_queued(policy: str) -> frozenset[str]:
    """The trial outcomes ``--review POLICY`` queues; ValueError naming the choices."""
    try:
        return POLICIES[policy]
    except KeyError:
        raise ValueError(f"--review takes {', '.join(POLICIES)}, not {policy!r}") from None


def sealed_items(report: Report, policy: str, added_at: str) -> list[dict[str, Any]]:
    """The queue rows a sealed run adds: its trials whose outcome ``policy`` queues.

    ``report`` is the full (unredacted) report. Hidden cases are labelled
    ``holdout-N`` in report order and keep no reason.
    """
    wanted = outcomes_queued(policy)
    if not wanted:
        return []
    from ..model.result import KeptCases

    cases = report.cases
    if isinstance(cases, KeptCases):  # only the cases with such a trial are read back
        hidden = 0
        items: list[dict[str, Any]] = []
        for index, split in enumerate(cases.splits()):
            hidden += split == "hidden"
            if not cases.trial_outcomes(index) & wanted:
                continue
            case = cases[index]
            label = f"holdout-{hidden}" if split == "hidden" else case.id
            items.extend(_item(report, case, label, trial, "run", added_at)
                         for trial in getattr(case, "trials", []) if trial.outcome in wanted)
        return items
    return [_item(report, case, label, trial, "run", added_at)
            for case, label in labelled(report)
            for trial in getattr(case, "trials", []) or [] if trial.outcome in wanted]


def labelled(report: Report) -> Iterator[tuple[Any, str]]:
    """Each case of the full report with its outward name (``holdout-N`` if hidden).

    One at a time: a battery's report reads its cases back as they are asked
    for (``engine.spool``), and a sealed run's queue needs only a few of them.
    """
    hidden = 0
    for case in report.cases:
        if getattr(case, "split", "public") == "hidden":
            hidden += 1
            yield case, f"holdout-{hidden}"
        else:
            yield case, case.id


def chosen_items(report: Report, case_name: str, trial: int | None,
                 added_at: str) -> list[dict[str, Any]]:
    """Rows for trials added by hand: ``case_name`` (an id or ``holdout-N``), one or all trials.

    ValueError, never quoting a hidden id, when the run has no such case or trial.
    """
    for case, label in labelled(report):
        if case_name in (case.id, label):
            trials = [t for t in getattr(case, "trials", []) or []
                      if trial is None or t.n == trial]
            if not trials:
                raise ValueError(f"run {report.run_id}: {label} has no trial {trial}"
                                 if trial is not None else
                                 f"run {report.run_id}: {label} has no trials")
            return [_item(report, case, label, t, "manual", added_at) for t in trials]
    raise ValueError(f"run {report.run_id} has no case {case_name}")


def _item(report: Report, case: Any, label: str, trial: Any, source: str,
          added_at: str) -> dict[str, Any]:
    split = getattr(case, "split", "public")
    return {"source": source, "run_id": report.run_id, "suite_id": report.suite.id,
            "case_id": case.id, "split": split, "n": trial.n, "label": label,
            "outcome": trial.outcome, "reason": None if split == "hidden" else trial.reason,
            "trace_digest": None, "added_at": added_at}


@dataclass(frozen=True)
class Shown:
    """An item as a surface may print it."""

    item: int
    source: str
    run_id: str | None
    case: str
    trial: int | None
    hidden: bool
    outcome: str | None
    reason: str | None
    added_at: str
    verdict: str | None
    note: str | None
    reviewer: str | None
    decided_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {"format": EXPORT_FORMAT, "item": self.item, "source": self.source,
                "run_id": self.run_id, "case": self.case, "trial": self.trial,
                "hidden": self.hidden, "outcome": self.outcome, "reason": self.reason,
                "added_at": self.added_at, "verdict": self.verdict, "note": self.note,
                "reviewer": self.reviewer, "decided_at": self.decided_at}


def shown(row: StoredItem, *, reveal: bool = False) -> Shown:
    """``row`` as it may be printed: a hidden item as its label, without reason or note.

    ``reveal``: the operator holds the hidden set (``--hidden-dir`` matched the
    run's), so the hidden item's case id, reason and note are theirs to see.
    """
    hidden = row.split == "hidden" and not reveal
    return Shown(
        item=row.id, source=row.source, run_id=row.run_id,
        case=row.label if hidden or row.case_id is None else row.case_id,
        trial=row.n, hidden=row.split == "hidden", outcome=row.outcome,
        reason=None if hidden else row.reason, added_at=row.added_at,
        verdict=row.verdict, note=None if hidden else row.note, reviewer=row.reviewer,
        decided_at=row.decided_at)


def export_lines(rows: Iterable[StoredItem], *,
                 reveal: Collection[str] = ()) -> Iterable[str]:
    """One JSON line per item (``EXPORT_FORMAT``), hidden items as ``shown`` makes them;
    ``reveal``: the runs whose hidden set the operator holds."""
    for row in rows:
        yield json.dumps(shown(row, reveal=row.run_id in reveal).to_json(), ensure_ascii=False,
                         sort_keys=True) + "\n"

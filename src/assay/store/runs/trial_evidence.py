"""One trial of a sealed run, found by its case's place in the report, with its evidence.

The workbench names a trial as a person sees it on a run's page: the
case's 1-based position in the run's report and the trial's number. This
module turns that into what the store holds of it: the case's and the
trial's entries in the stored report (outcome, reason, usage, verdicts), the
trace's bytes under its digest, the judges' opinions and the trial's ledger
entry. Three small queries, whatever the size of the store: the run's row,
the trial's row with its trace, the trial's opinions.

Secrets by construction: a hidden case's trial is answered as a
:class:`HiddenTrial` — its ``holdout-N`` label (numbered as
``grading.redact`` numbers them, in report order), trial number and
outcome — and its trace, verdicts and opinions are never read. Errors name
the run, the position and the label, never a hidden case's id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .. import schema
from ..database import _opinions
from .texts import read_text

if TYPE_CHECKING:
    from ..database import Store


class TrialNotFound(LookupError):
    """No such run, case position or trial number; the message names which (labels only)."""


class RunNotSealed(ValueError):
    """The run is still open (or stopped part-way): its cases have no positions yet."""


@dataclass(frozen=True)
class Step:
    """A trial beside this one in the run (for previous and next): where, and how it ended."""

    index: int
    label: str
    n: int
    outcome: str


@dataclass(frozen=True)
class RunHead:
    """What a trial's page says of its run."""

    run_id: str
    suite_id: str
    target_uri: str
    seal_entry: int | None


@dataclass(frozen=True)
class HiddenTrial:
    """A hidden case's trial as every surface may show it: label, number, outcome. No content."""

    run: RunHead
    index: int
    label: str
    #: The case's outcome over its trials (as the run's page shows it).
    case_outcome: str
    n: int
    outcome: str
    #: The case's trials as (n, outcome).
    trials: tuple[tuple[int, str], ...]
    previous: Step | None
    next: Step | None


@dataclass(frozen=True)
class PublicTrial:
    """A public case's trial with everything the store holds of it.

    ``case`` and ``trial`` are their entries in the stored report (the case
    without its ``trials``). ``trace`` is the stored trace's bytes: None with
    a ``trace_digest`` when its content was erased, None without one when
    the trial left no trace (it broke before recording one). ``opinions``:
    what judges said, by assertion position (``judging.Opinion`` s).
    """

    run: RunHead
    index: int
    case: dict[str, Any]
    trial: dict[str, Any]
    trials: tuple[tuple[int, str], ...]
    previous: Step | None
    next: Step | None
    trace_digest: str | None
    trace: bytes | None
    #: The trial's ``trial-verdict`` ledger entry (None for a run stored without a ledger).
    entry: int | None
    opinions: dict[int, list[Any]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The case's id (a public case is named by it)."""
        return str(self.case.get("id", ""))

    @property
    def erased(self) -> bool:
        """Whether a trace was recorded and its content has since been erased."""
        return self.trace is None and self.trace_digest is not None


def trial_at(store: Store, run_id: str, index: int, n: int) -> HiddenTrial | PublicTrial:
    """Trial ``n`` of the case at 1-based ``index`` in the run's report.

    ``TrialNotFound`` when the run, the position or the trial is not there;
    ``RunNotSealed`` while the run has no report.
    """
    r = schema.runs.c
    with store.engine.connect() as connection:
        row = connection.execute(
            sa.select(r.suite_id, r.target_uri, r.status, r.report, r.seal_entry)
            .where(r.run_id == run_id)).first()
        if row is None:
            raise TrialNotFound(f"no run {run_id} in this store")
        body = read_text(connection, run_id, "report", row.report)
        if body is None:
            raise RunNotSealed(f"run {run_id} is not sealed: its trials are shown once it is "
                               "(its page shows its progress meanwhile)")
        head = RunHead(run_id, row.suite_id, row.target_uri,
                       None if row.seal_entry is None else int(row.seal_entry))
        cases = _cases(body)
        if not 1 <= index <= len(cases):
            raise TrialNotFound(f"run {run_id} has no case {index} "
                                f"(its cases are numbered 1 to {len(cases)})")
        case, label, hidden = cases[index - 1]
        trials = [t for t in case.get("trials") or [] if isinstance(t, dict)]
        numbers = tuple((int(t.get("n", 0)), str(t.get("outcome", ""))) for t in trials)
        chosen = next((t for t in trials if t.get("n") == n), None)
        if chosen is None:
            raise TrialNotFound(f"case {label} of run {run_id} has no trial {n}"
                                + (f" (its trials: {', '.join(str(m) for m, _ in numbers)})"
                                   if numbers else " (it recorded none)"))
        previous, following = _neighbours(cases, index, n)
        if hidden:
            return HiddenTrial(head, index, label, str(case.get("outcome", "")), n,
                               str(chosen.get("outcome", "")), numbers, previous, following)
        case_id = str(case["id"])
        t, b = schema.trials.c, schema.blobs.c
        found = connection.execute(
            sa.select(t.trace_digest, t.entry, b.content)
            .outerjoin(schema.blobs, b.digest == t.trace_digest)
            .where(t.run_id == run_id, t.case_id == case_id, t.n == n)).first()
        opinions = _opinions(connection, run_id, case_id=case_id, n=n).get((case_id, n), {})
    return PublicTrial(
        head, index, {k: v for k, v in case.items() if k != "trials"}, chosen, numbers,
        previous, following,
        trace_digest=None if found is None else found.trace_digest,
        trace=None if found is None or found.content is None else bytes(found.content),
        entry=None if found is None or found.entry is None else int(found.entry),
        opinions=opinions)


def _cases(report: str) -> list[tuple[dict[str, Any], str, bool]]:
    """The report's cases in order: each entry, its outward label, whether it is hidden."""
    try:
        listed = json.loads(report).get("cases") or []
    except (ValueError, AttributeError):
        listed = []
    cases: list[tuple[dict[str, Any], str, bool]] = []
    hidden = 0
    for case in listed:
        if not isinstance(case, dict):
            continue
        if case.get("split") == "hidden":
            hidden += 1  # holdout-N, numbered as grading.redact numbers them
            cases.append((case, f"holdout-{hidden}", True))
        else:
            cases.append((case, str(case.get("id", "")), False))
    return cases


def _neighbours(cases: list[tuple[dict[str, Any], str, bool]], index: int,
                n: int) -> tuple[Step | None, Step | None]:
    """The trials just before and after (index, n) in report order, across cases."""
    previous: Step | None = None
    passed = False
    for at, (case, label, _hidden) in enumerate(cases, 1):
        for trial in case.get("trials") or []:
            if not isinstance(trial, dict):
                continue
            step = Step(at, label, int(trial.get("n", 0)), str(trial.get("outcome", "")))
            if passed:
                return previous, step
            if at == index and step.n == n:
                passed = True
            else:
                previous = step
    return previous, None

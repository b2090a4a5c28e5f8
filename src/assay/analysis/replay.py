"""Replay: re-grade a stored run, check it against the ledger, list everything that differs.

Grading is pure, so replay is the same function on stored traces (DESIGN):
each trace goes through ``grade_trace(case.expect, trace)`` and ``fold_trial``
exactly as the battery did, the trials fold per case with ``fold_case`` and
the scores come from ``build_report``. Three records are then set side by
side: the stored rows and report (editable tables), the recomputed values,
and the ledger's ``trial-verdict`` and ``run-sealed`` entries (a chain). A
forger who rewrites a row, and even the trace behind it so that re-grading
agrees, still disagrees with the ledger; one who rewrites the ledger breaks
its chain. Every pair that disagrees is a difference, named with its sources.

What replay returns may be shown: hidden cases are named ``holdout-N`` (the
report's redaction numbering, which follows the suite's order), their
assertions by position only, and nothing of them but enum words and counts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import ValidationError

from ..checks import grade_trace
from ..errors import UsageError
from ..grading import RunInfo, build_report, fold_case, fold_trial
from ..model import Trace
from ..model.evidence import Evidence
from ..model.result import CaseResult, Report, TrialOutcome, TrialResult, Verdict
from ..model.suite import Suite
from ..store.database import StoredRun, StoredTrial, StoredVerdict
from ..store.ledger.replaying import LedgerEntry, RunLedger
from ..store.runs.documents import load_stored_suite, report_digest

#: Values replay may print as they are: anything else in a row or an entry
#: (a forged one could hold any text, hidden content included) is not quoted.
_WORDS = frozenset(get_args(TrialOutcome)) | frozenset(e.value for e in Evidence)
WITHHELD = "withheld"


@dataclass(frozen=True)
class Difference:
    """Two records that disagree about one value, each named by its source.

    Sources are ``stored`` (the rows and report), ``recomputed`` (re-grading
    and folding) and ``ledger`` (the run's ledger entries). ``case`` is None
    for a run-level difference (report, seal, scores), ``trial`` None for a
    case-level one; ``position`` is the assertion's 1-based place in the
    case's ``expect``. ``values`` holds (source, value) pairs in display
    order; empty when ``field`` says it all.
    """

    case: str | None
    trial: int | None
    position: int | None
    assertion: str | None
    field: str
    values: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        """``run``, ``case C``, ``case C trial n`` or ``… assertion p (label)``."""
        if self.case is None:
            return "run"
        where = f"case {self.case}"
        if self.trial is not None:
            where += f" trial {self.trial}"
        if self.position is not None:
            where += f" assertion {self.position}" + (
                f" ({self.assertion})" if self.assertion else "")
        return where

    @property
    def line(self) -> str:
        """One line of text: ``<where>: <field> stored X, recomputed Y``."""
        pairs = ", ".join(f"{source} {value}" for source, value in self.values)
        return f"{self.where}: {self.field}" + (f" {pairs}" if pairs else "")

    def to_json(self) -> dict[str, Any]:
        """The JSON form: the values under their sources' names, and ``against`` them."""
        return {"case": self.case, "trial": self.trial, "position": self.position,
                "assertion": self.assertion, "field": self.field,
                "against": [source for source, _ in self.values], **dict(self.values)}


@dataclass(frozen=True)
class Unreplayable:
    """Something replay could not check (content erased or missing); ``case`` None: the run."""

    case: str | None
    trial: int | None
    reason: str

    @property
    def line(self) -> str:
        """One line of text, as the differences have."""
        where = "run" if self.case is None else f"case {self.case}" + (
            f" trial {self.trial}" if self.trial is not None else "")
        return f"{where}: not replayable ({self.reason})"

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"case": self.case, "trial": self.trial, "reason": self.reason}


@dataclass
class ReplayResult:
    """The outcome of a replay: what was checked, what differs, what could not be checked."""

    run_id: str
    trials: int = 0
    verdicts: int = 0
    cases: int = 0
    entries: int = 0
    differences: list[Difference] = field(default_factory=list)
    unreplayable: list[Unreplayable] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when everything was checked and everything matched."""
        return not self.differences and not self.unreplayable


def _word(value: Any) -> str:
    """A stored value as replay may print it: an outcome or evidence word, else not quoted."""
    return value if isinstance(value, str) and value in _WORDS else "(not an outcome)"


class _Names:
    """Each case id's outward name: hidden ones as ``holdout-N`` in suite order, like ``redact``.

    The battery reports cases in the suite's order, so numbering by the stored
    suite gives ``redact``'s numbers without trusting the stored report. An id
    the suite does not know is not quoted either: only a forged row has one.
    """

    def __init__(self, suite: Suite) -> None:
        self.public = {c.id for c in suite.cases if c.split != "hidden"}
        self.hidden: dict[str, str] = {}
        for case in suite.cases:
            if case.split == "hidden":
                self.hidden[case.id] = f"holdout-{len(self.hidden) + 1}"

    def __call__(self, case_id: Any) -> str:
        if isinstance(case_id, str) and case_id in self.public:
            return case_id
        if isinstance(case_id, str) and case_id in self.hidden:
            return self.hidden[case_id]
        return "(not in the stored suite)"

    def secret(self, case_id: str) -> bool:
        return case_id not in self.public


@dataclass(frozen=True)
class _Record:
    """One trial's outcome and verdict outcomes as one source has them."""

    source: str
    outcome: str
    verdicts: list[str]


def _compare(out: list[Difference], name: str, n: int, labels: Sequence[str | None],
             a: _Record, b: _Record) -> None:
    """Name where two sources' records of a trial disagree: outcome, count, each verdict."""
    if a.outcome != b.outcome:
        out.append(Difference(name, n, None, None, "outcome",
                              ((a.source, _word(a.outcome)), (b.source, _word(b.outcome)))))
    if len(a.verdicts) != len(b.verdicts):
        out.append(Difference(name, n, None, None, "verdict count",
                              ((a.source, str(len(a.verdicts))), (b.source, str(len(b.verdicts))))))
    for i, (x, y) in enumerate(zip(a.verdicts, b.verdicts, strict=False)):
        if x != y:
            label = labels[i] if i < len(labels) else None
            out.append(Difference(name, n, i + 1, label, "outcome",
                                  ((a.source, _word(x)), (b.source, _word(y)))))


def _trial_verdict(entry: LedgerEntry) -> _Record | None:
    """The ledger's record of a trial, or None when the content is not a trial-verdict's."""
    content = entry.content or {}
    outcome, verdicts = content.get("outcome"), content.get("verdicts")
    if (entry.kind != "trial-verdict" or not isinstance(outcome, str)
            or not isinstance(verdicts, list) or not all(isinstance(v, str) for v in verdicts)):
        return None
    return _Record("ledger", outcome, list(verdicts))


def _identity(content: dict[str, Any] | None) -> tuple[str, int] | None:
    """(case id, n) of a trial-verdict content, when it has them."""
    if content is None:
        return None
    case_id, n = content.get("case_id"), content.get("n")
    if isinstance(case_id, str) and isinstance(n, int) and not isinstance(n, bool):
        return case_id, n
    return None


class _Replay:
    """One replay's state; ``run`` walks trials, then cases and scores, then the seal."""

    def __init__(self, run: StoredRun, ledger: RunLedger, suite: Suite) -> None:
        self.run, self.ledger, self.suite = run, ledger, suite
        self.name = _Names(suite)
        self.cases = {case.id: case for case in suite.cases}
        self.result = ReplayResult(run.run_id)
        self.rows: dict[tuple[str, int], list[StoredVerdict]] = {}
        for v in run.verdicts:
            self.rows.setdefault((v.case_id, v.n), []).append(v)
        # Entries found by content, per trial: how a trial without ``trials.entry`` is matched.
        self.by_content: dict[tuple[str, int], list[LedgerEntry]] = {}
        for entry in ledger.entries.values():
            key = _identity(entry.content)
            if entry.kind == "trial-verdict" and key is not None and (
                    entry.content or {}).get("run_id") == run.run_id:
                self.by_content.setdefault(key, []).append(entry)
        self.used: set[int] = set()
        # Re-graded trials per case (by n); cases with a trial that could not be re-graded.
        self.recomputed: dict[str, dict[int, TrialResult]] = {}
        self.incomplete: set[str] = set()

    def differ(self, *args: Any) -> None:
        self.result.differences.append(Difference(*args))

    def skip(self, case: str | None, trial: int | None, reason: str) -> None:
        self.result.unreplayable.append(Unreplayable(case, trial, reason))

    # --- trials -----------------------------------------------------------------

    def trial(self, trial: StoredTrial) -> None:
        name, n = self.name(trial.case_id), trial.n
        secret = self.name.secret(trial.case_id)
        rows = sorted(self.rows.get((trial.case_id, n), []), key=lambda v: v.position)
        stored = _Record("stored", trial.outcome, [r.outcome for r in rows])
        self.result.trials += 1
        ledger = self.ledger_record(trial, name)
        case = self.cases.get(trial.case_id)
        labels: list[str | None] = []
        graded: list[Verdict] = []
        recomputed: _Record | None = None
        if case is None:
            self.skip(name, n, "case not in the stored suite")
        elif trial.trace_digest is None or trial.outcome == "broken":
            # A broken trial has no trace to re-grade (one of a simulated conversation keeps
            # what happened before it broke, which is no output): broken, with no verdicts.
            recomputed = _Record("recomputed", "broken", [])
            self.keep(trial.case_id, fold_trial(n, [], broken=True, reason="broken"))
        elif trial.trace is None:
            self.skip(name, n, "trace content erased")
            self.incomplete.add(trial.case_id)
        else:
            content = bytes(trial.trace)
            if "sha256:" + hashlib.sha256(content).hexdigest() != trial.trace_digest:
                self.differ(name, n, None, None, "trace content does not match its digest")
            trace = Trace.model_validate_json(content)
            # A quality check is read from the opinions stored with the trial, never asked again.
            opinions = self.run.opinions.get((trial.case_id, n), {})
            graded = grade_trace(case.expect, trace, opinions)
            folded = fold_trial(n, graded, trace=trace, opinions=opinions)
            self.keep(trial.case_id, folded)
            self.result.verdicts += len(graded)
            labels = [None if secret else v.assertion for v in graded]
            recomputed = _Record("recomputed", folded.outcome, [v.outcome for v in graded])
        if recomputed is not None:
            _compare(self.result.differences, name, n, labels, stored, recomputed)
            for row, verdict in zip(rows, graded, strict=False):
                if row.evidence != str(verdict.evidence):
                    self.differ(name, n, row.position + 1, None if secret else verdict.assertion,
                                "evidence", (("stored", _word(row.evidence)),
                                             ("recomputed", _word(str(verdict.evidence)))))
        if ledger is not None:
            _compare(self.result.differences, name, n, labels, stored, ledger)
            if recomputed is not None:
                _compare(self.result.differences, name, n, labels, ledger, recomputed)

    def keep(self, case_id: str, trial: TrialResult) -> None:
        self.recomputed.setdefault(case_id, {})[trial.n] = trial

    def ledger_record(self, trial: StoredTrial, name: str) -> _Record | None:
        """The trial's trial-verdict entry, by ``trials.entry`` or by content; None if unusable."""
        n, key = trial.n, (trial.case_id, trial.n)
        index = self.ledger.trial_entries.get(key)
        if index is not None:
            self.used.add(index)
            entry = self.ledger.entries.get(index)
            if entry is None:
                self.differ(name, n, None, None, f"ledger entry {index} (trials.entry) is missing")
                return None
            if entry.erased:
                self.skip(name, n, f"ledger entry {index} content erased")
                return None
            content = entry.content or {}
            if _identity(content) != key or content.get("run_id") != self.run.run_id:
                self.differ(name, n, None, None,
                            f"ledger entry {index} (trials.entry) records another trial")
                return None
        else:
            found = self.by_content.get(key, [])
            if not found:
                if self.ledger.erased:
                    self.skip(name, n, f"no ledger entry found, and {self.ledger.erased} "
                                       "trial-verdict entries have their content erased")
                else:
                    self.differ(name, n, None, None, "trial",
                                (("stored", "present"), ("ledger", "absent")))
                return None
            self.used.update(e.index for e in found)
            if len(found) > 1:
                self.differ(name, n, None, None, "recorded by ledger entries "
                            + ", ".join(str(e.index) for e in found))
            entry = found[0]
        self.result.entries += 1
        if not entry.intact:
            self.differ(name, n, None, None,
                        f"ledger entry {entry.index} does not match its digest or hash")
        record = _trial_verdict(entry)
        if record is None:
            self.differ(name, n, None, None, f"ledger entry {entry.index} is not a trial-verdict")
        return record

    def unrecorded(self) -> None:
        """(d): this run's trial-verdict entries that no stored trial accounts for."""
        for key, entries in self.by_content.items():
            for entry in entries:
                if entry.index in self.used:
                    continue
                self.result.entries += 1
                self.differ(self.name(key[0]), key[1], None, None, "trial",
                            (("stored", "absent"), ("ledger", f"entry {entry.index}")))

    # --- cases and scores ----------------------------------------------------------

    def cases_and_scores(self, report: Report | None) -> None:
        """Fold the re-graded trials per case, rebuild the scores, compare with the report."""
        stored = {c.id: c for c in report.cases if isinstance(c, CaseResult)} if report else {}
        folded: list[CaseResult] = []
        complete = True
        for case in self.suite.cases:
            name, old = self.name(case.id), stored.get(case.id)
            if case.id in self.incomplete:
                # Already listed as not replayable; score with what the report says.
                if old is None:
                    complete = False
                else:
                    folded.append(old)
                continue
            trials = self.recomputed.get(case.id, {})
            new = fold_case(case, [trials[n] for n in sorted(trials)])
            folded.append(new)
            self.result.cases += 1
            if report is None:
                continue
            if old is None:
                self.differ(name, None, None, None, "case",
                            (("stored", "absent"), ("recomputed", _word(new.outcome))))
                continue
            if old.outcome != new.outcome:
                self.differ(name, None, None, None, "outcome",
                            (("stored", _word(old.outcome)), ("recomputed", new.outcome)))
            if old.pass_at_1 != new.pass_at_1:
                # A hidden case's rate is not in the redacted report: the fact, not the values.
                values = ((WITHHELD, WITHHELD) if self.name.secret(case.id)
                          else (repr(old.pass_at_1), repr(new.pass_at_1)))
                self.differ(name, None, None, None, "pass@1",
                            (("stored", values[0]), ("recomputed", values[1])))
        if report is None:
            return
        for result in report.cases:
            if result.id not in self.cases:
                self.differ(self.name(result.id), None, None, None, "case",
                            (("stored", "present"), ("recomputed", "absent")))
        if not complete:
            return
        info = RunInfo(run_id=report.run_id, suite=report.suite, target=report.target,
                       started_at=report.started_at, finished_at=report.finished_at,
                       trials_per_case=report.trials_per_case, pass_mark=self.suite.pass_mark,
                       seed=report.seed, interrupted=report.interrupted)
        scores = build_report(info, folded).scores
        for what, old_value, new_value in (
                ("score public", report.scores.public, scores.public),
                ("score hidden", report.scores.hidden, scores.hidden),
                ("score overall", report.scores.overall, scores.overall),
                ("score synthetic", report.scores.synthetic, scores.synthetic),
                ("pass mark", report.scores.pass_mark, scores.pass_mark),
                ("passed", report.scores.passed, scores.passed)):
            if old_value != new_value:
                self.differ(None, None, None, None, what, (
                    ("stored", json.dumps(old_value)), ("recomputed", json.dumps(new_value))))

    # --- the seal ----------------------------------------------------------------

    def seal(self, report: Report | None) -> None:
        """The stored report must be the one the run-sealed entry's ``report_digest`` names."""
        sealed = [e for e in self.ledger.entries.values() if e.kind == "run-sealed"
                  and (e.content or {}).get("run_id") == self.run.run_id]
        if not sealed:
            if self.ledger.status == "open":
                self.skip(None, None, "the run is not sealed yet")
            else:
                self.differ(None, None, None, None, "run-sealed entry",
                            (("stored", "sealed"), ("ledger", "absent")))
            return
        self.result.entries += len(sealed)
        if len(sealed) > 1:
            self.differ(None, None, None, None, "sealed by ledger entries "
                        + ", ".join(str(e.index) for e in sealed))
        entry = sealed[-1]
        if not entry.intact:
            self.differ(None, None, None, None,
                        f"ledger entry {entry.index} does not match its digest or hash")
        if report is None:
            return
        # The runs row keeps the seal (revision 0004, report stored with seal null);
        # older runs kept it inside the report.
        seal: tuple[object, object] | None = self.ledger.seal
        if seal is None and report.seal is not None:
            seal = (report.seal.get("entry"), report.seal.get("hash"))
        if seal is None or seal != (entry.index, entry.hash):
            stored = "absent" if seal is None or not isinstance(seal[0], int) else (
                f"entry {seal[0]}" + ("" if seal[0] != entry.index else " (another hash)"))
            self.differ(None, None, None, None, "seal",
                        (("stored", stored), ("ledger", f"entry {entry.index}")))
        recorded = (entry.content or {}).get("report_digest")
        # An erasure rewrites the stored report (notes, reasons, labels of the
        # erased case) and records the digest before and after: follow them.
        for erasure in sorted((e for e in self.ledger.entries.values() if e.kind == "erasure"
                               and e.index > entry.index), key=lambda e: e.index):
            change = (erasure.content or {}).get("reports", {}).get(self.run.run_id) or {}
            if change.get("before") != recorded:
                self.differ(None, None, None, None,
                            f"report digest before erasure entry {erasure.index}",
                            (("erasure", _digest(change.get("before"))),
                             ("ledger", _digest(recorded))))
            recorded = change.get("after")
        actual = report_digest(report)
        if recorded != actual:
            self.differ(None, None, None, None, "report digest",
                        (("stored", actual), ("ledger", _digest(recorded))))


def _digest(value: Any) -> str:
    """A digest from a ledger content, printed only when it looks like one."""
    if isinstance(value, str) and value.startswith("sha256:") and len(value) == 71:
        return value
    return "absent"


def _report(run: StoredRun) -> Report | None:
    """The stored report as a model, or None when there is none or it cannot be read."""
    if not run.report:
        return None
    try:
        return Report.model_validate_json(run.report)
    except ValidationError:
        return None


def replay(run: StoredRun, ledger: RunLedger) -> ReplayResult:
    """Re-grade every stored trial of ``run`` and check rows, report and ``ledger`` against it.

    Raises ``UsageError`` when the run has no stored suite, or one that
    cannot be read (the message never quotes it).
    """
    if run.suite is None:
        raise UsageError(f"run {run.run_id} was stored without its suite "
                         "(before store revision 0003): it cannot be replayed")
    try:
        suite = load_stored_suite(json.loads(run.suite))
    except (ValueError, KeyError, TypeError):
        # Not the error's text: it would quote the suite, hidden cases included.
        raise UsageError(f"run {run.run_id}: the stored suite cannot be read") from None
    state = _Replay(run, ledger, suite)
    for trial in run.trials:
        state.trial(trial)
    state.unrecorded()
    report = _report(run)
    if report is None:
        if ledger.status == "open":
            state.skip(None, None, "the run is not sealed yet")
        else:
            state.differ(None, None, None, None, "report",
                         (("stored", "absent or unreadable"), ("recomputed", "present")))
    else:
        state.seal(report)
    state.cases_and_scores(report)
    return state.result

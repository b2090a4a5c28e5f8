"""Recording a run as it goes: registered before any trial, trials in batches, sealed at the end.

docs/decisions/0017-recording.md. The battery hands every finished trial to
:meth:`RunRecorder.record`, which turns it into a ``TrialRecord`` (plain
values, the trace already JSON) and hands batches to a sink: each batch is
one transaction with the trial rows, their verdicts, their traces by digest
and one ``trial-verdict`` ledger entry each (``store.runs.record``), at the
latest ``every_s`` seconds after a trial finished. A process killed
mid-battery (``kill -9``) therefore leaves every trial of every committed
batch, each with its ledger entry, and the run ``open``: ``assay run
--resume RUN`` runs only what is missing.

This side imports no database library: ``assay run`` hands the batches to a
writer process (``store.runs.recorder_process``), which does the database's work on another
core while the battery goes on. The recorder writes; it never grades and
never prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..canonical import canonical, digest
from ..checks import REGISTRY, lookup, rate_threshold
from ..grading import redact
from ..model.records import PlainTrial
from ..model.result import Report, TrialResult
from ..model.suite import Case
from ..store.runs.documents import Spilled, spill_report, spill_suite, stored_suite_json, summary
from ..store.runs.trials import Holder, Sink, SpilledBody, TrialRecord, sealed_columns, trial_record

if TYPE_CHECKING:
    from ..suites import LoadedSuite
    from .battery import RunStart
    from .windows import Window

_T = TypeVar("_T")


def _thresholds(cases: Iterable[Case]) -> dict[str, dict[str, float]]:
    """Each rate-based assertion's threshold (1.0 when unset), by case id and position."""
    found: dict[str, dict[str, float]] = {}
    having = getattr(cases, "having", None)
    if having is not None:  # packed cases: only those with a quality check are made
        quality = frozenset(name for name, check in REGISTRY.items()
                            if check.family == "quality")
        if not quality & cases.check_names():  # type: ignore[attr-defined]
            return found  # none in the whole suite: no case is read
        cases = having(quality)
    for case in cases:
        for position, assertion in enumerate(case.expect):
            check = lookup(assertion.check)
            if check is not None and check.family == "quality":
                written = rate_threshold(assertion)
                value = 1.0 if written is None else written
                found.setdefault(case.id, {})[str(position)] = value
    return found


def suite_thresholds(loaded: LoadedSuite) -> dict[str, Any]:
    """The registration's ``thresholds``: public ones written out, hidden ones by digest."""
    suite = loaded.suite
    hidden = _thresholds(suite.hidden_cases())
    return {"public": _thresholds(suite.public_cases()),
            "hidden": digest(hidden) if hidden else None}


def registration(start: RunStart, loaded: LoadedSuite, trials_per_case: int,
                 window: Window | None = None, *,
                 max_trials: int | None = None,
                 thresholds: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``run-registered`` content: fixed before any trial runs.

    Digests, never hidden content: the thresholds of hidden cases' rate-based
    assertions are committed to by digest only; public ones are written out
    (``thresholds``: ``suite_thresholds(loaded)``, made beforehand or here).
    A battery's ``window`` (name, size, start) is added only when it has one,
    and an adaptive run's ``adaptive`` (its ``max_trials``) only when it is
    one, so that every other registration keeps the bytes it always had.
    """
    suite = loaded.suite
    content: dict[str, Any] = {
        "run_id": start.run_id,
        "suite": {"id": loaded.suite.id, "digest": loaded.digest},
        "hidden_set": loaded.hidden_digest,
        "pass_mark": suite.pass_mark,
        "thresholds": thresholds if thresholds is not None else suite_thresholds(loaded),
        "trials_per_case": trials_per_case,
        "target": {"uri": start.target_uri, "digest": start.target_digest},
        "seed": start.seed,
        "started_at": start.started_at,
    }
    if window is not None:
        content["window"] = {"name": window.name(suite.id, start.target_digest),
                             "size": window.size, "start": window.start_stamp}
    if max_trials is not None:
        # Fixed before any trial like the rest: how far a case may go is not
        # chosen after seeing how it went.
        content["adaptive"] = {"max_trials": max_trials}
    return content


def registration_row(start: RunStart, loaded: LoadedSuite, trials_per_case: int,
                     options: dict[str, Any], window: Window | None = None, *,
                     max_trials: int | None = None,
                     prepared: tuple[dict[str, Any], Spilled] | None = None
                     ) -> tuple[dict[str, Any], bytes]:
    """The open run's ``runs`` row and its ``run-registered`` content (canonical bytes).

    What ``RunRecorder.register`` writes; a queue's submitter writes them
    itself, with the run's chunks and jobs, in one transaction
    (``queue.enqueue``). ``prepared``: the suite's thresholds and stored JSON
    made beforehand (``prepared_parts``; the JSON in a file the store reads in
    parts, which the caller closes once the run is registered).
    """
    content = registration(start, loaded, trials_per_case, window, max_trials=max_trials,
                           thresholds=prepared[0] if prepared else None)
    suite = loaded.suite
    row = {
        "run_id": start.run_id, "suite_id": suite.id, "suite_digest": loaded.digest,
        "hidden_set": loaded.hidden_digest, "hidden_source": loaded.hidden_source,
        "target_uri": start.target_uri, "target_digest": start.target_digest,
        "target_facets": dict(start.target_facets), "seed": start.seed,
        "started_at": start.started_at, "trials_per_case": trials_per_case,
        "pass_mark": suite.pass_mark, "status": "open",
        # Not hashed anywhere (the suite digest is of its files): plain JSON will do.
        "suite": _suite_handed(prepared[1]) if prepared else stored_suite_json(suite),
        "options": json.dumps({**options, "target_identity": start.target_identity},
                              sort_keys=True),
        "window_size": None if window is None else window.size,
        "window_start": None if window is None else window.start_stamp,
    }
    return row, canonical(content)


def _suite_handed(spilled: Spilled) -> SpilledBody | str:
    handed = spilled.handed()
    return handed if isinstance(handed, SpilledBody) else handed.decode("utf-8")


def prepared_parts(loaded: LoadedSuite) -> tuple[dict[str, Any], Spilled]:
    """What registering a run of ``loaded`` takes from the suite alone: thresholds, stored JSON."""
    return suite_thresholds(loaded), _suite_spilled(loaded)


def _suite_spilled(loaded: LoadedSuite) -> Spilled:
    """``spill_suite``, or its bytes as a run of the same load kept them before
    (``suites.validated.kept_suite_json``): copied, not written again."""
    from ..suites import validated

    key = loaded.cache_key
    if key is not None:
        kept = validated.kept_suite_json(key, loaded.digest)
        if kept is not None:
            stream, want = kept
            with stream, contextlib.suppress(OSError):  # unreadable: made again below
                spilled = Spilled(iter(lambda: stream.read(1 << 20), b""), "assay-suite-")
                if spilled.body.digest == want:
                    return spilled
                spilled.close()  # damaged: made again below, and kept again
    spilled = spill_suite(loaded.suite)
    if key is not None:
        validated.keep_suite_json(key, loaded.digest, Path(spilled.body.path),
                                  spilled.body.digest)
    return spilled


class RunRecorder:
    """Records one run while it runs (see the module doc).

    A write that fails stops the recorder: this and every later ``record`` or
    ``seal`` raises it, the run stays open, and a resume runs again whatever
    was not written.
    """

    def __init__(self, sink: Sink, *, batch: int = 1000, every_s: float = 0.03) -> None:
        self.sink = sink
        self.batch = batch
        self.every_s = every_s
        self.run_id: str | None = None
        self._pending: list[TrialRecord] = []
        self._first_pending = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._failure: Exception | None = None
        self._prepared: tuple[LoadedSuite, dict[str, Any], Spilled] | None = None

    def register(self, start: RunStart, loaded: LoadedSuite, trials_per_case: int,
                 options: dict[str, Any], window: Window | None = None, *,
                 max_trials: int | None = None) -> Holder | None:
        """Open the run and pre-register it in the ledger, in one transaction, before any trial.

        ``start`` is what the battery knew once the target started: the run's id,
        seed and time, and the agent version (its digest and identity). The
        identity is kept with the run's options so that a resume can say what
        changed. With a ``window`` whose battery exists already, nothing is
        registered and that battery's run is returned. ``max_trials``: an adaptive
        run's cap (``registration``).
        """
        prepared = self._prepared if self._prepared and self._prepared[0] is loaded else None
        row, content = registration_row(start, loaded, trials_per_case, options, window,
                                        max_trials=max_trials,
                                        prepared=(prepared[1], prepared[2]) if prepared else None)
        try:
            holder = self.sink.register(row, content)
        finally:
            self.discard()
        if holder is None:
            self.run_id = start.run_id
        return holder

    def prepare(self, loaded: LoadedSuite) -> None:
        """Make beforehand what registering a run of ``loaded`` takes from the suite alone.

        Its thresholds and its stored JSON are then not made between the run's
        start and its first trial, where a large suite would hold the battery up.
        """
        self._prepared = (loaded, *prepared_parts(loaded))

    def discard(self) -> None:
        """Let go of what ``prepare`` made (its file), registered or not."""
        if self._prepared is not None:
            self._prepared[2].close()
            self._prepared = None

    def reopen(self, run_id: str) -> None:
        """Continue recording an open run (``assay run --resume``)."""
        self.run_id = run_id

    def record(self, case: Case, result: TrialResult | PlainTrial) -> None:
        """Keep one finished trial; write a batch when it is full or old enough."""
        self._raise_failure()
        if not self._pending:
            self._first_pending = time.monotonic()
        self._pending.append(trial_record(case.id, case.split, result))
        if len(self._pending) >= self.batch \
                or time.monotonic() - self._first_pending >= self.every_s:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            # The trials that finish last before a pause are written too.
            self._timer = loop.call_later(self.every_s, self._flush_later)

    def flush(self) -> None:
        """Hand the trials kept so far to the sink, as one batch."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._raise_failure()
        if not self._pending or self.run_id is None:
            return
        pending, self._pending = self._pending, []
        self._guarded(lambda: self.sink.write(str(self.run_id), pending))

    def _flush_later(self) -> None:
        # From the loop's timer: a failure is kept (``_guarded``) and raised by the
        # next record or the seal, on the battery's side, never by the loop.
        self._timer = None
        with contextlib.suppress(Exception):
            self.flush()

    def close(self) -> None:
        """Write everything kept and handed over; raises what failed."""
        self.flush()
        self._guarded(self.sink.close)

    def seal(self, report: Report, queue: Sequence[dict[str, Any]] = ()) -> Report:
        """Write what is left and seal the run (run-sealed, runs row, tree head); return it sealed.

        One transaction: a run is sealed with its report and head, or not at all;
        ``queue`` (``review.queue.sealed_items``) is queued for review in it.
        """
        self.flush()
        # Written a case at a time to a file the store reads: a large report's
        # text is never held by the battery's process.
        with spill_report(report) as spilled:
            body = spilled.handed()
            # The summary a receipt shows is sealed too, by digest: a receipt whose
            # scores were edited no longer verifies (receipts.verify).
            content = {"run_id": report.run_id, "report_digest": spilled.body.digest,
                       "summary": digest(summary(redact(report)))}
            index, sealed_hash = self._guarded(lambda: self.sink.seal(
                report.run_id, sealed_columns(report, body), canonical(content), queue))
        return report.model_copy(update={"seal": {"entry": index, "hash": sealed_hash}})

    def _guarded(self, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except Exception as error:  # kept: every later record or seal raises it too
            self._failure = error
            raise

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

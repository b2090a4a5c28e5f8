"""Recording a run as it goes: registered before any trial, trials in batches, sealed at the end.

docs/decisions/0017-recording.md. The battery hands every finished trial to
:meth:`RunRecorder.record`; trials are written in batches (a transaction per
batch: the trial rows, their verdicts, their traces by digest and one
``trial-verdict`` ledger entry each), at the latest ``every_s`` seconds after
a trial finished. A process killed mid-battery (``kill -9``) therefore
leaves every trial of every committed batch, each with its ledger entry, and
the run ``open``: ``assay run --resume RUN`` runs only what is missing.

The recorder writes; it never grades and never prints.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from ..canonical import canonical, digest, digest_bytes
from ..grading import redact
from ..model.result import Report, TrialResult
from . import receipts, schema
from .blobs import put_blobs
from .bulk import insert_rows, json_text
from .chain import Entry
from .ledger import append_bodies
from .recording import registration, report_body, stored_suite

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..engine import RunStart
    from ..model.suite import Case
    from ..suites import LoadedSuite
    from ..targets import Target
    from .database import Store

def _trial_verdict_body(run_id: str, case_id: str, result: TrialResult,
                        trace: str | None) -> bytes:
    content = {"run_id": run_id, "case_id": case_id, "n": result.n, "outcome": result.outcome,
               "verdicts": [v.outcome for v in result.verdicts], "trace": trace}
    try:
        # Every key is ASCII and every value a string, a small int or a list of
        # strings: the C encoder writes these exactly as JCS does.
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"),
                          sort_keys=True).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in a case id: let JCS refuse it properly
        return canonical(content)


def trace_blob(result: TrialResult) -> tuple[str, bytes] | None:
    """A trial's trace as stored (compact JSON) and the SHA-256 of those bytes (None: no trace).

    The digest names the stored bytes, as every blob's does: the same trace
    gives the same bytes, so it is stored once, and the trial-verdict entry
    that records the digest pins the evidence a verdict was graded on.
    """
    if result.trace is None:
        return None
    # Output an agent returned that JSON cannot hold is kept as its repr.
    body = result.trace.model_dump_json(fallback=repr).encode()
    return digest_bytes(body), body


def trial_rows(run_id: str, case_id: str, split: str, result: TrialResult,
               trace_digest: str | None, entry: int | None
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``trials`` row and ``verdicts`` rows of one trial."""
    trial = {"run_id": run_id, "case_id": case_id, "split": split, "n": result.n,
             "outcome": result.outcome, "reason": result.reason,
             "duration_s": result.duration_s,
             "usage": json_text(result.usage.model_dump(mode="json")),
             "trace_digest": trace_digest, "entry": entry}
    verdicts = [{"run_id": run_id, "case_id": case_id, "n": result.n, "position": i,
                 "assertion": v.assertion, "check": v.check, "family": v.family,
                 "outcome": v.outcome, "evidence": str(v.evidence), "note": v.note,
                 "provenance": v.provenance, "threshold": v.threshold}
                for i, v in enumerate(result.verdicts)]
    return trial, verdicts


def write_trials(connection: Connection, run_id: str,
                 trials: Sequence[tuple[str, str, TrialResult]], *, ledger: bool) -> None:
    """Write trials ``(case id, split, result)`` of a run, with a ledger entry each if asked."""
    blobs: dict[str, bytes] = {}
    traces: list[str | None] = []
    for _, _, result in trials:
        stored = trace_blob(result)
        if stored is not None:
            blobs.setdefault(*stored)
        traces.append(stored[0] if stored else None)
    entries: list[Entry | None] = [None] * len(trials)
    if ledger:
        entries = list(append_bodies(connection, [
            ("trial-verdict", _trial_verdict_body(run_id, case_id, result, trace))
            for (case_id, _, result), trace in zip(trials, traces, strict=True)]))
    trial_table: list[dict[str, Any]] = []
    verdict_table: list[dict[str, Any]] = []
    for (case_id, split, result), trace, entry in zip(trials, traces, entries, strict=True):
        row, verdicts = trial_rows(run_id, case_id, split, result, trace,
                                   entry.index if entry else None)
        trial_table.append(row)
        verdict_table.extend(verdicts)
    put_blobs(connection, blobs)
    insert_rows(connection, schema.trials.insert(), trial_table)
    insert_rows(connection, schema.verdicts.insert(), verdict_table)


def sealed_columns(report: Report, body: bytes) -> dict[str, Any]:
    """The ``runs`` columns known once a run is over (``body``: ``recording.report_body``)."""
    scores = report.scores
    return {
        "finished_at": report.finished_at, "target_facets": report.target.facets,
        "score_public": scores.public, "score_hidden": scores.hidden,
        "score_overall": scores.overall, "passed": scores.passed,
        "interrupted": report.interrupted, "report": body.decode("utf-8"),
        "report_digest": digest_bytes(body),
    }


class RunRecorder:
    """Records one run into a store while it runs (see the module doc).

    Batches are written by one background thread, in order, so the database's
    own work (SQLite releases the GIL while it writes and commits) overlaps
    the battery instead of pausing it. A write that fails stops the recorder:
    the next ``record``/``seal`` raises it, the run stays open, and a resume
    runs again whatever was not written. ``key`` signs a tree head over the
    whole ledger when the run is sealed; without one no head is recorded.
    """

    def __init__(self, store: Store, *, key: Ed25519PrivateKey | None = None,
                 batch: int = 1000, every_s: float = 0.2, background: bool = True) -> None:
        self.store = store
        self.key = key
        self.batch = batch
        self.every_s = every_s
        self.background = background
        self.run_id: str | None = None
        self._pending: list[tuple[str, str, TrialResult]] = []
        self._first_pending = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._batches: queue.SimpleQueue[list[tuple[str, str, TrialResult]] | None] = \
            queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._failure: Exception | None = None

    def register(self, start: RunStart, loaded: LoadedSuite, target: Target,
                 trials_per_case: int, options: dict[str, Any]) -> None:
        """Open the run and pre-register it in the ledger, in one transaction, before any trial."""
        self.run_id = start.run_id
        content = registration(start, loaded, target, trials_per_case)
        suite = loaded.suite
        row = {
            "run_id": start.run_id, "suite_id": suite.id, "suite_digest": loaded.digest,
            "hidden_set": loaded.hidden_digest, "hidden_source": loaded.hidden_source,
            "target_uri": target.uri, "target_digest": target.digest(),
            "target_facets": dict(target.facets), "seed": start.seed,
            "started_at": start.started_at, "trials_per_case": trials_per_case,
            "pass_mark": suite.pass_mark, "status": "open",
            # Not hashed anywhere (the suite digest is of its files): plain JSON will do.
            "suite": json.dumps(stored_suite(loaded), ensure_ascii=False,
                                separators=(",", ":")),
            "options": json.dumps(options, sort_keys=True),
        }
        with self.store.writing(start.run_id) as connection:
            connection.execute(schema.runs.insert(), row)
            append_bodies(connection, [("run-registered", canonical(content))])

    def reopen(self, run_id: str) -> None:
        """Continue recording an open run (``assay run --resume``)."""
        self.run_id = run_id

    def record(self, case: Case, result: TrialResult) -> None:
        """Keep one finished trial; write a batch when it is full or old enough."""
        if self._failure is not None:
            raise self._failure
        if not self._pending:
            self._first_pending = time.monotonic()
        self._pending.append((case.id, case.split, result))
        if len(self._pending) >= self.batch \
                or time.monotonic() - self._first_pending >= self.every_s:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            # The trials that finish last before a pause are written too.
            self._timer = loop.call_later(self.every_s, self.flush)

    def flush(self) -> None:
        """Hand the trials kept so far to the writer (one transaction per batch)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._raise_failure()
        if not self._pending or self.run_id is None:
            return
        pending, self._pending = self._pending, []
        if not self.background:
            self._write(pending)
            return
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_batches, name="assay-recorder",
                                            daemon=True)
            self._writer.start()
        self._batches.put(pending)

    def close(self) -> None:
        """Write every batch handed over so far, and stop the writer; raises what failed."""
        self.flush()
        if self._writer is not None:
            self._batches.put(None)
            self._writer.join()
            self._writer = None
        self._raise_failure()

    def _write(self, batch: list[tuple[str, str, TrialResult]]) -> None:
        assert self.run_id is not None
        with self.store.writing(self.run_id) as connection:
            write_trials(connection, self.run_id, batch, ledger=True)

    def _write_batches(self) -> None:
        while (batch := self._batches.get()) is not None:
            if self._failure is None:
                try:
                    self._write(batch)
                except Exception as error:  # kept, and raised on the battery's side
                    self._failure = error

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def seal(self, report: Report) -> Report:
        """Write what is left and seal the run (run-sealed, runs row, tree head); return it sealed.

        One transaction: a run is sealed with its report and head, or not at all.
        """
        self.close()
        body = report_body(report)
        run_id = report.run_id
        with self.store.writing(run_id) as connection:
            # The summary a receipt shows is sealed too, by digest: a receipt whose
            # scores were edited no longer verifies (receipts.verify).
            content = {"run_id": run_id, "report_digest": digest_bytes(body),
                       "summary": digest(receipts.summary(redact(report)))}
            sealed = append_bodies(connection, [("run-sealed", canonical(content))])[-1]
            r = schema.runs.c
            connection.execute(schema.runs.update().where(r.run_id == run_id).values(
                **sealed_columns(report, body), status="sealed",
                seal_entry=sealed.index, seal_hash=sealed.hash))
            if self.key is not None:
                from .heads import record_head

                record_head(connection, self.key)
        return report.model_copy(update={"seal": {"entry": sealed.index, "hash": sealed.hash}})


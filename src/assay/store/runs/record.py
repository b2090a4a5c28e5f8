"""The database side of recording a run: register it, write trial batches, seal it.

Each function is one transaction. They take what ``engine.record`` prepared on the
battery's side (rows, ``TrialRecord`` s, canonical ledger contents) and add
what needs the database: the ledger's chain, the blobs, the rows, a signed
tree head. ``LocalSink`` calls them in the battery's process; the writer
process (``store.runs.recorder_process``) calls them on the other side of a pipe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy.engine import Connection

from ...canonical import canonical, digest_bytes
from .. import schema
from ..blobs import put_blobs
from ..bulk import insert_rows
from ..ledger.chain import Entry
from ..ledger.entries import append_bodies
from .texts import write_parts
from .trials import VERDICT_COLUMNS, Holder, OpinionRecord, SpilledBody, TrialRecord

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ...model.result import Report
    from ..database import Store
    from ..ledger.heads import Frontier


def _trial_verdict_body(run_id: str, record: TrialRecord, trace: str | None) -> bytes:
    content = {"run_id": run_id, "case_id": record.case_id, "n": record.n,
               "outcome": record.outcome, "verdicts": [v[3] for v in record.verdicts],
               "trace": trace}
    try:
        # Every key is ASCII and every value a string, a small int, None or a list of
        # strings: orjson with sorted keys writes these exactly as JCS does (a property
        # test holds the two equal), ten times faster than the standard library.
        return orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # a lone surrogate in a case id: let JCS refuse it properly
        return canonical(content)


def _opinion_body(run_id: str, record: TrialRecord, opinion: OpinionRecord,
                  blobs: dict[str, bytes]) -> bytes:
    """The ``judge-opinion`` content: the opinion, its long texts by digest (kept in ``blobs``)."""
    named: dict[str, str | None] = {name: None for name in ("raw",)}
    for name, text in opinion.texts.items():
        text_digest = digest_bytes(text)
        blobs.setdefault(text_digest, text)
        named[name] = text_digest
    return canonical({**opinion.fields, **named, "run_id": run_id, "case_id": record.case_id,
                      "n": record.n, "position": opinion.position, "item": opinion.item})


def write_trials(connection: Connection, run_id: str, records: Sequence[TrialRecord], *,
                 ledger: bool) -> None:
    """Write trials of a run (rows, verdicts, traces by digest), with a ledger entry each if asked.

    A trace is stored as the bytes it came in (``recorder.trial_record``) under
    the SHA-256 of those bytes; the trial-verdict entry records that digest,
    pinning the evidence its verdicts were graded on.
    """
    blobs: dict[str, bytes] = {}
    traces: list[str | None] = []
    for record in records:
        if record.trace is None:
            traces.append(None)
            continue
        trace_digest = digest_bytes(record.trace)
        blobs.setdefault(trace_digest, record.trace)
        traces.append(trace_digest)
    bodies: list[tuple[str, bytes]] = []
    opinion_table: list[dict[str, Any]] = []
    for record, trace in zip(records, traces, strict=True):
        bodies.append(("trial-verdict", _trial_verdict_body(run_id, record, trace)))
        for opinion in record.opinions:
            bodies.append(("judge-opinion", _opinion_body(run_id, record, opinion, blobs)))
            opinion_table.append({"run_id": run_id, "case_id": record.case_id, "n": record.n,
                                  "position": opinion.position, "item": opinion.item,
                                  "content_digest": digest_bytes(bodies[-1][1]),
                                  "entry": None})
    entries: list[Entry | None] = [None] * len(bodies)
    if ledger:
        entries = list(append_bodies(connection, bodies))
    else:  # an opinion's content is kept all the same: replay reads opinions from it
        for kind, body in bodies:
            if kind == "judge-opinion":
                blobs.setdefault(digest_bytes(body), body)
    trial_table: list[dict[str, Any]] = []
    verdict_table: list[dict[str, Any]] = []
    at = 0
    opinion_rows = iter(opinion_table)
    for record, trace in zip(records, traces, strict=True):
        entry = entries[at]
        for _ in record.opinions:
            at += 1
            next(opinion_rows)["entry"] = None if entries[at] is None else entries[at].index  # type: ignore[union-attr]
        at += 1
        trial_table.append({
            "run_id": run_id, "case_id": record.case_id, "split": record.split, "n": record.n,
            "outcome": record.outcome, "reason": record.reason,
            "duration_s": record.duration_s, "usage": record.usage, "trace_digest": trace,
            "entry": entry.index if entry else None})
        for position, verdict in enumerate(record.verdicts):
            row = dict(zip(VERDICT_COLUMNS, verdict, strict=True))
            row.update(run_id=run_id, case_id=record.case_id, n=record.n, position=position)
            verdict_table.append(row)
    put_blobs(connection, blobs)
    insert_rows(connection, schema.trials.insert(), trial_table)
    insert_rows(connection, schema.verdicts.insert(), verdict_table)
    if opinion_table:
        insert_rows(connection, schema.opinions.insert(), opinion_table)


def register_run(store: Store, row: dict[str, Any], content: bytes, *,
                 also: Callable[[Connection], None] | None = None) -> Holder | None:
    """Insert the open run's row and its ``run-registered`` entry (canonical ``content``).

    A run with a window (``row["window_size"]``) whose battery exists already
    is refused by the database's unique index, however many processes race
    (docs/decisions/0026-windows.md): the transaction rolls back whole (no
    row, no entry) and the run that holds the window is returned instead.
    ``also`` writes more in the same transaction (a queued run's chunks and jobs).
    """
    from ..database import StoredTwice

    suite = row.get("suite")
    if isinstance(suite, SpilledBody):  # kept in parts, read from its file a piece at a time
        row = {**row, "suite": None}
    try:
        with store.writing(row["run_id"]) as connection:
            connection.execute(schema.runs.insert(), row)
            if isinstance(suite, SpilledBody):
                write_parts(connection, row["run_id"], "suite", suite)
            append_bodies(connection, [("run-registered", content)])
            if also is not None:  # a queued run's chunks and jobs (queue.enqueue)
                also(connection)
    except StoredTwice:
        if row.get("window_size") is None:
            raise
        # Read after the refusal, in a new transaction: the holder has committed by then
        # (PostgreSQL makes the second insert wait for the first transaction's end).
        holder = store.window_holder(row["suite_id"], row["target_digest"],
                                     row["window_size"], row["window_start"])
        if holder is None:  # refused for another reason (the run id): as before
            raise
        return holder
    return None


def write_batch(store: Store, run_id: str, records: Sequence[TrialRecord], *,
                follow: bool = False, known: Frontier | None = None) -> Frontier | None:
    """One batch of a run's trials, with their entries, in one transaction.

    ``follow``: also read the ledger's compact range as this transaction
    leaves it (``heads.frontier_of``, from ``known``), and return it once
    committed: the writer process keeps it, so that the head signed at the
    seal hashes only what was written after the last batch.
    """
    with store.writing(run_id) as connection:
        write_trials(connection, run_id, records, ledger=True)
        if not follow:
            return None
        from ..ledger.heads import HeadError, frontier_of

        try:
            return frontier_of(connection, known)
        except HeadError:
            # A ledger that does not hold is the seal's to refuse (as it did
            # before the writer followed it): the batch is written all the same.
            return None


def seal_run(store: Store, key: Ed25519PrivateKey | None, run_id: str,
             columns: dict[str, Any], content: bytes,
             known: Frontier | None = None,
             queue: Sequence[dict[str, Any]] = ()) -> tuple[int, str]:
    """Append ``run-sealed``, complete the run's row, queue its trials for review
    (``queue``) and sign a tree head, in one transaction.

    ``known``: a compact range ``write_batch`` read, which the head extends.
    Returns the sealing entry's index and hash (the report's ``seal``).
    """
    spilled = columns.get("report")
    if isinstance(spilled, SpilledBody):  # kept in parts, read from its file a piece at a time
        columns = {**columns, "report": None}
    with store.writing(run_id) as connection:
        sealed = append_bodies(connection, [("run-sealed", content)])[-1]
        r = schema.runs.c
        connection.execute(schema.runs.update().where(r.run_id == run_id).values(
            **columns, status="sealed", seal_entry=sealed.index, seal_hash=sealed.hash))
        if isinstance(spilled, SpilledBody):
            write_parts(connection, run_id, "report", spilled)
        if queue:
            from ..reviews.items import queue_items

            queue_items(connection, queue)
        if key is not None:
            from ..ledger.heads import record_head

            record_head(connection, key, known)
    return sealed.index, sealed.hash


class LocalSink:
    """Recording in the battery's own process: every call is a transaction, here and now.

    ``owned``: the sink closes the store when it is stopped.
    """

    def __init__(self, store: Store, key: Ed25519PrivateKey | None = None, *,
                 owned: bool = False) -> None:
        self.store = store
        self.key = key
        self.owned = owned

    def ready(self) -> None:
        """The store is open already."""

    def register(self, row: dict[str, Any], content: bytes) -> Holder | None:
        """See ``register_run``."""
        return register_run(self.store, row, content)

    def write(self, run_id: str, records: list[TrialRecord]) -> None:
        """See ``write_batch``."""
        write_batch(self.store, run_id, records)

    def seal(self, run_id: str, columns: dict[str, Any], content: bytes,
             queue: Sequence[dict[str, Any]] = ()) -> tuple[int, str]:
        """See ``seal_run``."""
        return seal_run(self.store, self.key, run_id, columns, content, queue=queue)

    def close(self) -> None:
        """Nothing is pending here: every write has happened."""

    def stop(self) -> None:
        """Close the store if this sink owns it."""
        if self.owned:
            self.store.close()


def save_run(store: Store, report: Report, suite: dict[str, Any] | None = None) -> None:
    """Store a whole finished run at once: its FULL report, trials, verdicts and traces.

    ``assay run`` records as it goes (``engine.record.RunRecorder``); this is for
    a report made elsewhere (tests, imports). No ledger entries are written.
    ``suite`` is the suite that ran (``recording.stored_suite``): replay
    re-grades the traces with it, so a run saved without one cannot be replayed.
    """
    from ...model.result import CaseResult
    from .documents import report_body
    from .trials import sealed_columns, trial_record

    body = report_body(report)
    seal = report.seal or {}
    run = {
        "run_id": report.run_id, "suite_id": report.suite.id,
        "suite_digest": report.suite.digest, "hidden_set": report.suite.hidden_set,
        "hidden_source": report.suite.hidden_source, "target_uri": report.target.uri,
        "target_digest": report.target.digest, "seed": report.seed,
        "started_at": report.started_at, "trials_per_case": report.trials_per_case,
        "pass_mark": report.scores.pass_mark, "status": "sealed",
        "suite": None if suite is None else canonical(suite).decode("utf-8"),
        "seal_entry": seal.get("entry"), "seal_hash": seal.get("hash"),
        **sealed_columns(report, body),
    }
    trials = [trial_record(case.id, case.split, trial) for case in report.cases
              if isinstance(case, CaseResult)  # a redacted report has no trials left
              for trial in case.trials]
    with store.writing(report.run_id) as connection:
        connection.execute(schema.runs.insert(), run)
        write_trials(connection, report.run_id, trials, ledger=False)

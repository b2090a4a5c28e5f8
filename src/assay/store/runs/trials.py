"""A trial as the store keeps it, and the sink a run's record is written through.

``engine.record.RunRecorder`` turns each finished trial into a ``TrialRecord``
(plain values, the trace already JSON) and hands batches of them to a
``Sink``: in the battery's process (``run_record.LocalSink``) or in the writer
process (``writer.ProcessSink``). This module imports no database library.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ...canonical import digest_bytes

if TYPE_CHECKING:  # only read here: the writer process, which imports this, needs no model
    from ...model.records import PlainTrial
    from ...model.result import Report, TrialResult
    from ...model.trace import Trace, Usage

#: One verdict as stored, in the order of ``VERDICT_COLUMNS``.
VerdictRow = tuple[str, str, str, str, str, str, str, "float | None", "float | None"]
#: The ``verdicts`` columns a ``VerdictRow`` fills, in its order.
VERDICT_COLUMNS = ("assertion", "check", "family", "outcome", "evidence", "note",
                   "provenance", "threshold", "score")


class TrialRecord(NamedTuple):
    """One finished trial as plain values: cheap to send to the writer, ready to store."""

    case_id: str
    split: str
    n: int
    outcome: str
    reason: str | None
    duration_s: float
    #: The usage as JSON text.
    usage: str
    verdicts: tuple[VerdictRow, ...]
    #: The trace as compact JSON (pydantic's); None when the trial has none.
    trace: bytes | None
    #: What judges said of the trace: ``OpinionRecord`` s, in assertion then answer order.
    opinions: tuple[OpinionRecord, ...] = ()


class OpinionRecord(NamedTuple):
    """One opinion as stored: where it belongs, its fields, its long texts apart.

    ``fields`` is the opinion's JSON without ``raw`` (and ``stream``): those
    are kept as blobs under their digests (``texts``), so that the ledger's
    ``judge-opinion`` entry names them by digest and an erasure can remove
    them without breaking a hash.
    """

    position: int
    item: int
    fields: dict[str, Any]
    texts: dict[str, bytes]


#: The opinion fields kept as blobs, by digest, rather than in the entry.
OPINION_TEXTS = ("raw", "stream")


def opinion_record(position: int, item: int, data: dict[str, Any]) -> OpinionRecord:
    """The record of one opinion (``Opinion.to_json()``)."""
    fields = dict(data)
    texts: dict[str, bytes] = {}
    for name in OPINION_TEXTS:
        value = fields.pop(name, None)
        if isinstance(value, str):
            texts[name] = value.encode("utf-8", "surrogatepass")
    return OpinionRecord(position, item, fields, texts)


def trial_record(case_id: str, split: str, result: TrialResult | PlainTrial) -> TrialRecord:
    """The record of one trial. Output an agent returned that JSON cannot hold is kept as repr.

    The trace's bytes and the usage's text are pydantic's, written by orjson
    where it writes the same (``model.compact``, docs/decisions/0081-fast-json.md).
    """
    trace_json, usage_json = _encoders()
    trace = None if result.trace is None else trace_json(result.trace)
    usage = result.usage
    unreported = usage.input_tokens is None and usage.output_tokens is None \
        and usage.cost_usd is None
    return TrialRecord(
        case_id, split, result.n, result.outcome, result.reason, result.duration_s,
        UNREPORTED_USAGE if unreported else usage_json(usage),
        tuple([(v.assertion, v.check, v.family, v.outcome, v.evidence.value, v.note,
                v.provenance, v.threshold, v.score) for v in result.verdicts]),
        trace,
        tuple(opinion_record(position, item, opinion.to_json())
              for position in sorted(result.opinions)
              for item, opinion in enumerate(result.opinions[position])))


#: ``model.compact``'s encoders, imported by the first ``trial_record``: the writer
#: process imports this module and no model; an import per trial would cost a microsecond.
_ENCODERS: tuple[Callable[[Trace], bytes], Callable[[Usage], str]] | None = None


def _encoders() -> tuple[Callable[[Trace], bytes], Callable[[Usage], str]]:
    global _ENCODERS
    if _ENCODERS is None:
        from ...model.compact import trace_json, usage_json

        _ENCODERS = (trace_json, usage_json)
    return _ENCODERS


#: The usage JSON of a trial that reported none (most), as ``Usage().model_dump_json()``
#: writes it: written once, not per trial.
UNREPORTED_USAGE = '{"input_tokens":null,"output_tokens":null,"cost_usd":null}'


@dataclass(frozen=True)
class SpilledBody:
    """A document written to a file (``documents.Spilled``), and the digest of its bytes.

    How a battery hands the store its report (and its suite, at
    registration): written a case at a time and hashed as it goes, so the
    process that ran the battery never holds the text of a large one; the
    store reads the file a part at a time (``run_texts``).
    """

    path: str
    digest: str


def sealed_columns(report: Report, body: bytes | SpilledBody) -> dict[str, Any]:
    """The ``runs`` columns known once a run is over (``body``: ``documents.report_body``).

    A ``SpilledBody`` goes in ``report`` as it is: the store reads its file
    when it seals (``run_record.seal_run``).
    """
    scores = report.scores
    return {
        "finished_at": report.finished_at, "target_facets": report.target.facets,
        "score_public": scores.public, "score_hidden": scores.hidden,
        "score_overall": scores.overall, "passed": scores.passed,
        "interrupted": report.interrupted,
        "report": body.decode("utf-8") if isinstance(body, bytes) else body,
        "report_digest": digest_bytes(body) if isinstance(body, bytes) else body.digest,
        "listing": json.dumps(listing_of(report.model_dump(mode="json", include=_LISTED)),
                              sort_keys=True),
    }


#: The parts of a report that ``listing_of`` reads.
_LISTED = {"evidence", "scores", "counts", "cost"}


def listing_of(report: dict[str, Any]) -> dict[str, Any]:
    """What a list of runs shows beyond the scores, from a report's JSON (``runs.listing``).

    Counts only, never a case: a hidden case's content has no place in it.
    """
    cost = report.get("cost") or {}
    tokens = [cost.get("input_tokens"), cost.get("output_tokens")]
    counts = {split: {key: int(value) for key, value in (numbers or {}).items()
                      if key in ("total", "passed", "failed", "inconclusive", "broken")}
              for split, numbers in (report.get("counts") or {}).items()
              if split in ("public", "hidden", "synthetic")}
    return {
        "evidence": report.get("evidence"),
        "flags": [str(flag) for flag in (report.get("scores") or {}).get("flags") or []],
        "cost_usd": cost.get("usd"),
        "judge_usd": cost.get("judge_usd"),
        "tokens": None if all(t is None for t in tokens) else sum(t or 0 for t in tokens),
        "trials": cost.get("trials"),
        "counts": counts,
    }


class Holder(NamedTuple):
    """The run that holds a battery's window already: its id and status (``open``, ``sealed``)."""

    run_id: str
    status: str


class Sink(Protocol):
    """Where a recorder's transactions happen (``run_record.LocalSink``, ``writer.ProcessSink``)."""

    def register(self, row: dict[str, Any], content: bytes) -> Holder | None:
        """Open the run (its row) and append ``run-registered`` (``content``).

        None once registered; for a run with a window that another run holds
        already, that run (and nothing was written).
        """

    def write(self, run_id: str, records: list[TrialRecord]) -> None:
        """Write one batch of trials with their ledger entries."""

    def seal(self, run_id: str, columns: dict[str, Any], content: bytes,
             queue: Sequence[dict[str, Any]] = ()) -> tuple[int, str]:
        """Append ``run-sealed`` (``content``), complete the row, queue ``queue`` for
        review (``review.queue.sealed_items``), sign a head; the seal."""

    def close(self) -> None:
        """Finish every write handed over; raise what failed."""

"""The documents a stored run keeps: its report's bytes, the suite it ran, its summary.

Contents (docs/decisions/0014-ledger-wiring.md) live in the store's blobs,
never outside it: they keep real case ids (hidden ones too) so that replay
can match them; the ledger entries and the report's ``seal`` carry only
digests, indexes and hashes. What a run registers before its first trial is
the engine's (``engine.record.registration``).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from pydantic import TypeAdapter

from ...canonical import digest_bytes
from ...model.compact import fast_json
from ...model.packed import PackedCases
from ...model.result import Report, report_json
from ...model.suite import Assertion, Case, Suite
from .trials import SpilledBody


def stored_suite_json(suite: Suite) -> str:
    """The suite that ran, as ``runs.suite`` keeps it for replay (hidden cases included).

    ``{"suite": <the model's JSON by alias>, "files": {case_id: [file per
    assertion]}}``: ``Assertion.file`` is excluded from the model's dump (it
    takes no part in digests) but graders resolve relative paths against it,
    so replay needs it to grade as the run did. Kept inside the store only,
    like the full report. The text of ``stored_suite_pieces``, joined: for a
    large suite, write the pieces instead.
    """
    return "".join(stored_suite_pieces(suite))


#: Cases dumped at a time (one call into pydantic's serializer each).
_BLOCK = 1000
_CASES: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


def stored_suite_pieces(suite: Suite) -> Iterator[str]:
    """``stored_suite_json``'s text in pieces of a thousand cases, never all of it at once.

    The suite's JSON is pydantic's, as ``model_dump_json(by_alias=True,
    fallback=repr)`` writes it; ``cases`` is its last field, so the rest is
    dumped first and the cases follow it a block at a time. The ``files``
    mapping is written as ``json.dumps`` writes a dict. The cases are read
    twice (once per part) rather than held: a packed suite's cases are made
    as they are read.
    """
    head = suite.model_dump_json(by_alias=True, fallback=repr, exclude={"cases"})
    yield '{"suite":' + head[:-1] + ',"cases":['
    cases = suite.cases
    for start in range(0, len(cases), _BLOCK):
        yield ("," if start else "") + _cases_json(cases, start)[1:-1]
    yield ']},"files":{'
    files: Iterator[tuple[str, list[str | None]]] = cases.assertion_files() \
        if isinstance(cases, PackedCases) else \
        ((case.id, [a.file for a in case.expect]) for case in cases)
    first = True
    while named := list(islice(files, _BLOCK)):
        by_id = dict(named)  # one encoder call for the block: ids are unique in a suite
        yield ("" if first else ", ") + (
            _FILES(by_id)[1:-1] if len(by_id) == len(named) else ", ".join(
                f"{json.dumps(case_id, ensure_ascii=False)}: "
                f"{json.dumps(names, ensure_ascii=False)}" for case_id, names in named))
        first = False
    yield "}}"


#: ``json.dumps(value, ensure_ascii=False)``, its encoder made once.
_FILES = json.JSONEncoder(ensure_ascii=False).encode


def _cases_json(cases: Sequence[Case], start: int) -> str:
    """The JSON list pydantic writes of the block of cases at ``start`` (``_CASES``).

    Packed cases are written by orjson from their packed values, the same bytes
    (``model.compact``) without making each case; pydantic writes a block with a
    case kept whole or a value orjson would write otherwise.
    """
    stop = min(start + _BLOCK, len(cases))
    if isinstance(cases, PackedCases):
        dumped = cases.dumped(start, stop)
        fast = fast_json(dumped) if dumped is not None else None
        if fast is not None:
            return fast.decode()
    return _CASES.dump_json(list(cases[start:stop]), by_alias=True, fallback=repr).decode()


def load_stored_suite(data: dict[str, Any]) -> Suite:
    """The inverse of ``stored_suite_json``: the suite model with each assertion's file restored.

    Assertions are rebuilt as models first: ``Case`` reads plain mappings in
    the one-key YAML form, not the dumped ``{check, arg, …}`` form.
    """
    body = dict(data["suite"])
    files: dict[str, list[str | None]] = data.get("files") or {}
    cases = []
    for case in body.get("cases", []):
        names = files.get(case["id"]) or []
        expect = [Assertion.model_validate({**a, "file": names[i] if i < len(names) else None})
                  for i, a in enumerate(case.get("expect", []))]
        cases.append({**case, "expect": expect})
    body["cases"] = cases
    return Suite.model_validate(body)


def report_body(report: Report) -> bytes:
    """The bytes the store keeps of a FULL report: its compact JSON with ``seal`` null.

    The seal cannot cover itself, so it is kept beside the report, not in it.
    These bytes are the record (``runs.report``) and ``report_digest`` is their
    SHA-256: whoever checks the seal hashes the stored bytes, and need not
    re-serialise anything (docs/decisions/0017-recording.md). A report loaded
    back gives the same bytes again.
    """
    body = bytearray()
    for piece in report_json(report.model_copy(update={"seal": None})):
        body += piece
    return bytes(body)


#: The largest report or suite kept whole in its ``runs`` column (bytes of JSON); a
#: larger one is kept in parts (``run_texts``), read from its file a part at a time.
INLINE_BYTES = 4 * 1024 * 1024


class Spilled:
    """Text written to a temporary file a piece at a time, for the store to read.

    ``body`` names the file and the SHA-256 of its bytes (``records.SpilledBody``),
    what a sink hands the store (which keeps it in parts, ``run_texts``). The
    file goes when this is closed (or collected): the store has read it by then.
    """

    def __init__(self, pieces: Iterable[bytes | str], prefix: str) -> None:
        sha = hashlib.sha256()
        self.size = 0
        self._file = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".json")
        try:
            for piece in pieces:
                data = piece.encode("utf-8") if isinstance(piece, str) else piece
                self._file.write(data)
                sha.update(data)
                self.size += len(data)
            self._file.flush()
        except BaseException:
            self._file.close()
            raise
        self.body = SpilledBody(self._file.name, "sha256:" + sha.hexdigest())

    def handed(self) -> SpilledBody | bytes:
        """What a sink is given: the file, or for a small document its bytes.

        A document of up to ``INLINE_BYTES`` is stored in its ``runs`` column as
        it always was; a larger one in parts (``run_texts``).
        """
        if self.size > INLINE_BYTES:
            return self.body
        self._file.seek(0)
        return self._file.read()

    def close(self) -> None:
        """Remove the file."""
        self._file.close()

    def __enter__(self) -> Spilled:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spill_report(report: Report) -> Spilled:
    """``report_body(report)`` written to a temporary file a case at a time, and its digest."""
    return Spilled(report_json(report.model_copy(update={"seal": None})), "assay-report-")


def spill_suite(suite: Suite) -> Spilled:
    """``stored_suite_json(suite)`` written to a temporary file a thousand cases at a time."""
    return Spilled(stored_suite_pieces(suite), "assay-suite-")


def report_digest(report: Report) -> str:
    """``sha256:`` of ``report_body(report)``: what the run-sealed entry records."""
    return digest_bytes(report_body(report))


def summary(report: Report) -> dict[str, Any]:
    """What a receipt says of a run: from the REDACTED report, digests and scores only."""
    scores = report.scores
    return {
        "run_id": report.run_id,
        "suite": {"id": report.suite.id, "digest": report.suite.digest},
        "hidden_set": report.suite.hidden_set,
        "target": {"uri": report.target.uri, "digest": report.target.digest},
        "started_at": report.started_at, "finished_at": report.finished_at,
        "scores": {"public": scores.public, "hidden": scores.hidden, "overall": scores.overall,
                   "pass_mark": scores.pass_mark},
        "passed": scores.passed,
    }

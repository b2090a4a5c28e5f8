"""The documents a stored run keeps: its report's bytes, the suite it ran, its summary.

Contents (docs/decisions/0014-ledger-wiring.md) live in the store's blobs,
never outside it: they keep real case ids (hidden ones too) so that replay
can match them; the ledger entries and the report's ``seal`` carry only
digests, indexes and hashes. What a run registers before its first trial is
the engine's (``engine.record.registration``).
"""

from __future__ import annotations

import json
from typing import Any

from ..canonical import digest_bytes
from ..model.result import Report, report_json
from ..model.suite import Assertion, Suite
from .records import SpilledBody


def stored_suite_json(suite: Suite) -> str:
    """The suite that ran, as ``runs.suite`` keeps it for replay (hidden cases included).

    ``{"suite": <the model's JSON by alias>, "files": {case_id: [file per
    assertion]}}``: ``Assertion.file`` is excluded from the model's dump (it
    takes no part in digests) but graders resolve relative paths against it,
    so replay needs it to grade as the run did. Kept inside the store only,
    like the full report. Written by pydantic's serializer: for ten thousand
    cases, building the document in Python first was most of what
    registering a run cost.
    """
    files = {case.id: [a.file for a in case.expect] for case in suite.cases}
    body = suite.model_dump_json(by_alias=True, fallback=repr)
    return f'{{"suite":{body},"files":{json.dumps(files, ensure_ascii=False)}}}'


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


def spill_body(report: Report, folder: str | None = None) -> SpilledBody:
    """Write ``report_body(report)`` to a new file in ``folder`` (default: the temporary one)."""
    import hashlib
    import os
    import tempfile

    sha = hashlib.sha256()
    handle, path = tempfile.mkstemp(prefix="assay-report-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            for piece in report_json(report.model_copy(update={"seal": None})):
                out.write(piece)
                sha.update(piece)
    except BaseException:
        os.unlink(path)
        raise
    return SpilledBody(path, "sha256:" + sha.hexdigest())


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

"""What a stored run writes to the ledger: registered, one verdict per trial, sealed.

Contents (docs/decisions/0014-ledger-wiring.md) live in the store's blobs,
never outside it: they keep real case ids (hidden ones too) so that replay
can match them; the ledger entries and the report's ``seal`` carry only
digests, indexes and hashes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..canonical import digest, digest_bytes
from ..model.result import CaseResult, Report
from ..model.suite import Assertion, Case, Suite
from .chain import Kind

if TYPE_CHECKING:
    from ..engine import RunStart
    from ..suites import LoadedSuite
    from ..targets import Target
    from .ledger import Ledger


def _thresholds(cases: list[Case]) -> dict[str, dict[str, float]]:
    """Each rate-based assertion's threshold (1.0 when unset), by case id and position."""
    from ..checks import lookup

    found: dict[str, dict[str, float]] = {}
    for case in cases:
        for position, assertion in enumerate(case.expect):
            check = lookup(assertion.check)
            if check is not None and check.family == "quality":
                value = 1.0 if assertion.threshold is None else assertion.threshold
                found.setdefault(case.id, {})[str(position)] = value
    return found


def registration(start: RunStart, loaded: LoadedSuite, target: Target,
                 trials_per_case: int) -> dict[str, Any]:
    """The ``run-registered`` content: fixed before any trial runs.

    Digests, never hidden content: the thresholds of hidden cases' rate-based
    assertions are committed to by digest only; public ones are written out.
    """
    suite = loaded.suite
    hidden = _thresholds(suite.hidden_cases())
    return {
        "run_id": start.run_id,
        "suite": {"id": loaded.suite.id, "digest": loaded.digest},
        "hidden_set": loaded.hidden_digest,
        "pass_mark": suite.pass_mark,
        "thresholds": {"public": _thresholds(suite.public_cases()),
                       "hidden": digest(hidden) if hidden else None},
        "trials_per_case": trials_per_case,
        "target": {"uri": target.uri, "digest": target.digest()},
        "seed": start.seed,
        "started_at": start.started_at,
    }


def stored_suite(loaded: LoadedSuite) -> dict[str, Any]:
    """The suite that ran, as ``runs.suite`` keeps it for replay (hidden cases included).

    ``{"suite": <model_dump by alias>, "files": {case_id: [file per assertion]}}``:
    ``Assertion.file`` is excluded from the model's dump (it takes no part in
    digests) but graders resolve relative paths against it, so replay needs it
    to grade as the run did. Kept inside the store only, like the full report.
    """
    suite = loaded.suite
    return {
        "suite": suite.model_dump(mode="json", by_alias=True, fallback=repr),
        "files": {case.id: [a.file for a in case.expect] for case in suite.cases},
    }


def load_stored_suite(data: dict[str, Any]) -> Suite:
    """The inverse of ``stored_suite``: the suite model with each assertion's file restored.

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
    return report.model_copy(update={"seal": None}).model_dump_json(by_alias=True).encode()


def report_digest(report: Report) -> str:
    """``sha256:`` of ``report_body(report)``: what the run-sealed entry records."""
    return digest_bytes(report_body(report))


def seal(ledger: Ledger, report: Report) -> dict[str, Any]:
    """Append one ``trial-verdict`` per trial and ``run-sealed``, in one transaction.

    Returns the report's ``seal``: the run-sealed entry's index and hash.
    """
    items: list[tuple[Kind, Any]] = []
    for case in report.cases:
        if not isinstance(case, CaseResult):
            continue  # a redacted report has no trials to record
        for trial in case.trials:
            items.append(("trial-verdict", {
                "run_id": report.run_id, "case_id": case.id, "n": trial.n,
                "outcome": trial.outcome, "verdicts": [v.outcome for v in trial.verdicts],
            }))
    items.append(("run-sealed", {"run_id": report.run_id,
                                 "report_digest": report_digest(report)}))
    sealed = ledger.append_many(items)[-1]
    return {"entry": sealed.index, "hash": sealed.hash}

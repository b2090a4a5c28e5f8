"""``--json``: each line is the bytes the seal covers with the seal in place, on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.grading import RunInfo, build_report, fold_case, fold_trial
from assay.model import Case, Evidence, Report, SuiteRef, TargetRef, Verdict
from assay.reports import write_json
from assay.reports.json_report import report_line
from assay.store.runs.documents import report_body

from ..fuzz_corpus import HOSTILE, NAME


def sealed_report(note: str) -> Report:
    verdict = Verdict(assertion="equals $.out", check="equals", outcome="fail",
                      evidence=Evidence.OBSERVED, note=note)
    cases = [fold_case(Case(id="id " + NAME), [fold_trial(1, [verdict])]),
             fold_case(Case(id="ok"), [fold_trial(1, [verdict.model_copy(
                 update={"outcome": "pass", "note": ""})])])]
    info = RunInfo(run_id="run-1", suite=SuiteRef(id="fuzz/x@1", digest="sha256:a"),
                   target=TargetRef(uri="python:a:b", digest="sha256:b"),
                   started_at="2025-01-01T00:00:00Z", finished_at="2025-01-01T00:00:01Z",
                   trials_per_case=1, pass_mark=1.0, seed=1, interrupted=False)
    return build_report(info, cases).model_copy(
        update={"seal": {"entry": 12, "hash": "sha256:" + "ab" * 32}})


@pytest.mark.parametrize("note", ["plain", HOSTILE, "line\u2028sep\u2029par\u0085nel", "é 漢 🙂"],
                         ids=["plain", "hostile", "line-separators", "unicode"])
def test_the_line_is_the_stored_bytes_with_the_seal_in_place(note: str) -> None:
    report = sealed_report(note)
    line = report_line(report)
    body = report_body(report).decode()
    assert body.endswith(',"seal":null}')
    stored = body.removesuffix(',"seal":null}') + ',"seal":' + json.dumps(
        report.seal, ensure_ascii=False, separators=(",", ":")) + "}"
    for raw, escaped in (("\u2028", "\\u2028"), ("\u2029", "\\u2029"),
                         ("\u0085", "\\u0085")):
        stored = stored.replace(raw, escaped)
    assert line == stored
    assert "\n" not in line and "\u2028" not in line
    assert json.loads(line)["seal"] == {"entry": 12, "hash": "sha256:" + "ab" * 32}


def test_write_json_writes_a_line_per_report(tmp_path: Path) -> None:
    first, second = sealed_report("one"), sealed_report("two")
    write_json([first, second], tmp_path / "r.json")
    lines = (tmp_path / "r.json").read_text().splitlines()
    assert lines == [report_line(first), report_line(second)]

"""``--json`` written from the bytes the seal covers: the very line a fresh serialisation gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.grading import RunInfo, build_report, fold_case, fold_trial
from assay.model import Case, Evidence, Report, SuiteRef, TargetRef, Verdict
from assay.reports import write_json
from assay.reports.json_report import report_line, sealed_line
from assay.store.documents import report_body

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
def test_the_spliced_line_is_the_serialised_line(note: str) -> None:
    report = sealed_report(note)
    line = sealed_line(report, report_body(report))
    assert line is not None
    assert line == report_line(report)
    assert "\n" not in line and "\u2028" not in line
    assert json.loads(line)["seal"] == {"entry": 12, "hash": "sha256:" + "ab" * 32}


def test_bytes_of_another_form_are_not_spliced() -> None:
    report = sealed_report("x")
    assert sealed_line(report.model_copy(update={"seal": None}), report_body(report)) is None
    assert sealed_line(report, report.model_dump_json(by_alias=True).encode()) is None


def test_write_json_takes_a_known_line_and_serialises_the_rest(tmp_path: Path) -> None:
    first, second = sealed_report("one"), sealed_report("two")
    known = sealed_line(first, report_body(first))
    write_json([first, second], tmp_path / "r.json", [known, None])
    lines = (tmp_path / "r.json").read_text().splitlines()
    assert lines == [report_line(first), report_line(second)]

"""Every reporter on its own: files first, then the terminal; one failing loses no other."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console

from assay.grading import RunInfo, build_report, fold_case, fold_trial, redact
from assay.model import Case, Evidence, Report, SuiteRef, TargetRef, Verdict
from assay.reports import markdown, write_json, write_junit
from assay.reports.emit import ReportFiles, emit

from ..fuzz_corpus import HOSTILE, MEGABYTE, NAME, assert_inert

CANARY = "CANARY-e817"


def hostile_report() -> Report:
    """A run whose ids, notes and reasons hold the whole corpus, with a hidden case."""
    note = Verdict(assertion="equals $.out", check="equals", outcome="fail",
                   evidence=Evidence.OBSERVED, note=HOSTILE + MEGABYTE)
    cases = [
        fold_case(Case(id="id " + NAME), [fold_trial(1, [note])]),
        fold_case(Case(id="broken"), [fold_trial(1, [], broken=True, reason=HOSTILE)]),
        fold_case(Case(id=CANARY + NAME, split="hidden"),
                  [fold_trial(1, [note.model_copy(update={"note": CANARY})])]),
    ]
    info = RunInfo(run_id="run-1", suite=SuiteRef(id="fuzz/x@1", digest="sha256:a"),
                   target=TargetRef(uri="python:a:b " + HOSTILE, digest="sha256:b"),
                   started_at="2025-01-01T00:00:00Z", finished_at="2025-01-01T00:00:01Z",
                   trials_per_case=1, pass_mark=1.0, seed=1, interrupted=False)
    return redact(build_report(info, cases))


class FullDisk(io.TextIOBase):
    """A stream every write to fails, as a terminal on a full disk or a closed pipe does."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


def consoles(out_file: io.TextIOBase | None = None) -> tuple[Console, Console, io.StringIO]:
    err = io.StringIO()
    out = Console(file=out_file or io.StringIO(), width=120, highlight=False)
    return out, Console(file=err, width=200, highlight=False), err


def test_every_file_is_written_and_then_the_terminal(tmp_path: Path) -> None:
    report = hostile_report()
    buffer = io.StringIO()
    out, err, err_text = consoles(buffer)
    files = ReportFiles(tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md")
    assert emit([report, report], files, out, err)
    lines = files.json.read_text().splitlines()  # type: ignore[union-attr]
    assert [json.loads(line)["schema"] for line in lines] == ["assay.report/1"] * 2
    ET.parse(files.junit)  # type: ignore[arg-type]
    text = buffer.getvalue()
    assert_inert(text)
    assert "[/INST]" in text and "runs" in text and err_text.getvalue() == ""
    for written in (*tmp_path.iterdir(), ):
        assert CANARY not in written.read_text(encoding="utf-8")
    assert CANARY not in text


def test_a_failing_terminal_loses_no_file(tmp_path: Path) -> None:
    out, err, err_text = consoles(FullDisk())
    files = ReportFiles(tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md")
    assert not emit([hostile_report()], files, out, err)
    assert all(path.exists() for path in (files.json, files.junit, files.markdown))  # type: ignore[union-attr]
    said = err_text.getvalue()
    assert "report failure: the terminal report of run" in said and "No space left" in said


def test_a_file_that_cannot_be_written_loses_no_other_report(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    previous = tmp_path / "old.md"
    out, err, err_text = consoles()
    files = ReportFiles(tmp_path / "taken" / "r.json", tmp_path / "r.xml", previous)
    assert not emit([hostile_report()], files, out, err)
    assert (tmp_path / "r.xml").exists() and previous.exists()
    assert "report failure: --json" in err_text.getvalue()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_json_is_written_even_with_a_lone_surrogate_left_in_an_id(tmp_path: Path) -> None:
    # Traces are made storable where they are made; a case id comes from a suite file,
    # whose YAML escapes can still spell a lone surrogate.
    report = hostile_report()
    case = report.cases[0].model_copy(update={"id": "id \ud800"})
    report = report.model_copy(update={"cases": [case, *report.cases[1:]]})
    write_json([report], tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["cases"][0]["id"] == "id \ud800"
    write_junit([report], tmp_path / "r.xml")
    assert ET.parse(tmp_path / "r.xml").getroot().find(".//testcase") is not None
    markdown([report]).encode("utf-8")


def test_junit_is_written_a_case_at_a_time_as_the_tree_would_be(tmp_path: Path) -> None:
    from assay.reports.junit import junit_root

    report = hostile_report()
    write_junit([report, report], tmp_path / "r.xml")
    streamed = (tmp_path / "r.xml").read_bytes()
    whole = ET.tostring(junit_root([report, report]), encoding="utf-8", xml_declaration=True)
    assert ET.canonicalize(streamed, strip_text=True) == ET.canonicalize(whole, strip_text=True)
    suites = ET.fromstring(streamed).findall("testsuite")
    assert len(suites) == 2 and suites[0].get("tests") == str(len(report.cases))
    failing = sum(c.outcome in ("fail", "inconclusive") for c in report.cases)
    assert failing and suites[0].get("failures") == str(failing)

"""``--junit FILE``: JUnit XML, one testcase per case; hidden ones carry no content.

XML 1.0 has no form for most control characters (not even escaped), so
every text that is not ours goes through ``safe.inert`` first: the file stays
well-formed whatever an agent wrote.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import quoteattr

from .common import changes_text, conversation_lines, write_file
from .safe import inert

if TYPE_CHECKING:
    from ..model import CaseResult, HoldoutResult, Report

#: What an attribute value may not hold as it is (quoteattr does &, <, > and quotes).
_ATTRIBUTE = {"\n": "&#10;", "\r": "&#13;", "\t": "&#09;"}


def junit_root(reports: list[Report]) -> ET.Element:
    """The ``<testsuites>`` element, one ``<testsuite>`` per run, held whole.

    fail → ``<failure>``, broken → ``<error>``, inconclusive → ``<failure
    type="inconclusive">``: an undecided case must not read as a pass in CI.
    ``--junit`` writes the same XML a case at a time (``junit_pieces``).
    """
    root = ET.Element("testsuites", name="assay")
    for report in reports:
        suite = ET.SubElement(root, "testsuite", attrib=_suite_attributes(report))
        for case in report.cases:
            _testcase(suite, report, case)
    ET.indent(root)
    return root


def _suite_attributes(report: Report) -> dict[str, str]:
    """A run's ``<testsuite>`` attributes; its counts from the report's tally (``counts``)."""
    counts = report.counts.values()
    return {
        "name": inert(f"{report.suite.id} [{report.target.uri}]"),
        "tests": str(len(report.cases)),
        "failures": str(sum(c.failed + c.inconclusive for c in counts)),
        "errors": str(sum(c.broken for c in counts)),
        "skipped": "0",
        "timestamp": report.started_at,
        "time": f"{_duration(report):.3f}",
    }


def _duration(report: Report) -> float:
    from ..model import CaseResult

    return sum(t.duration_s for c in report.cases if isinstance(c, CaseResult) for t in c.trials)


def junit_pieces(reports: list[Report]) -> Iterator[bytes]:
    """The XML ``junit_root`` makes, a case at a time: what ``--junit`` writes.

    A run of 100,000 cases would otherwise hold a tree of them all, on top of
    reading each case four times from the run's spool: here each case is
    read twice (its time for the suite's, then its testcase) and let go.
    """
    yield b"<?xml version='1.0' encoding='utf-8'?>\n<testsuites name=\"assay\">\n"
    for report in reports:
        opening = " ".join(f"{key}={quoteattr(value, _ATTRIBUTE)}"
                           for key, value in _suite_attributes(report).items())
        yield f"  <testsuite {opening}>\n".encode("utf-8", "xmlcharrefreplace")
        for case in report.cases:
            holder = ET.Element("testsuite")
            _testcase(holder, report, case)
            [element] = holder
            ET.indent(element, level=2)
            yield b"    " + ET.tostring(element, encoding="utf-8", xml_declaration=False) + b"\n"
        yield b"  </testsuite>\n"
    yield b"</testsuites>"


def _testcase(parent: ET.Element, report: Report, case: CaseResult | HoldoutResult) -> None:
    element = ET.SubElement(parent, "testcase", classname=inert(report.suite.id),
                            name=inert(case.id))
    from ..model import HoldoutResult

    if isinstance(case, HoldoutResult):
        if case.outcome != "pass":
            tag = "error" if case.outcome == "broken" else "failure"
            ET.SubElement(element, tag, type=case.outcome)
        return
    element.set("time", f"{sum(t.duration_s for t in case.trials):.3f}")
    if case.score is not None:  # the number opinions gave, beside the outcome (SPEC §9)
        properties = ET.SubElement(element, "properties")
        ET.SubElement(properties, "property", name="score", value=f"{case.score:.4f}")
    if case.outcome == "pass":
        return
    tag = "error" if case.outcome == "broken" else "failure"
    detail = ET.SubElement(element, tag, type=case.outcome,
                           message=inert(case.reason or case.outcome))
    lines = []
    for trial in case.trials:
        lines.append(f"trial {trial.n}: {trial.outcome}" + (f" — {trial.reason}" if trial.reason
                                                               else ""))
        for verdict in trial.verdicts:
            if verdict.outcome != "pass":
                lines.append(f"  {verdict.outcome}: {verdict.assertion}: {verdict.note}")
        changed = changes_text(trial)
        if changed is not None:
            lines.append(f"  workspace: {changed}")
        if trial.turns and trial.outcome != "pass":  # the conversation (SPEC §16)
            lines += ["  conversation:", *conversation_lines(trial, "    ")]
    detail.text = inert("\n".join(lines))


def write_junit(reports: list[Report], path: Path) -> None:
    """Write JUnit XML to ``path``, a case at a time (whole or not at all: ``write_file``)."""
    write_file(path, junit_pieces(reports))

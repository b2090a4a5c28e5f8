"""``--junit FILE``: JUnit XML, one testcase per case; hidden ones carry no content.

XML 1.0 has no form for most control characters (not even escaped), so
every text that is not ours goes through ``safe.inert`` first: the file stays
well-formed whatever an agent wrote.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from .common import write_file
from .safe import inert

if TYPE_CHECKING:
    from ..model import CaseResult, HoldoutResult, Report


def junit_tree(reports: list[Report]) -> ET.ElementTree:
    """``<testsuites>`` with one ``<testsuite>`` per run (see ``junit_root``)."""
    return ET.ElementTree(junit_root(reports))


def junit_root(reports: list[Report]) -> ET.Element:
    """The ``<testsuites>`` element, one ``<testsuite>`` per run.

    fail → ``<failure>``, broken → ``<error>``, inconclusive → ``<failure
    type="inconclusive">``: an undecided case must not read as a pass in CI.
    """
    root = ET.Element("testsuites", name="assay")
    for report in reports:
        cases = report.cases
        suite = ET.SubElement(
            root, "testsuite",
            name=inert(f"{report.suite.id} [{report.target.uri}]"),
            tests=str(len(cases)),
            failures=str(sum(c.outcome in ("fail", "inconclusive") for c in cases)),
            errors=str(sum(c.outcome == "broken" for c in cases)),
            skipped="0",
            timestamp=report.started_at,
            time=f"{_duration(report):.3f}",
        )
        for case in cases:
            _testcase(suite, report, case)
    ET.indent(root)
    return root


def _duration(report: Report) -> float:
    from ..model import CaseResult

    return sum(t.duration_s for c in report.cases if isinstance(c, CaseResult) for t in c.trials)


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
    detail.text = inert("\n".join(lines))


def write_junit(reports: list[Report], path: Path) -> None:
    """Write JUnit XML to ``path``."""
    write_file(path, ET.tostring(junit_root(reports), encoding="utf-8", xml_declaration=True))

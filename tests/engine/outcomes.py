"""What engine tests read from a report: its public cases by id."""

from __future__ import annotations

from assay.model import CaseResult, Report


def by_id(report: Report) -> dict[str, CaseResult]:
    """The report's cases by id; every one must be a public case result."""
    cases = {}
    for case in report.cases:
        assert isinstance(case, CaseResult)
        cases[case.id] = case
    return cases

"""What every renderer shows the same way: outcomes, numbers, a case's reason."""

from __future__ import annotations

from ..model import CaseResult, HoldoutResult, Report


def pct(value: float | None) -> str:
    """A score as a percentage, or an em dash when there is none."""
    return "—" if value is None else f"{value * 100:.1f}%"


def why(case: CaseResult | HoldoutResult) -> str:
    """A public case's reason for not passing; a hidden case has none to show."""
    if isinstance(case, HoldoutResult):
        return ""
    return case.reason or ""


def verdict_line(report: Report) -> str:
    """``PASSED`` or ``NOT PASSED`` with why, in a few words."""
    s = report.scores
    if s.passed:
        return "PASSED"
    reasons = []
    if report.interrupted:
        reasons.append("interrupted")
    if s.overall is not None and s.overall < s.pass_mark - 1e-9:
        reasons.append(f"overall {pct(s.overall)} under the pass mark {pct(s.pass_mark)}")
    undecided = sum(c.inconclusive + c.broken for k, c in report.counts.items() if k != "synthetic")
    if undecided:
        reasons.append(f"{undecided} case(s) inconclusive or broken")
    if s.overall is None:
        reasons.append("no cases")
    return "NOT PASSED: " + "; ".join(reasons or ["see cases"])

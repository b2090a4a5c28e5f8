"""The terminal: a table of cases and the score lines, with Rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import CaseResult, Report
from .common import pct, verdict_line, why
from .cost import cost_line, usd_cell

if TYPE_CHECKING:
    from rich.console import Console

STYLE = {"pass": "green", "fail": "red", "inconclusive": "yellow", "broken": "magenta"}
MAX_ROWS = 200


def print_report(console: Console, report: Report) -> None:
    """The cases (hidden ones as holdout-N only) and the scores of one run."""
    from rich.table import Table

    table = Table(title=f"{report.suite.id} · {report.target.uri}", title_justify="left",
                  show_edge=False, pad_edge=False)
    table.add_column("case")
    table.add_column("split")
    table.add_column("outcome")
    table.add_column("pass@1", justify="right")
    table.add_column("pass^k", justify="right")
    table.add_column("why", overflow="fold")
    interesting = [c for c in report.cases if c.outcome != "pass"]
    shown = report.cases if len(report.cases) <= MAX_ROWS else interesting[:MAX_ROWS]
    for case in shown:
        outcome = f"[{STYLE[case.outcome]}]{case.outcome}[/]"
        if isinstance(case, CaseResult):
            table.add_row(case.id, case.split, outcome, f"{case.pass_at_1:.2f}",
                          f"{case.pass_hat_k:.2f}", why(case))
        else:
            table.add_row(case.id, "hidden", outcome, "", "", "")
    console.print(table)
    if len(shown) < len(report.cases):
        console.print(f"… {len(report.cases) - len(shown)} more case(s) passed, not listed")
    print_scores(console, report)


def print_scores(console: Console, report: Report) -> None:
    """Public and hidden side by side, never blended; then the verdict."""
    s, counts = report.scores, report.counts
    pub, hid = counts["public"], counts["hidden"]
    source = f", {report.suite.hidden_source}" if report.suite.hidden_source else ""
    console.print(
        f"public {pct(s.public)} ({pub.passed}/{pub.total})   "
        f"hidden {pct(s.hidden)} ({hid.passed}/{hid.total}{source})   "
        f"overall {pct(s.overall)}   pass mark {pct(s.pass_mark)}"
    )
    if s.synthetic is not None:
        console.print(f"synthetic {pct(s.synthetic)} (reported apart)")
    rel = report.reliability.get("public")
    if rel is not None and rel.pass_at_1 is not None:
        se = f" ± {rel.se:.3f} (SE, clustered by case)" if rel.se is not None else ""
        console.print(f"pass@1 public {rel.pass_at_1:.3f}{se} · {report.trials_per_case} "
                      f"trial(s) per case: {report.evidence} evidence")
    console.print(f"{cost_line(report.cost)} · run {report.run_id}", markup=False)
    if s.flags:
        console.print("flags: " + ", ".join(f"[bold yellow]{f}[/]" for f in s.flags))
    style = "bold green" if s.passed else "bold red"
    console.print(f"[{style}]{verdict_line(report)}[/]")


def print_side_by_side(console: Console, reports: list[Report]) -> None:
    """Several runs (targets or suites) in one table, one row each."""
    from rich.table import Table

    table = Table(title="runs", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("suite", "target", "public", "hidden", "overall", "cost $", "result"):
        table.add_column(column)
    for r in reports:
        s = r.scores
        result = "[green]passed[/]" if s.passed else "[red]not passed[/]"
        table.add_row(r.suite.id, r.target.uri, pct(s.public), pct(s.hidden), pct(s.overall),
                      usd_cell(r.cost), result)
    console.print(table)

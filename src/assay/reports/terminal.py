"""The terminal: a table of cases and the score lines, with Rich.

Everything that is not ours (suite and case ids, target URIs, reasons that
quote an agent, run ids read back from the store) goes into the table as an
inert ``Text`` (``safe.shown``), never into a markup string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import CaseResult, Report, TrialResult
from .common import (
    changed_cases,
    has_scores,
    listed_cases,
    listed_turns,
    pct,
    score_cell,
    talked_cases,
    trials_text,
    turn_lines,
    verdict_line,
    why,
)
from .cost import cost_line, judge_cost_line, simulator_cost_line, usd_cell
from .safe import inert, print_table, shown

if TYPE_CHECKING:
    from rich.console import Console

STYLE = {"pass": "green", "fail": "red", "inconclusive": "yellow", "broken": "magenta"}
#: Characters of a reason a table cell shows (the JSON report has all of it).
MAX_WHY = 500


def print_report(console: Console, report: Report) -> None:
    """The cases (hidden ones as holdout-N only) and the scores of one run."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=shown(f"{report.suite.id} · {report.target.uri}", one_line=True),
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("case")
    table.add_column("split")
    table.add_column("outcome")
    table.add_column("pass@1", justify="right")
    table.add_column("pass^k", justify="right")
    scored = has_scores(report)
    if scored:  # only when opinions gave numbers: other tables keep their columns
        table.add_column("score", justify="right")
    table.add_column("why", overflow="fold")
    listed, left_out = listed_cases(report)
    for case in listed:
        outcome = Text(case.outcome, style=STYLE[case.outcome])
        name = shown(case.id, one_line=True)
        if isinstance(case, CaseResult):
            extra = [score_cell(case)] if scored else []
            table.add_row(name, case.split, outcome, f"{case.pass_at_1:.2f}",
                          f"{case.pass_hat_k:.2f}", *extra,
                          shown(why(case), one_line=True, limit=MAX_WHY))
        else:
            table.add_row(name, "hidden", outcome, "", "", *([""] if scored else []), "")
    print_table(console, table)
    if left_out is not None:
        console.print(left_out)
    for case_id, n, text in changed_cases(report):
        console.print(shown(f"{case_id} trial {n} changed: {text}", one_line=True,
                            limit=MAX_WHY), markup=False)
    for case_id, trial in talked_cases(report):
        print_conversation(console, case_id, trial)
    print_scores(console, report)


def print_conversation(console: Console, case_id: str, trial: TrialResult) -> None:
    """A conversation trial's turns under the table, a line each for what the user said,
    the tools the agent called and what it replied (SPEC §16)."""
    console.print(shown(f"{case_id} trial {trial.n} ({trial.outcome}), the conversation:",
                        one_line=True, limit=MAX_WHY), markup=False)
    turns, left_out = listed_turns(trial)
    for turn in turns:
        head = f"  turn {turn.turn}"
        for who, what in turn_lines(turn):
            console.print(shown(f"{head:<9} {who:<5}  {what}", one_line=True, limit=MAX_WHY),
                          markup=False)
            head = ""
    if left_out is not None:
        console.print(f"  {left_out}", markup=False)


def print_scores(console: Console, report: Report) -> None:
    """Public and hidden side by side, never blended; then the verdict."""
    from rich.text import Text

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
        console.print(f"pass@1 public {rel.pass_at_1:.3f}{se} · {trials_text(report)}: "
                      f"{report.evidence} evidence")
    console.print(f"{cost_line(report.cost)} · run {report.run_id}", markup=False)
    judged = judge_cost_line(report.cost)
    if judged:
        console.print(judged, markup=False)
    simulated = simulator_cost_line(report.cost)
    if simulated:
        console.print(simulated, markup=False)
    if s.flags:
        flags = Text("flags: ")
        for i, flag in enumerate(s.flags):
            flags.append(", " if i else "").append(inert(flag), style="bold yellow")
        console.print(flags)
    style = "bold green" if s.passed else "bold red"
    console.print(shown(verdict_line(report), style))


def print_side_by_side(console: Console, reports: list[Report]) -> None:
    """Several runs (targets or suites) in one table, one row each."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="runs", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("suite", "target", "public", "hidden", "overall", "cost $", "result"):
        table.add_column(column)
    for r in reports:
        s = r.scores
        result = Text("passed", "green") if s.passed else Text("not passed", "red")
        table.add_row(shown(r.suite.id, one_line=True), shown(r.target.uri, one_line=True),
                      pct(s.public), pct(s.hidden), pct(s.overall), usd_cell(r.cost), result)
    print_table(console, table)

"""``--markdown FILE``: a summary for a CI page.

Ids, URIs and reasons are not ours: they are escaped (``safe.markdown_text``)
so that they cannot end a table cell, open a link or an image, or become HTML.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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
    write_file,
)
from .cost import judge_cost_line, simulator_cost_line, tokens_text, usd_text
from .safe import markdown_code, markdown_text

if TYPE_CHECKING:
    from ..model import Report

#: Characters of a reason a table cell shows (the JSON report has all of it).
MAX_WHY = 500


def markdown(reports: list[Report]) -> str:
    """One section per run: scores side by side, then the cases."""
    from ..model import CaseResult

    out: list[str] = ["# assay results", ""]
    for report in reports:
        s = report.scores
        out += [
            f"## {markdown_text(report.suite.id)} — {markdown_code(report.target.uri)}",
            "",
            f"**{verdict_line(report)}** · run {markdown_code(report.run_id)} · "
            f"{trials_text(report)} ({report.evidence} evidence)",
            "",
            "| public | hidden | overall | pass mark | cost | tokens |",
            "|---|---|---|---|---|---|",
            f"| {pct(s.public)} | {pct(s.hidden)} | {pct(s.overall)} | {pct(s.pass_mark)} "
            f"| {usd_text(report.cost)} | {tokens_text(report.cost)} |",
            "",
        ]
        if s.flags:
            out += ["Flags: " + ", ".join(markdown_code(flag) for flag in s.flags), ""]
        judged = judge_cost_line(report.cost)
        if judged:
            out += [markdown_text(judged), ""]
        simulated = simulator_cost_line(report.cost)
        if simulated:
            out += [markdown_text(simulated), ""]
        scored = has_scores(report)
        score_head, score_rule = (" score |", "---|") if scored else ("", "")
        out += [f"| case | split | outcome | pass@1 | pass^k |{score_head} why |",
                f"|---|---|---|---|---|{score_rule}---|"]
        listed, left_out = listed_cases(report)
        for case in listed:
            score = f" {score_cell(case)} |" if scored else ""
            if isinstance(case, CaseResult):
                out.append(f"| {markdown_text(case.id)} | {case.split} | {case.outcome} | "
                           f"{case.pass_at_1:.2f} | {case.pass_hat_k:.2f} |{score} "
                           f"{markdown_text(why(case), limit=MAX_WHY)} |")
            else:
                out.append(f"| {markdown_text(case.id)} | hidden | {case.outcome} | | |"
                           f"{' |' if scored else ''} |")
        if left_out is not None:  # a CI page (GitHub's job summary) holds 1 MiB at most
            out += ["", markdown_text(left_out)]
        changed = changed_cases(report)
        if changed:
            out += ["", "What the agent changed in its workspace (cases that did not pass):", ""]
            out += [f"- {markdown_text(case_id)}, trial {n}: {markdown_text(text, limit=MAX_WHY)}"
                    for case_id, n, text in changed]
        talked = talked_cases(report)
        if talked:
            out += ["", "Conversations of the cases that did not pass (a trial that did not "
                        "pass):"]
            for case_id, trial in talked:
                out += ["", f"**{markdown_text(case_id)}**, trial {trial.n} ({trial.outcome}):",
                        "", "| turn | who | said |", "|---|---|---|"]
                turns, left_out = listed_turns(trial)
                for turn in turns:
                    number = str(turn.turn)
                    for who, what in turn_lines(turn):
                        out.append(f"| {number} | {who} | {markdown_text(what, limit=MAX_WHY)} |")
                        number = ""
                if left_out is not None:
                    out += ["", markdown_text(left_out)]
        out.append("")
    return "\n".join(out)


def write_markdown(reports: list[Report], path: Path) -> None:
    """Write the Markdown summary to ``path``."""
    write_file(path, markdown(reports))

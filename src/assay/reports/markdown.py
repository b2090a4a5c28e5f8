"""``--markdown FILE``: a summary for a CI page."""

from __future__ import annotations

from pathlib import Path

from ..model import CaseResult, Report
from .common import pct, verdict_line, why
from .cost import tokens_text, usd_text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(reports: list[Report]) -> str:
    """One section per run: scores side by side, then the cases."""
    out: list[str] = ["# assay results", ""]
    for report in reports:
        s = report.scores
        out += [
            f"## {report.suite.id} — `{report.target.uri}`",
            "",
            f"**{verdict_line(report)}** · run `{report.run_id}` · "
            f"{report.trials_per_case} trial(s) per case ({report.evidence} evidence)",
            "",
            "| public | hidden | overall | pass mark | cost | tokens |",
            "|---|---|---|---|---|---|",
            f"| {pct(s.public)} | {pct(s.hidden)} | {pct(s.overall)} | {pct(s.pass_mark)} "
            f"| {usd_text(report.cost)} | {tokens_text(report.cost)} |",
            "",
        ]
        if s.flags:
            out += ["Flags: " + ", ".join(f"`{flag}`" for flag in s.flags), ""]
        out += ["| case | split | outcome | pass@1 | pass^k | why |", "|---|---|---|---|---|---|"]
        for case in report.cases:
            if isinstance(case, CaseResult):
                out.append(f"| {_cell(case.id)} | {case.split} | {case.outcome} | "
                           f"{case.pass_at_1:.2f} | {case.pass_hat_k:.2f} | {_cell(why(case))} |")
            else:
                out.append(f"| {case.id} | hidden | {case.outcome} | | | |")
        out.append("")
    return "\n".join(out)


def write_markdown(reports: list[Report], path: Path) -> None:
    """Write the Markdown summary to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(reports), encoding="utf-8")

"""``assay compare`` for people: the rows that moved, the totals, the verdict (terminal, Markdown).

Rows that are aligned and unchanged are counted, not listed: a 10,000-case
comparison shows what changed. Case ids, run ids and URIs are not ours and are
shown inert; hidden cases are ``holdout-N`` already (``analysis.compare``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import pct
from .safe import markdown_code, markdown_text, shown

if TYPE_CHECKING:
    from rich.console import Console

    from ..analysis.compare import Comparison, Row, Totals

#: Rows the terminal lists at most (the JSON has every row).
MAX_ROWS = 200
STYLE = {"regressed": "red", "fixed": "green", "added": "cyan", "removed": "magenta"}


def listed(comparison: Comparison) -> list[Row]:
    """The rows worth a line: changed, or not aligned."""
    return [r for r in comparison.rows if r.change != "same" or r.alignment != "aligned"]


def _usd(value: float | None) -> str:
    return "unavailable" if value is None else f"${value:.4f}"


def _tokens(value: int | None) -> str:
    return "unavailable" if value is None else f"{value:,}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}s"


def _counts(t: Totals) -> str:
    return (f"{t.passed}/{t.total} passed, {t.failed} failed, {t.inconclusive} inconclusive, "
            f"{t.broken} broken")


def significance_line(c: Comparison) -> str:
    """The paired difference, its standard error and McNemar's p, in one line."""
    n = len(c.aligned)
    if c.diff is None:
        return "significance: no aligned case"
    se = "—" if c.se is None else f"{c.se:.3f}"
    return (f"pass@1 difference {c.diff:+.3f} (SE {se}) over {n} aligned case(s); "
            f"McNemar exact p = {c.mcnemar_p:.4g}")


def verdict_line(c: Comparison) -> str:
    """The verdict with its reason in a few words."""
    regressed = sum(1 for r in c.aligned if r.change == "regressed")
    fixed = sum(1 for r in c.aligned if r.change == "fixed")
    if c.verdict == "non-comparable":
        return "NON-COMPARABLE: no case is aligned (a facet differs or was not recorded)"
    if c.verdict == "worse":
        if regressed:
            return f"WORSE: {regressed} aligned case(s) regressed"
        grew = " and ".join("cost" if d == "usd" else d for d in c.dearer)
        return (f"WORSE: the same outcomes for more {grew} "
                f"(over {c.cost_tolerance * 100:g}% more)")
    if c.verdict == "better":
        return f"BETTER: {fixed} aligned case(s) fixed, none regressed"
    return "SAME: no aligned case changed"


def print_comparison(console: Console, c: Comparison) -> None:
    """The changed rows, both sides' totals, the significance and the verdict."""
    from rich.table import Table

    rows = listed(c)
    table = Table(title=shown(f"{c.base.suite_id}: {c.base.run_id} → {c.cand.run_id}",
                              one_line=True),
                  title_justify="left", show_edge=False, pad_edge=False)
    for name in ("case", "split", "base", "cand", "change", "alignment", "differs"):
        table.add_column(name, overflow="fold")
    for r in rows[:MAX_ROWS]:
        table.add_row(shown(r.label, one_line=True), r.split, r.base or "—", r.cand or "—",
                      shown(r.change, STYLE.get(r.change, "")), r.alignment,
                      ", ".join(r.differs) or (("unrecorded: " + ", ".join(r.unrecorded))
                                               if r.unrecorded else ""))
    if rows:
        console.print(table)
        if len(rows) > MAX_ROWS:
            console.print(f"… and {len(rows) - MAX_ROWS} more row(s) (--json has every row)")
    same = len(c.rows) - len(rows)
    console.print(f"{same} aligned case(s) unchanged")
    for side, run, t in (("base", c.base, c.base_totals), ("cand", c.cand, c.cand_totals)):
        line = (f"{side}  {run.run_id}  {run.target_uri}  {_counts(t)} · pass@1 "
                f"{pct(t.pass_at_1)} · cost {_usd(t.cost_usd)} · tokens {_tokens(t.tokens)} · "
                f"mean trial {_seconds(t.mean_duration_s)}")
        console.print(shown(line, one_line=True))
    console.print(significance_line(c))
    style = {"worse": "bold red", "better": "bold green"}.get(c.verdict, "bold")
    console.print(shown(verdict_line(c), style))


def comparison_markdown(c: Comparison) -> str:
    """The same as the terminal, as Markdown for a CI page."""
    out = [f"# assay compare: {markdown_text(c.base.suite_id)}", "",
           f"**{markdown_text(verdict_line(c))}** · base {markdown_code(c.base.run_id)} → "
           f"cand {markdown_code(c.cand.run_id)}", "",
           "| side | target | passed | pass@1 | cost | tokens | mean trial |",
           "|---|---|---|---|---|---|---|"]
    for side, run, t in (("base", c.base, c.base_totals), ("cand", c.cand, c.cand_totals)):
        # A "|" ends a GFM table cell even inside a code span unless escaped (GFM §4.10).
        target = markdown_code(run.target_uri).replace("|", "\\|")
        out.append(f"| {side} | {target} | {t.passed}/{t.total} | "
                   f"{pct(t.pass_at_1)} | {_usd(t.cost_usd)} | {_tokens(t.tokens)} | "
                   f"{_seconds(t.mean_duration_s)} |")
    out += ["", markdown_text(significance_line(c)), ""]
    rows = listed(c)
    if rows:
        out += ["| case | split | base | cand | change | alignment | differs |",
                "|---|---|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| {markdown_text(r.label)} | {r.split} | {r.base or '—'} | "
                       f"{r.cand or '—'} | {r.change} | {r.alignment} | "
                       f"{markdown_text(', '.join(r.differs))} |")
        out.append("")
    out.append(f"{len(c.rows) - len(rows)} aligned case(s) unchanged.")
    return "\n".join(out) + "\n"

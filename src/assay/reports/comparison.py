"""``assay compare`` for people: the rows that moved, the totals, the verdict (terminal, Markdown).

Rows that are aligned and unchanged are counted, not listed: a 10,000-case
comparison shows what changed. Case ids, run ids and URIs are not ours and are
shown inert; hidden cases are ``holdout-N`` already (``analysis.compare``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import MAX_ROWS, pct
from .safe import inert, markdown_code, markdown_text

if TYPE_CHECKING:
    from ..analysis.compare import Comparison, Row, Totals

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


def comparison_lines(c: Comparison) -> list[tuple[str, str]]:
    """The terminal's text, line by line, each with a style word (``""`` for none).

    Plain aligned lines, not a Rich table: a table of 200 rows took most of a
    second to lay out, more than the comparison. Every value not ours is inert.
    """
    rows = listed(c)
    out = [(inert(f"{c.base.suite_id}: {c.base.run_id} → {c.cand.run_id}", one_line=True),
             "bold")]
    if rows:
        shown_rows = rows[:MAX_ROWS]
        width = min(40, max(len("case"), *(len(r.label) for r in shown_rows)))
        out.append((f"{'case':<{width}}  {'split':<6}  {'base':<12}  {'cand':<12}  "
                    f"{'change':<9}  {'alignment':<14}  differs", "bold"))
        for r in shown_rows:
            label = inert(r.label, one_line=True)  # a longer id pushes its row, whole
            differs = ", ".join(r.differs) or (("unrecorded: " + ", ".join(r.unrecorded))
                                               if r.unrecorded else "")
            out.append((f"{label:<{width}}  {r.split:<6}  {r.base or '—':<12}  "
                        f"{r.cand or '—':<12}  {r.change:<9}  {r.alignment:<14}  {differs}",
                        STYLE.get(r.change, "")))
        if len(rows) > MAX_ROWS:
            out.append((f"… and {len(rows) - MAX_ROWS} more row(s) (--json has every row)", ""))
    out.append((f"{len(c.rows) - len(rows)} aligned case(s) unchanged", ""))
    for side, run, t in (("base", c.base, c.base_totals), ("cand", c.cand, c.cand_totals)):
        out.append((inert(f"{side}  {run.run_id}  {run.target_uri}  {_counts(t)} · pass@1 "
                          f"{pct(t.pass_at_1)} · cost {_usd(t.cost_usd)} · tokens "
                          f"{_tokens(t.tokens)} · mean trial {_seconds(t.mean_duration_s)}",
                          one_line=True), ""))
    out.append((significance_line(c), ""))
    out.append((verdict_line(c), {"worse": "bold red", "better": "bold green"}.get(c.verdict,
                                                                                 "bold")))
    return out


def print_comparison(c: Comparison) -> None:
    """The changed rows, both sides' totals, the significance and the verdict, on stdout.

    Styled (colour, bold) only on a terminal: ``click`` drops the styles
    elsewhere. Rich is not needed here, nor its start-up.
    """
    import click

    for text, style in comparison_lines(c):
        if style:
            text = click.style(text, fg=_COLOURS.get(style), bold="bold" in style)
        click.echo(text)


_COLOURS = {"red": "red", "green": "green", "cyan": "cyan", "magenta": "magenta",
            "bold red": "red", "bold green": "green"}


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

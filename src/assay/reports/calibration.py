"""``assay judges`` for people: agreement and kappa per judge and criterion, the disagreements.

Everything not ours (model names, criteria, case ids, run ids, reviewer
names, the reasons an opinion gave no label) is shown inert; hidden cases
are ``holdout-N`` and their criteria ``hidden criterion N`` already
(``analysis.calibration``), and no row holds an output, a note or an answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import MAX_ROWS, pct
from .safe import print_table, screen_limit, shown

if TYPE_CHECKING:
    from rich.console import Console

    from ..analysis.calibration import Calibration, Row

#: A criterion's text in a table cell (the JSON has it whole).
CRITERION_WIDTH = 48

SOURCES = ("kappa: Cohen (1960), (p_o − p_e) / (1 − p_e): agreement beyond what chance would "
           "give, 1 perfect, 0 chance, below 0 worse than chance; reading: Landis & Koch "
           "(1977) bands, a convention, not a test")


def summary_line(result: Calibration) -> str:
    """How many reviews there were and how many had a judge's opinion."""
    line = (f"judges: {result.reviewed} reviewed trial(s) of stored runs, {result.judged} "
            f"with a judge's opinion")
    if result.judge is not None:
        line += f" from {result.judge}"
    if result.elsewhere:
        line += (f"; {result.elsewhere} reviewed item(s) from outside a run have no judge's "
                 "opinion to compare")
    return line


def kappa_cell(row: Row) -> str:
    """κ to three decimals, or an em dash when it is undefined."""
    kappa = row.agreement.kappa
    return "—" if kappa is None else f"{kappa:.3f}"


def reading_cell(row: Row) -> str:
    """The band's name; for an undefined κ, why in two words."""
    a = row.agreement
    if a.reading is not None:
        return a.reading
    return "undefined: one label" if a.n else "no pairs"


def print_calibration(console: Console, result: Calibration) -> None:
    """The summary, one row per judge and criterion, what was excluded, the disagreements."""
    from rich.table import Table

    console.print(shown(summary_line(result), "bold"))
    if not result.rows:
        console.print("no reviewed trial has a judge's opinion to compare: review trials of "
                      "judged runs (assay review) first")
        return
    table = Table(show_edge=False, pad_edge=False)
    for name in ("judge", "check", "criterion", "n", "agreement", "chance", "kappa", "reading",
                 "excluded"):
        right = name in ("n", "agreement", "chance", "kappa", "excluded")
        table.add_column(name, justify="right" if right else "left", overflow="fold"
                         if name == "criterion" else "ellipsis")
    room = screen_limit(console, CRITERION_WIDTH)
    for row in result.rows:
        a = row.agreement
        table.add_row(shown(row.judge, one_line=True), row.check,
                      shown(row.criterion, one_line=True, limit=room), str(a.n),
                      pct(a.observed), pct(a.expected), kappa_cell(row), reading_cell(row),
                      str(sum(row.excluded.values())))
    print_table(console, table)
    console.print(SOURCES, markup=False, highlight=False)
    if any(r.agreement.n and r.agreement.kappa is None for r in result.rows):
        console.print("undefined: the judge and the people gave every trial one and the same "
                      "label; agreement beyond chance cannot be measured from that",
                      markup=False, highlight=False)
    for row in result.rows:
        for why, count in sorted(row.excluded.items()):
            console.print(shown(f"excluded: {row.judge} · {row.criterion}: {count} × {why}",
                                one_line=True, limit=screen_limit(console, 300)))
    if result.unknown_verdicts:
        console.print(f"{result.unknown_verdicts} decided item(s) with a decision this version "
                      "does not know were left out", markup=False, highlight=False)
    if result.unreadable:
        console.print(f"{result.unreadable} opinion(s) whose check the run's stored suite does "
                      "not describe were left out", markup=False, highlight=False)
    _print_disagreements(console, result)


def _print_disagreements(console: Console, result: Calibration) -> None:
    from rich.table import Table

    if not result.disagreements:
        console.print("disagreements: none")
        return
    console.print(f"disagreements ({len(result.disagreements)}):", style="bold")
    table = Table(show_edge=False, pad_edge=False)
    for name in ("item", "run", "case", "trial", "judge", "criterion", "judge said",
                 "reviewer said"):
        table.add_column(name, justify="right" if name in ("item", "trial") else "left",
                         overflow="ellipsis")
    for d in result.disagreements[:MAX_ROWS]:
        by = f" ({d.reviewer})" if d.reviewer else ""
        table.add_row(str(d.item), shown(d.run_id, one_line=True), shown(d.case, one_line=True),
                      str(d.trial), shown(d.judge, one_line=True),
                      shown(d.criterion, one_line=True,
                            limit=screen_limit(console, CRITERION_WIDTH)), d.judge_said,
                      shown(f"{d.human_said}{by}", one_line=True))
    print_table(console, table)
    if len(result.disagreements) > MAX_ROWS:
        console.print(f"… and {len(result.disagreements) - MAX_ROWS} more "
                      "(--json has every one)")

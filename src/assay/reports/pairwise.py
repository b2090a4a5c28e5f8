"""``assay pairwise`` for people: the comparisons, the preference and its interval, the cost.

Everything not ours (run ids, URIs, case ids, criteria, model names) is shown
inert; hidden cases are ``holdout-N`` already and no row holds an output or
an answer (``analysis.pairwise``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import MAX_ROWS, pct
from .safe import inert, print_table, screen_limit, shown

if TYPE_CHECKING:
    from rich.console import Console

    from ..analysis.pairwise import JudgeCost, PairwiseResult
    from ..judging.pairwise import Preference

STYLE = {"a": "cyan", "b": "magenta", "tie": "", None: "yellow"}


def preference_line(p: Preference) -> str:
    """The rate B was preferred among decisive comparisons, its interval, and the rest apart."""
    apart = (f"{p.ties} tie(s) · {p.undecided} undecided · {p.not_compared} not compared")
    if not p.decisive:
        return f"B over A: no decisive comparison (95% interval 0.0%–100.0%) · {apart}"
    return (f"B over A: {pct(p.b_over_a)} ({p.b_wins} of {p.decisive} decisive; "
            f"A {p.a_wins}) · 95% Wilson interval {pct(p.low)}–{pct(p.high)} · {apart}")


def leaning_line(p: Preference) -> str:
    """What the interval says, in a few words (it informs; nothing is decided)."""
    if p.favours == "b":
        return "B is preferred (the interval is above one half)"
    if p.favours == "a":
        return "A is preferred (the interval is below one half)"
    if not p.decisive:
        return "no preference can be told: no comparison was decided"
    return "no clear preference (the interval holds one half)"


def cost_line(c: JudgeCost) -> str:
    """The judge's cost, apart from the agents': seen, a lower bound, or unavailable."""
    if c.usd is None:
        money = "unavailable"
    else:
        money = f"{'≥ ' if c.unpriced else ''}${c.usd:.4f} (inferred"
        money += f", {c.unpriced} of {c.calls} calls unpriced)" if c.unpriced else ")"
    if c.input_tokens is None and c.output_tokens is None:
        tokens = "unavailable"
    else:
        tokens = f"{c.input_tokens or 0:,} in / {c.output_tokens or 0:,} out"
    return f"judge cost {money} · tokens {tokens} · {c.calls} call(s)"


def print_pairwise(console: Console, result: PairwiseResult) -> None:
    """The rows (up to ``MAX_ROWS``), the preference and the judge's cost."""
    from rich.table import Table
    from rich.text import Text

    console.print(shown(f"{result.a.suite_id}: A {result.a.run_id} ({result.a.target_uri}) "
                        f"vs B {result.b.run_id} ({result.b.target_uri})", "bold",
                        one_line=True))
    console.print(shown(f"judge {result.judge.uri} · prompt {result.prompt_digest} · seed "
                        f"{result.seed}", one_line=True))
    console.print(shown(f"criteria: {result.criteria}", one_line=True,
                        limit=screen_limit(console, 500)))
    table = Table(show_edge=False, pad_edge=False)
    for name in ("case", "split", "trial", "shown first", "choice", "note"):
        table.add_column(name, justify="right" if name == "trial" else "left",
                         overflow="fold" if name == "note" else "ellipsis")
    for row in result.rows[:MAX_ROWS]:
        table.add_row(shown(row.label, one_line=True), row.split, str(row.n),
                      row.first or "—", Text(row.choice or "—", style=STYLE[row.choice]),
                      shown(row.note, one_line=True))
    print_table(console, table)
    if len(result.rows) > MAX_ROWS:
        console.print(f"… and {len(result.rows) - MAX_ROWS} more row(s) (--json has every row)")
    unpaired = result.unpaired
    if unpaired.get("a") or unpaired.get("b"):
        console.print(f"unpaired trials (one run only): A {unpaired.get('a', 0)}, "
                      f"B {unpaired.get('b', 0)}")
    console.print(preference_line(result.preference), markup=False)
    style = "bold" if result.preference.favours is None else "bold green"
    console.print(Text(leaning_line(result.preference), style=style))
    console.print(inert(cost_line(result.cost) + " (the agents' own cost is not in it)"),
                  markup=False)
    sealed = [r.entry for r in result.rows if r.entry is not None]
    if sealed:
        console.print(f"sealed: {len(sealed)} judge-opinion ledger entries "
                      f"({min(sealed)}–{max(sealed)})")

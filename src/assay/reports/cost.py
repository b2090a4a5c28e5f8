"""What a run spent, in words every renderer shares: seen, partly seen, or unavailable.

A figure no trial reported reads "unavailable", never ``$0.0000``; a sum over
only some trials reads as a lower bound ("≥ $0.12, 3 of 10 trials
unreported"); a figure derived rather than seen says "inferred" (a price
table's cost, an agent's word about itself). See docs/decisions/0001.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the models load where a report is made, not with its renderers
    from ..model.result import Cost

UNAVAILABLE = "unavailable"


def _gap(cost: Cost, fact: str) -> str:
    missing = cost.unreported.get(fact, 0)
    return f"{missing} of {cost.trials} trials unreported" if missing else ""


def _notes(cost: Cost, fact: str) -> str:
    notes = [_gap(cost, fact)]
    if cost.evidence.get(fact) == "inferred":  # Evidence.INFERRED, a str enum
        notes.append("inferred")
    said = ", ".join(n for n in notes if n)
    return f" ({said})" if said else ""


def _at_least(cost: Cost, fact: str) -> str:
    return "≥ " if cost.unreported.get(fact, 0) else ""


def usd_text(cost: Cost) -> str:
    """The money: ``$0.1234``, ``≥ $0.1200 (3 of 10 trials unreported)`` or ``unavailable``."""
    if cost.usd is None:
        return UNAVAILABLE
    return f"{_at_least(cost, 'cost')}${cost.usd:.4f}{_notes(cost, 'cost')}"


def tokens_text(cost: Cost) -> str:
    """The tokens: ``2,300 in / 120 out``, with the same marks as the money, or ``unavailable``."""
    if cost.input_tokens is None and cost.output_tokens is None:
        return UNAVAILABLE
    return (f"{_at_least(cost, 'tokens')}{cost.input_tokens or 0:,} in / "
            f"{cost.output_tokens or 0:,} out{_notes(cost, 'tokens')}")


def cost_line(cost: Cost) -> str:
    """One line: ``cost $0.0012 (inferred) · tokens 2,300 in / 120 out``."""
    if cost.usd is None and cost.input_tokens is None and cost.output_tokens is None:
        return "cost unavailable · tokens unavailable (no trial reported usage)"
    return f"cost {usd_text(cost)} · tokens {tokens_text(cost)}"


def usd_cell(cost: Cost) -> str:
    """The money in a table cell: ``0.1234``, ``≥ 0.1200`` or ``unavailable``."""
    if cost.usd is None:
        return UNAVAILABLE
    return f"{_at_least(cost, 'cost')}{cost.usd:.4f}"


def judge_cost_line(cost: Cost) -> str | None:
    """The judges' spend, apart from the agent's (None when nothing was judged)."""
    if cost.judge_calls is None and cost.judge_cached is None:
        return None
    usd = "unavailable" if cost.judge_usd is None else f"${cost.judge_usd:.4f}"
    tokens = ("unavailable" if cost.judge_input_tokens is None
              else f"{cost.judge_input_tokens:,} in / {cost.judge_output_tokens or 0:,} out")
    return (f"judges: cost {usd} · tokens {tokens} · {cost.judge_calls or 0} asked, "
            f"{cost.judge_cached or 0} from the judge cache")


def simulator_cost_line(cost: Cost) -> str | None:
    """The simulated users' spend, apart from the agent's and the judges' (None: no trial
    had one)."""
    if cost.simulator_calls is None and cost.simulator_cached is None:
        return None
    usd = "unavailable" if cost.simulator_usd is None else f"${cost.simulator_usd:.4f}"
    tokens = ("unavailable" if cost.simulator_input_tokens is None
              else f"{cost.simulator_input_tokens:,} in / "
                   f"{cost.simulator_output_tokens or 0:,} out")
    return (f"simulated users: cost {usd} · tokens {tokens} · {cost.simulator_calls or 0} "
            f"asked, {cost.simulator_cached or 0} from the cache")

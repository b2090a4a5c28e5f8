"""Usage is evidence (SPEC §4): what an agent says of itself is inferred, silence unavailable.

Tokens and cost are separate facts: a token budget reads tokens, a USD budget
cost. A Python agent's ``tools.usage`` is the agent's word (``inferred``); an
agent that never calls it reported nothing (``unavailable``), and a budget on
nothing is inconclusive, never a pass.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from assay.model import Evidence

from .outcomes import by_id

if TYPE_CHECKING:
    from conftest import Bench


SILENT = """
    def agent(input, tools):
        return input
"""

SAYS = """
    def agent(input, tools):
        if input != "silent":
            tools.usage(input_tokens=1000, output_tokens=200, cost_usd=0.05)
        return input
"""

BUDGETS = """
    suite: t/usage@1
    cases:
      - id: usd
        input: x
        expect: [{costs_at_most: {usd: 1}}]
      - id: tokens
        input: x
        expect: [{costs_at_most: {tokens: 5000}}]
      - id: usd-inferred
        input: x
        expect: [{costs_at_most: {usd: 1}, min_evidence: inferred}]
      - id: tokens-inferred-over
        input: x
        expect: [{costs_at_most: {tokens: 1100}, min_evidence: inferred}]
"""


def test_an_agent_that_never_reports_usage_passes_no_budget(bench: Bench) -> None:
    uri, _ = bench.agent(SILENT)
    report = bench.run(BUDGETS, uri)
    for case in by_id(report).values():
        (verdict,) = case.trials[0].verdicts
        # Not an "observed" $0: nothing was reported, so nothing can be judged.
        assert (verdict.outcome, verdict.evidence) == ("inconclusive", Evidence.UNAVAILABLE)
        assert case.outcome == "inconclusive"
    assert report.scores.passed is False
    cost = report.cost
    assert (cost.usd, cost.input_tokens, cost.output_tokens) == (None, None, None)
    assert cost.unreported == {"tokens": 4, "cost": 4} and cost.trials == 4
    assert cost.evidence == {"tokens": Evidence.UNAVAILABLE, "cost": Evidence.UNAVAILABLE}


def test_self_reported_usage_is_inferred_and_judged_only_where_that_is_enough(
        bench: Bench) -> None:
    uri, _ = bench.agent(SAYS)
    report = bench.run(BUDGETS, uri)
    cases = by_id(report)
    outcomes = {k: (c.trials[0].verdicts[0].outcome, c.trials[0].verdicts[0].evidence)
                for k, c in cases.items()}
    assert outcomes == {
        # The agent's word is not observed: by default it decides nothing.
        "usd": ("inconclusive", Evidence.INFERRED),
        "tokens": ("inconclusive", Evidence.INFERRED),
        "usd-inferred": ("pass", Evidence.INFERRED),
        "tokens-inferred-over": ("fail", Evidence.INFERRED),
    }
    assert cases["usd"].trials[0].verdicts[0].note == (
        "cost evidence is inferred; this check needs observed")
    assert cases["tokens"].trials[0].verdicts[0].note == (
        "tokens evidence is inferred; this check needs observed")
    assert report.target.evidence["tokens"] == Evidence.INFERRED
    assert report.target.evidence["cost"] == Evidence.INFERRED
    assert report.cost.evidence == {"tokens": Evidence.INFERRED, "cost": Evidence.INFERRED}


def test_a_run_that_partly_reported_usage_says_how_much_is_missing(bench: Bench) -> None:
    uri, _ = bench.agent(SAYS)
    report = bench.run("""
        suite: t/partial-usage@1
        cases:
          - {id: a, input: a, expect: [{equals: a}]}
          - {id: b, input: b, expect: [{equals: b}]}
          - {id: silent, input: silent, expect: [{equals: silent}]}
    """, uri)
    cost = report.cost
    assert math.isclose(cost.usd or 0, 0.10)
    assert (cost.input_tokens, cost.output_tokens) == (2000, 400)
    assert cost.trials == 3 and cost.unreported == {"tokens": 1, "cost": 1}
    silent = by_id(report)["silent"].trials[0]
    assert silent.usage.tokens is None and silent.usage.cost_usd is None

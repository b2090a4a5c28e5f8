"""The words for what a run spent: seen, partly seen, inferred, or unavailable."""

from __future__ import annotations

from assay.model import Evidence
from assay.model.result import Cost
from assay.reports.cost import cost_line, tokens_text, usd_cell, usd_text

OBSERVED = {"tokens": Evidence.OBSERVED, "cost": Evidence.OBSERVED}


def test_all_reported_and_observed_is_plain() -> None:
    cost = Cost(usd=0.0123, input_tokens=2300, output_tokens=120, trials=4,
                unreported={"tokens": 0, "cost": 0}, evidence=OBSERVED)
    assert cost_line(cost) == "cost $0.0123 · tokens 2,300 in / 120 out"
    assert usd_cell(cost) == "0.0123"


def test_tokens_seen_and_no_price_says_the_cost_is_unavailable() -> None:
    cost = Cost(usd=None, input_tokens=2000, output_tokens=300, trials=1,
                unreported={"tokens": 0, "cost": 1},
                evidence={"tokens": Evidence.OBSERVED, "cost": Evidence.UNAVAILABLE})
    assert cost_line(cost) == "cost unavailable · tokens 2,000 in / 300 out"
    assert usd_cell(cost) == "unavailable"


def test_a_price_table_cost_says_inferred_and_a_gap_gives_a_lower_bound() -> None:
    cost = Cost(usd=0.12, input_tokens=2400, output_tokens=200, trials=10,
                unreported={"tokens": 3, "cost": 3},
                evidence={"tokens": Evidence.OBSERVED, "cost": Evidence.INFERRED})
    assert usd_text(cost) == "≥ $0.1200 (3 of 10 trials unreported, inferred)"
    assert tokens_text(cost) == "≥ 2,400 in / 200 out (3 of 10 trials unreported)"
    assert usd_cell(cost) == "≥ 0.1200"


def test_nothing_reported_is_unavailable_not_zero() -> None:
    cost = Cost(trials=3, unreported={"tokens": 3, "cost": 3},
                evidence={"tokens": Evidence.UNAVAILABLE, "cost": Evidence.UNAVAILABLE})
    line = cost_line(cost)
    assert line == "cost unavailable · tokens unavailable (no trial reported usage)"
    assert "0" not in line

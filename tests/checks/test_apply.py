"""Evidence (SPEC §5): a verdict needs at least its assertion's min_evidence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from assay.checks import grade_trace, required_evidence, verdict
from assay.model import Assertion, Evidence, Trace


def test_default_requirement_is_the_strongest_for_the_fact() -> None:
    assert required_evidence(Assertion(check="equals", arg=1), "output") is Evidence.OBSERVED
    a = Assertion(check="equals", arg=1, min_evidence="inferred")
    assert required_evidence(a, "output") is Evidence.INFERRED


def test_observed_output_is_judged(make_trace: Callable[..., Trace]) -> None:
    v = verdict(Assertion(check="equals", arg=1), make_trace(1, evidence="observed"))
    assert (v.outcome, v.evidence) == ("pass", Evidence.OBSERVED)


@pytest.mark.parametrize("output", [1, 2])
def test_inferred_output_is_inconclusive_by_default_whatever_the_output(
    make_trace: Callable[..., Trace], output: Any
) -> None:
    v = verdict(Assertion(check="equals", arg=1), make_trace(output, evidence="inferred"))
    assert v.outcome == "inconclusive"
    assert v.evidence == Evidence.INFERRED
    assert v.note == "output evidence is inferred; this check needs observed"
    assert v.provenance == "check:equals"


def test_min_evidence_inferred_lets_inferred_output_be_judged(
    make_trace: Callable[..., Trace],
) -> None:
    a = Assertion(check="equals", arg=1, min_evidence="inferred")
    passed = verdict(a, make_trace(1, evidence="inferred"))
    assert (passed.outcome, passed.evidence) == ("pass", Evidence.INFERRED)
    failed = verdict(a, make_trace(2, evidence="inferred"))
    assert (failed.outcome, failed.note) == ("fail", "got 2, expected 1")


def test_min_evidence_inferred_is_also_met_by_observed(make_trace: Callable[..., Trace]) -> None:
    a = Assertion(check="status", arg="ok", min_evidence="inferred")
    assert verdict(a, make_trace("x", evidence="observed")).outcome == "pass"


@pytest.mark.parametrize("min_evidence", [None, "inferred", "observed"])
def test_unavailable_output_is_inconclusive_even_when_the_check_would_pass(
    make_trace: Callable[..., Trace], min_evidence: str | None
) -> None:
    a = Assertion(check="equals", arg=1, min_evidence=min_evidence)
    v = verdict(a, make_trace(1, evidence="unavailable"))
    assert v.outcome == "inconclusive"
    assert v.evidence == Evidence.UNAVAILABLE
    need = min_evidence or "observed"
    assert v.note == f"output evidence is unavailable; this check needs {need}"


def test_a_trace_that_states_no_evidence_is_unavailable_never_a_pass(
    make_trace: Callable[..., Trace],
) -> None:
    v = verdict(Assertion(check="not_contains", arg="x"), make_trace("fine", evidence=None))
    assert v.outcome == "inconclusive"
    assert v.evidence == Evidence.UNAVAILABLE


def test_evidence_of_another_fact_does_not_count_for_output() -> None:
    trace = Trace(output=1, evidence={"tool_calls": Evidence.OBSERVED})
    assert verdict(Assertion(check="equals", arg=1), trace).outcome == "inconclusive"


def test_inconclusive_from_evidence_wins_even_over_a_failing_output(
    make_trace: Callable[..., Trace],
) -> None:
    # Too little evidence to judge is not evidence of a failure either.
    v = verdict(Assertion(check="equals", arg=1), make_trace(999, evidence="inferred"))
    assert v.outcome == "inconclusive"


def test_grade_trace_gives_one_verdict_per_assertion_in_order(
    make_trace: Callable[..., Trace],
) -> None:
    assertions = [
        Assertion(check="status", arg="ok"),
        Assertion(check="equals", arg=3, path="$.n"),
        Assertion(check="contains", arg="zzz"),
        Assertion(check="equals", arg=3, path="$.n", min_evidence="inferred"),
    ]
    verdicts = grade_trace(assertions, make_trace({"n": 3}))
    assert [v.assertion for v in verdicts] == ["status", "equals $.n", "contains", "equals $.n"]
    assert [v.outcome for v in verdicts] == ["pass", "pass", "fail", "pass"]
    assert grade_trace([], make_trace(1)) == []


def test_grade_trace_with_inferred_output_leaves_only_relaxed_assertions_judged(
    make_trace: Callable[..., Trace],
) -> None:
    assertions = [
        Assertion(check="equals", arg=3, path="$.n"),
        Assertion(check="equals", arg=3, path="$.n", min_evidence="inferred"),
        Assertion(check="equals", arg=4, path="$.n", min_evidence="inferred"),
    ]
    verdicts = grade_trace(assertions, make_trace({"n": 3}, evidence="inferred"))
    assert [v.outcome for v in verdicts] == ["inconclusive", "pass", "fail"]

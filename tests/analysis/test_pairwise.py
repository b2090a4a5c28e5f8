"""Pairing two stored runs' trials for a judge: what is compared, what is not, and why."""

from __future__ import annotations

from typing import Any

import pytest

from assay.analysis.pairwise import Pair, PairwiseOptions, RunOutputs, judge_cost, pair
from assay.analysis.run_facts import CaseFacts, RunFacts
from assay.errors import UsageError
from assay.judging.judges import JudgeRef
from assay.judging.opinion import Opinion
from assay.judging.pairwise import MARK_FIRST, MARK_SECOND, PAIRWISE_TEMPLATE, shown_first

SECRET = "SECRET-hidden-9b1"


def case(case_id: str, split: str = "public", digest: str = "sha256:c") -> CaseFacts:
    return CaseFacts(case_id, case_id, split, "pass", 1.0, {"case": digest})


def run(run_id: str, cases: list[CaseFacts], trials: dict[tuple[str, int], Any],
        missing: dict[tuple[str, int], str] | None = None, suite: str = "s@1") -> RunOutputs:
    facts = RunFacts(run_id, "store", suite, "sha256:s", None, f"python:{run_id}", "sha256:t",
                     {}, "2025-01-01T00:00:00Z", 1.0, 1.0, None, 1.0, True, False, None, None,
                     cases, {"entry": 1, "hash": "sha256:h"})
    return RunOutputs(facts, trials, missing or {}, {c.id: f"ref {c.id}" for c in cases})


def test_trials_are_paired_by_case_and_index_and_hidden_cases_shown_as_holdouts() -> None:
    a = run("A", [case("greet"), case(SECRET, "hidden"), case("only-a")],
            {("greet", 1): "a1", ("greet", 2): "a2", ("greet", 3): "a3",
             (SECRET, 1): f"a says {SECRET}", ("only-a", 1): "x"})
    b = run("B", [case("greet"), case(SECRET, "hidden"), case("only-b")],
            {("greet", 1): "b1", ("greet", 2): "b2",
             (SECRET, 1): f"b says {SECRET}", ("only-b", 1): "y", ("only-b", 2): "z"})
    found = pair(a, b, seed=5)
    assert [(p.label, p.split, p.n) for p in found.pairs] == [
        ("greet", "public", 1), ("greet", "public", 2), ("holdout-1", "hidden", 1)]
    # greet 3 and only-a are A's alone; only-b's two trials are B's alone.
    assert found.unpaired == {"a": 2, "b": 2}
    for p in found.pairs:
        assert p.first == shown_first(5, p.split, p.label, p.n)  # keyed by what the row shows
    hidden = found.pairs[2]
    assert hidden.case_id == SECRET and SECRET not in repr(hidden)  # never in its repr


def test_the_prompt_shows_the_run_drawn_first_under_output_a() -> None:
    both = ("from A", "from B")
    for first, top, bottom in (("a", "from A", "from B"), ("b", "from B", "from A")):
        prompt = Pair("c", "public", "c", 1, first, "", "ref", both).prompt(  # type: ignore[arg-type]
            PAIRWISE_TEMPLATE, "be kind")
        assert f"{MARK_FIRST}\n{top}\n{MARK_SECOND}\n{bottom}\n" in prompt
        assert "be kind" in prompt and "ref" in prompt


def test_a_case_that_differs_between_the_runs_is_listed_not_compared() -> None:
    a = run("A", [case("greet", digest="sha256:one")], {("greet", 1): "a"})
    b = run("B", [case("greet", digest="sha256:two")], {("greet", 1): "b"})
    [only] = pair(a, b, seed=1).pairs
    assert only.first is None
    assert only.note == "not compared: the case differs between the runs (case)"


def test_a_trial_without_an_output_is_listed_not_compared() -> None:
    a = run("A", [case("greet")], {("greet", 2): "a"}, {("greet", 1): "left no trace (broken)"})
    b = run("B", [case("greet")], {("greet", 1): "b"}, {("greet", 2): "has its output erased"})
    notes = [(p.n, p.first, p.note) for p in pair(a, b, seed=1).pairs]
    assert notes == [(1, None, "not compared: run A's trial left no trace (broken)"),
                     (2, None, "not compared: run B's trial has its output erased")]


def test_other_facets_may_differ_they_are_what_is_compared() -> None:
    left = CaseFacts("greet", "greet", "public", "pass", 1.0, {"case": "sha256:c",
                                                                "model": "small"})
    right = CaseFacts("greet", "greet", "public", "fail", 0.0, {"case": "sha256:c",
                                                                 "model": "large"})
    a = run("A", [left], {("greet", 1): "a"})
    b = run("B", [right], {("greet", 1): "b"})
    [only] = pair(a, b, seed=1).pairs
    assert only.first is not None and only.outputs == ("a", "b")


def test_runs_of_two_suites_are_refused() -> None:
    a = run("A", [case("greet")], {("greet", 1): "a"})
    b = run("B", [case("greet")], {("greet", 1): "b"}, suite="other@1")
    with pytest.raises(UsageError, match="pairwise compares runs of one suite"):
        pair(a, b, seed=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [({"criteria": "  "}, "--criteria is empty"),
     ({"run_b": "A"}, "the same run"),
     ({"base_url": None}, "--judge-base-url URL or set ASSAY_JUDGE_BASE_URL"),
     ({"seed": -1}, "--seed must be between 0 and"),
     ({"concurrency": 0}, "--concurrency must be 1 or more")],
)
def test_options_that_could_not_compare_are_refused(change: dict[str, Any], message: str
                                                    ) -> None:
    given: dict[str, Any] = {"run_a": "A", "run_b": "B", "criteria": "kind",
                             "judge": JudgeRef("openai", "m"), "base_url": "http://h/v1"}
    with pytest.raises(UsageError, match=message):
        PairwiseOptions(**{**given, **change}).check()


def test_the_judges_cost_is_summed_and_a_missing_price_makes_it_a_lower_bound() -> None:
    def said(cost: float | None, tokens: int | None) -> Opinion:
        return Opinion("A", "m", "sha256:d", input_tokens=tokens, output_tokens=tokens,
                       cost_usd=cost)

    cost = judge_cost([said(0.25, 10), said(0.5, 20), said(None, None)])
    assert cost.to_json() == {"judge_usd": 0.75, "judge_input_tokens": 30,
                              "judge_output_tokens": 30, "judge_calls": 3,
                              "judge_unpriced_calls": 1, "evidence": "inferred"}
    nothing = judge_cost([said(None, None)])
    assert nothing.usd is None and nothing.input_tokens is None
    assert nothing.to_json()["evidence"] == "unavailable"

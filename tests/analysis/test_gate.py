"""The gate's decision, one policy at a time and combined (pure: report dicts in, decision out)."""

from __future__ import annotations

from typing import Any

import pytest

from assay.analysis.gate import Policies, decide
from assay.analysis.run_facts import RunFacts, from_report
from assay.errors import UsageError

FACETS = {"case": "sha256:c", "assertions": "sha256:a"}


def case(cid: str, outcome: str = "pass", *, split: str = "public", breach: str | None = None,
         straddles: bool = False, facets: dict[str, str] | None = None) -> dict[str, Any]:
    verdicts = [{"assertion": "status: ok", "check": "status", "family": "output",
                 "outcome": "pass" if outcome == "pass" else "fail", "evidence": "observed"}]
    if breach is not None:
        verdicts.append({"assertion": breach, "check": "never_calls", "family": "structural",
                         "outcome": "fail", "evidence": "observed"})
    quality = [{"assertion": "judge: polite", "passed": 2, "trials": 3, "rate": 0.67,
                "low": 0.2, "high": 0.94, "threshold": 0.8, "outcome": "inconclusive",
                "straddles": straddles}]
    return {"id": cid, "split": split, "outcome": outcome,
            "pass_at_1": 1.0 if outcome == "pass" else 0.0, "pass_hat_k": 1.0, "k": 1,
            "facets": dict(FACETS if facets is None else facets), "quality": quality,
            "trials": [{"n": 1, "outcome": outcome, "duration_s": 0.1, "usage": {},
                        "verdicts": verdicts}]}


def run(cases: list[dict[str, Any]], *, run_id: str = "R", interrupted: bool = False,
        suite: str = "demo/s@1") -> RunFacts:
    observed = [c for c in cases]
    overall = (sum(c["outcome"] == "pass" for c in observed) / len(observed)) if observed else None
    report = {"schema": "assay.report/1", "run_id": run_id,
              "suite": {"id": suite, "digest": "sha256:s", "hidden_set": None},
              "target": {"uri": "python:a:b", "digest": "sha256:t",
                         "facets": {"harness": "python", "host_version": "3.11"}},
              "started_at": "2026-12-01T00:00:00Z", "finished_at": "2026-12-01T00:00:01Z",
              "trials_per_case": 1, "evidence": "smoke",
              "scores": {"public": overall, "hidden": None, "overall": overall,
                         "pass_mark": 1.0, "passed": overall == 1.0, "flags": []},
              "counts": {}, "cost": {"usd": None}, "cases": cases,
              "interrupted": interrupted}
    return from_report(report, "store", {"entry": 1, "hash": "sha256:h"})


def test_a_run_without_breach_is_allowed_with_no_other_policy() -> None:
    # Failed cases alone do not block: only the policies asked for do (SPEC §8).
    result = decide(run([case("a"), case("b", "fail")]), Policies())
    assert result.decision == "allowed" and result.reasons == []
    assert result.policies["structural"] == {"ok": True, "breached_cases": 0}


def test_one_structural_breach_blocks_and_is_named() -> None:
    result = decide(run([case("a"), case("b", breach="never_calls: erp.transfer")]), Policies())
    assert result.decision == "blocked"
    assert result.reasons == ["b: structural check failed: never_calls: erp.transfer"]


def test_a_hidden_breach_is_named_as_a_holdout_with_nothing_of_it() -> None:
    cases = [case("a"), case("CANARY-secret", split="hidden", breach="never_calls: CANARY-x")]
    result = decide(run(cases), Policies())
    assert result.reasons == ["holdout-1: a structural check failed"]
    assert "CANARY" not in repr(result.to_json())


def test_an_interrupted_run_is_blocked() -> None:
    result = decide(run([case("a")], interrupted=True), Policies())
    assert result.decision == "blocked"
    assert result.reasons == ["the run was interrupted: not every case ran"]


def test_baseline_within_tolerance_is_allowed_and_beyond_it_blocked() -> None:
    base = run([case(c) for c in "abcdefghij"], run_id="BASE")  # 100%
    one_worse = run([case(c) for c in "abcdefghi"] + [case("j", "fail")])  # 90%
    allowed = decide(one_worse, Policies(baseline="BASE", tolerance=0.1), base)
    assert allowed.decision == "allowed"
    assert allowed.policies["baseline"] == {"run_id": "BASE", "tolerance": 0.1, "aligned": 10,
                                            "ok": True, "overall": 0.9,
                                            "baseline_overall": 1.0}
    blocked = decide(one_worse, Policies(baseline="BASE"), base)  # default tolerance 0.05
    assert blocked.decision == "blocked"
    assert blocked.reasons == ["overall 90.0% on 10 aligned case(s) is more than 5.0% under "
                               "the baseline BASE's 100.0%"]


def test_baseline_counts_only_aligned_cases() -> None:
    # Case j changed (its case digest) or gained a facet the baseline did not record:
    # its failure is not held against the run, nor its pass for the baseline.
    base = run([case(c) for c in "abcdefghij"], run_id="BASE")
    unverified = run([case(c) for c in "abcdefghi"]
                     + [case("j", "fail", facets={**FACETS, "fixture": "sha256:new"})])
    changed = run([case(c) for c in "abcdefghi"]
                  + [case("j", "fail", facets={"case": "sha256:other", "assertions": "sha256:a"})])
    same = run([case(c) for c in "abcdefghi"] + [case("j", "fail")])
    for facts in (unverified, changed):
        result = decide(facts, Policies(baseline="BASE"), base)
        assert result.decision == "allowed"
        assert result.policies["baseline"]["aligned"] == 9
    assert decide(same, Policies(baseline="BASE"), base).decision == "blocked"


def test_a_baseline_with_nothing_aligned_blocks() -> None:
    base = run([case("a")], run_id="BASE")
    cand = run([case("a", facets={"case": "sha256:other", "assertions": "sha256:a"})])
    result = decide(cand, Policies(baseline="BASE"), base)
    assert result.decision == "blocked"
    assert "no case is aligned with the baseline BASE" in result.reasons[0]


def test_a_baseline_of_another_suite_is_refused() -> None:
    with pytest.raises(UsageError, match="compare runs of one suite"):
        decide(run([case("a")]), Policies(baseline="B"), run([case("a")], suite="demo/t@1"))


def test_min_score_min_cases_critical_and_confident_alone() -> None:
    facts = run([case("a"), case("b", "fail"), case("c", straddles=True)])
    assert decide(facts, Policies(min_score=0.6)).decision == "allowed"
    low = decide(facts, Policies(min_score=0.7))
    assert low.reasons == ["overall 66.7% is under the required 70.0%"]
    assert decide(facts, Policies(min_cases=3)).decision == "allowed"
    assert decide(facts, Policies(min_cases=4)).reasons == [
        "3 case(s), fewer than the required 4"]
    assert decide(facts, Policies(critical=("a", "c"))).decision == "allowed"
    assert decide(facts, Policies(critical=("a", "b", "zz"))).reasons == [
        "critical case b did not pass (fail)", "critical case zz is not in the run"]
    confident = decide(facts, Policies(confident=True))
    assert confident.reasons == ["c: interval straddles the threshold: judge: polite"]
    assert decide(run([case("a")]), Policies(confident=True)).decision == "allowed"


def test_policies_combine_and_every_reason_is_named() -> None:
    base = run([case("a"), case("b"), case("c")], run_id="BASE")
    facts = run([case("a", breach="never_calls: x"), case("b", "fail"), case("c", "fail")])
    result = decide(facts, Policies(baseline="BASE", min_score=0.9, min_cases=5,
                                    critical=("b",)), base)
    assert result.decision == "blocked"
    assert result.reasons == [
        "a: structural check failed: never_calls: x",
        "overall 33.3% on 3 aligned case(s) is more than 5.0% under the baseline BASE's 100.0%",
        "overall 33.3% is under the required 90.0%",
        "3 case(s), fewer than the required 5",
        "critical case b did not pass (fail)",
    ]
    assert result.policies["asked"] == {"structural": True, "baseline": "BASE",
                                        "tolerance": 0.05, "min_score": 0.9, "min_cases": 5,
                                        "critical": ["b"]}


def test_a_hidden_critical_case_is_recorded_as_its_holdout_name() -> None:
    facts = run([case("a"), case("CANARY-h", "fail", split="hidden")])
    result = decide(facts, Policies(critical=("CANARY-h",)))
    assert result.reasons == ["critical case holdout-1 did not pass (fail)"]
    assert result.policies["asked"]["critical"] == ["holdout-1"]
    assert "CANARY" not in repr(result.to_json())
    # Decided again from what was recorded, the same decision.
    again = decide(facts, Policies.from_json(result.policies["asked"]))
    assert again.reasons == result.reasons


@pytest.mark.parametrize("policies, message", [
    (Policies(tolerance=0.1), "--tolerance applies to --baseline"),
    (Policies(baseline="B", tolerance=-0.1), "--tolerance must be between 0 and 1"),
    (Policies(baseline="B", tolerance=float("nan")), "--tolerance must be between 0 and 1"),
    (Policies(min_score=1.5), "--min-score must be between 0 and 1"),
    (Policies(min_cases=-1), "--min-cases must be 0 or more"),
])
def test_policies_that_cannot_be_checked_are_refused(policies: Policies, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        policies.check()

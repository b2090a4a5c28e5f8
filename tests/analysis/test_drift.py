"""The drift decision (analysis/drift.py) on reports built as ``assay run`` writes them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.analysis.drift import drift
from assay.analysis.run_facts import RunFacts, from_report
from assay.errors import UsageError

DIGEST = "sha256:" + "a" * 64
SECRET = "CANARY-9d1e"


def _case(case_id: str, outcome: str, model: str = "m-2025-01",
          split: str = "public") -> dict[str, Any]:
    passed = outcome == "pass"
    return {
        "id": case_id, "split": split, "outcome": outcome, "reason": None,
        "pass_at_1": 1.0 if passed else 0.0, "pass_hat_k": 1.0 if passed else 0.0, "k": 1,
        "trials": [{"n": 1, "outcome": outcome, "duration_s": 0.2,
                    "usage": {"input_tokens": 10, "output_tokens": 3, "cost_usd": None},
                    "verdicts": [{"assertion": "contains", "check": "contains",
                                  "family": "output", "outcome": outcome,
                                  "evidence": "observed", "note": "", "threshold": None}]}],
        "facets": {"case": "sha256:" + case_id.encode().hex().ljust(64, "0")[:64],
                   "assertions": "sha256:" + "b" * 64, "model": model},
    }


def _report(run_id: str, cases: list[dict[str, Any]], model: str = "m-2025-01",
            started: str = "2026-01-01T00:00:00.000Z", **facets: str) -> RunFacts:
    data = {
        "schema": "assay.report/1", "run_id": run_id,
        "suite": {"id": "demo/drift@1", "digest": "sha256:" + "c" * 64,
                  "hidden_set": "sha256:" + "d" * 64},
        "target": {"uri": "openai:m", "digest": DIGEST,
                   "facets": {"harness": "openai", "model": model, **facets}},
        "started_at": started, "finished_at": started, "trials_per_case": 1,
        "scores": {"public": None, "hidden": None, "overall": None, "pass_mark": 1.0,
                   "passed": all(c["outcome"] == "pass" for c in cases), "flags": []},
        "cost": {"usd": None, "input_tokens": 10, "output_tokens": 3},
        "cases": cases, "interrupted": False,
    }
    # As the store keeps it: JSON text, read back.
    return from_report(json.loads(json.dumps(data)), "store")


def _pair(base_cases: list[dict[str, Any]], cand_cases: list[dict[str, Any]],
          cand_model: str = "m-2025-01", **cand_facets: str) -> tuple[RunFacts, RunFacts]:
    return (_report("run-1", base_cases),
            _report("run-2", cand_cases, cand_model, "2026-01-01T01:00:00.000Z", **cand_facets))


def test_the_same_outcomes_from_the_same_model_are_stable():
    cases = [_case("refund", "pass"), _case("lookup", "fail"),
             _case(SECRET, "pass", split="hidden")]
    found = drift(*_pair(cases, [dict(c) for c in cases]))
    assert found.status == "stable"
    assert found.changed == [] and found.flipped == []
    document = found.to_json()
    assert document["schema"] == "assay.drift/1"
    assert document["status"] == "stable"
    assert document["suite"] == "demo/drift@1"
    assert document["target"] == {"uri": "openai:m", "digest": DIGEST}
    assert document["base"]["run_id"] == "run-1" and document["cand"]["run_id"] == "run-2"
    assert document["cand"]["started_at"] == "2026-01-01T01:00:00.000Z"


def test_cases_that_flip_under_the_same_model_are_drift():
    base = [_case("refund", "pass"), _case("lookup", "fail"), _case("stays", "pass"),
            _case(SECRET, "fail", split="hidden")]
    cand = [_case("refund", "fail"), _case("lookup", "pass"), _case("stays", "pass"),
            _case(SECRET, "pass", split="hidden")]
    found = drift(*_pair(base, cand))
    assert found.status == "drift"
    assert found.changed == []
    assert [f.to_json() for f in found.flipped] == [
        {"case": "refund", "split": "public", "base": "pass", "cand": "fail",
         "change": "regressed"},
        {"case": "lookup", "split": "public", "base": "fail", "cand": "pass", "change": "fixed"},
        {"case": "holdout-1", "split": "hidden", "base": "fail", "cand": "pass",
         "change": "fixed"},
    ]
    assert SECRET not in json.dumps(found.to_json())


def test_fail_to_broken_is_not_a_flip():
    found = drift(*_pair([_case("refund", "fail")], [_case("refund", "broken")]))
    assert found.status == "stable"


def test_a_model_that_moved_behind_the_alias_is_changed():
    cases = [_case("refund", "pass")]
    found = drift(*_pair(cases, [_case("refund", "pass", model="m-2025-06")], "m-2025-06"))
    assert found.status == "changed"
    # The run's move is named once; each case serving the same move is not repeated.
    assert [m.to_json() for m in found.changed] == [
        {"facet": "model", "base": "m-2025-01", "cand": "m-2025-06"}]
    assert found.to_json()["cand"]["facets"] == {"model": "m-2025-06"}


def test_a_host_version_that_moved_is_changed():
    base = _report("run-1", [_case("refund", "pass")], host_version="1.0.3")
    cand = _report("run-2", [_case("refund", "pass")], host_version="1.0.4")
    found = drift(base, cand)
    assert found.status == "changed"
    assert [m.to_json() for m in found.changed] == [
        {"facet": "host_version", "base": "1.0.3", "cand": "1.0.4"}]


def test_one_case_served_another_model_is_changed_and_named():
    base = [_case("refund", "pass"), _case("lookup", "pass")]
    cand = [_case("refund", "pass"), _case("lookup", "pass", model="m-2025-01, m-2025-06")]
    found = drift(*_pair(base, cand))
    assert found.status == "changed"
    assert [m.to_json() for m in found.changed] == [
        {"facet": "model", "base": "m-2025-01", "cand": "m-2025-01, m-2025-06",
         "case": "lookup", "split": "public"}]


def test_a_hidden_case_served_another_model_is_changed_without_its_id_or_values():
    pinned, moved = f"{SECRET}-pin-2025-01", f"{SECRET}-pin-2025-06"
    base = [_case("refund", "pass"), _case(f"{SECRET}-id", "pass", pinned, "hidden")]
    cand = [_case("refund", "pass"), _case(f"{SECRET}-id", "pass", moved, "hidden")]
    found = drift(*_pair(base, cand))
    assert found.status == "changed"
    assert [m.to_json() for m in found.changed] == [
        {"facet": "model", "base": None, "cand": None, "case": "holdout-1", "split": "hidden"}]
    assert SECRET not in json.dumps(found.to_json())


def test_a_case_whose_content_moved_is_changed_by_facet_name_only():
    edited = _case("refund", "fail")
    edited["facets"]["assertions"] = "sha256:" + "e" * 64
    found = drift(*_pair([_case("refund", "pass")], [edited]))
    assert found.status == "changed"
    assert [m.to_json() for m in found.changed] == [
        {"facet": "assertions", "base": None, "cand": None, "case": "refund",
         "split": "public"}]
    assert [f.case for f in found.flipped] == ["refund"]


def test_changed_wins_over_drift_and_the_flips_are_still_listed():
    base = [_case("refund", "pass"), _case("lookup", "pass")]
    cand = [_case("refund", "fail", "m-2025-06"), _case("lookup", "pass", "m-2025-06")]
    found = drift(*_pair(base, cand, "m-2025-06"))
    assert found.status == "changed"
    assert [m.facet for m in found.changed] == ["model"]
    assert [(f.case, f.change) for f in found.flipped] == [("refund", "regressed")]
    assert found.to_json()["flipped"][0]["change"] == "regressed"


def test_batteries_of_two_agent_versions_are_refused():
    base = _report("run-1", [_case("refund", "pass")])
    other = from_report({**json.loads(json.dumps(_raw(base))),
                         "target": {"uri": "openai:m", "digest": "sha256:" + "f" * 64,
                                    "facets": {}}}, "store")
    with pytest.raises(UsageError, match="one agent version"):
        drift(base, other)


def _raw(run: RunFacts) -> dict[str, Any]:
    """A minimal report of ``run``'s suite (for building a sibling)."""
    return {"schema": "assay.report/1", "run_id": "run-9",
            "suite": {"id": run.suite_id, "digest": run.suite_digest, "hidden_set": None},
            "started_at": run.started_at,
            "scores": {"pass_mark": 1.0, "passed": True}, "cost": {}, "cases": []}

"""``analysis.compare`` on small reports written here: alignment, changes, cost, significance.

Pure: each run is a report dict made by :func:`report` and read with
``run_facts.from_report``, as ``assay compare`` reads a report file
(``source="file"``, hidden cases as ``holdout-N``) or a stored run
(``source="store"``, hidden cases by their real id).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from assay.analysis.compare import Comparison, compare
from assay.analysis.run_facts import RunFacts, from_report
from assay.errors import UsageError

#: A case's own facets as ``suites.facets`` records them, each a distinct digest.
CASE_FACETS = ("case", "assertions", "fixture", "graders", "invocation")
#: The run's facets (the target's), shared by every case.
RUN_FACETS = {"harness": "python", "host_version": "3.11.7", "model": "m-1"}


def facets_of(case_id: str, **changed: str | None) -> dict[str, str]:
    """A case's facets: one made-up digest per facet; ``name=None`` leaves one out."""
    found = {name: f"sha256:{name}-{case_id}" for name in CASE_FACETS}
    for name, value in changed.items():
        if value is None:
            found.pop(name, None)
        else:
            found[name] = value
    return found


def case(case_id: str, outcome: str = "pass", *, split: str = "public",
         pass_at_1: float | None = None, facets: dict[str, str] | None = None,
         usd: float | None = None, tokens: int | None = None, trials: int = 1,
         redacted: bool = False) -> dict[str, Any]:
    """One case of a report; ``redacted``: a holdout as a report file shows it (outcome only).

    ``usd`` and ``tokens`` are the case's whole spend, split evenly over its trials.
    """
    if redacted:
        return {"id": case_id, "split": split, "outcome": outcome}
    p = pass_at_1 if pass_at_1 is not None else 1.0 if outcome == "pass" else 0.0
    usage: dict[str, Any] = {}
    if usd is not None:
        usage["cost_usd"] = usd / trials
    if tokens is not None:
        usage["input_tokens"] = tokens // trials
        usage["output_tokens"] = 0
    found: dict[str, Any] = {
        "id": case_id, "split": split, "outcome": outcome, "pass_at_1": p,
        "pass_hat_k": p, "trials": [
            {"n": n + 1, "outcome": outcome, "duration_s": 0.5, "usage": dict(usage),
             "verdicts": []} for n in range(trials)]}
    if facets is not None:
        found["facets"] = facets
    return found


def report(cases: list[dict[str, Any]], *, run_id: str = "run-a", suite: str = "demo/s@1",
           run_facets: dict[str, str] | None = None, hidden_set: str | None = "sha256:hs-1",
           ) -> dict[str, Any]:
    """A report (schema ``assay.report/1``) holding ``cases``, with totals summed from them."""
    usd = [t["usage"]["cost_usd"] for c in cases for t in c.get("trials", ())
           if "cost_usd" in t["usage"]]
    tokens = [t["usage"]["input_tokens"] for c in cases for t in c.get("trials", ())
              if "input_tokens" in t["usage"]]
    suite_part: dict[str, Any] = {"id": suite, "digest": "sha256:suite"}
    if hidden_set is not None:
        suite_part["hidden_set"] = hidden_set
    passed = sum(1 for c in cases if c["outcome"] == "pass")
    return {
        "schema": "assay.report/1", "run_id": run_id, "suite": suite_part,
        "target": {"uri": f"python:agent_{run_id}:agent", "digest": f"sha256:t-{run_id}",
                   "facets": dict(RUN_FACETS if run_facets is None else run_facets)},
        "started_at": "2026-12-01T00:00:00.000Z", "finished_at": "2026-12-01T00:00:01.000Z",
        "trials_per_case": 1, "evidence": "smoke",
        "scores": {"public": None, "hidden": None, "overall": passed / len(cases) if cases
                   else None, "pass_mark": 1.0, "passed": passed == len(cases), "flags": []},
        "cost": {"usd": math.fsum(usd) if usd else None,
                 "input_tokens": sum(tokens) if tokens else None,
                 "output_tokens": 0 if tokens else None},
        "cases": cases,
        "seal": {"entry": 1, "hash": "sha256:seal"},
    }


def facts(cases: list[dict[str, Any]], *, source: str = "file", **options: Any) -> RunFacts:
    return from_report(report(cases, **options), source)


def public(*ids_outcomes: tuple[str, str], **options: Any) -> list[dict[str, Any]]:
    """Public cases with the standard facets: ``("a", "pass"), ("b", "fail")``."""
    return [case(i, o, facets=facets_of(i), **options) for i, o in ids_outcomes]


def rows_of(result: Comparison) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    return {r.label: (r.change, r.alignment, r.differs) for r in result.rows}


# --- alignment ---------------------------------------------------------------


def test_the_same_case_run_twice_is_aligned() -> None:
    base = facts(public(("a", "pass"), ("b", "fail")), run_id="base")
    cand = facts(public(("a", "pass"), ("b", "fail")), run_id="cand")
    result = compare(base, cand)
    assert rows_of(result) == {"a": ("same", "aligned", ()), "b": ("same", "aligned", ())}
    assert [r.unrecorded for r in result.rows] == [(), ()]
    assert result.verdict == "same"


def test_a_side_without_facets_leaves_its_rows_unverified() -> None:
    """A report made before facets were kept: nothing differs, nothing is proved either."""
    old = facts([case("a", "pass"), case("b", "pass")], run_id="old")
    new = facts(public(("a", "pass"), ("b", "fail")), run_id="new")
    result = compare(old, new)
    assert rows_of(result) == {"a": ("same", "unverified", ()),
                               "b": ("regressed", "unverified", ())}
    assert result.rows[0].unrecorded == tuple(sorted(CASE_FACETS))
    # Only aligned rows decide: a regression nobody can vouch for decides nothing.
    assert result.verdict == "non-comparable"
    assert result.aligned == [] and result.diff is None


def test_one_facet_missing_on_one_side_is_unverified_not_aligned() -> None:
    base = facts([case("a", facets=facets_of("a", graders=None))], run_id="base")
    cand = facts([case("a", facets=facets_of("a"))], run_id="cand")
    (row,) = compare(base, cand).rows
    assert (row.alignment, row.differs, row.unrecorded) == ("unverified", (), ("graders",))


@pytest.mark.parametrize("facet", [*CASE_FACETS, "model"])
def test_a_case_facet_that_differs_makes_its_row_non_comparable(facet: str) -> None:
    base = facts(public(("a", "pass"), ("b", "pass")), run_id="base")
    moved = [case("a", "fail", facets=facets_of("a", **{facet: "sha256:moved"})),
             case("b", "pass", facets=facets_of("b"))]
    result = compare(base, facts(moved, run_id="cand"))
    assert rows_of(result) == {"a": ("regressed", "non-comparable", (facet,)),
                               "b": ("same", "aligned", ())}
    # The regression is in a row no delta is claimed for: not worse.
    assert result.verdict == "same"
    assert json.dumps(result.to_json()).count("sha256:moved") == 0  # names, never values


@pytest.mark.parametrize("facet", ["harness", "host_version", "model"])
def test_a_run_facet_that_differs_makes_every_row_non_comparable(facet: str) -> None:
    base = facts(public(("a", "pass"), ("b", "pass")), run_id="base")
    cand = facts(public(("a", "pass"), ("b", "fail")), run_id="cand",
                 run_facets={**RUN_FACETS, facet: "other"})
    result = compare(base, cand)
    assert rows_of(result) == {"a": ("same", "non-comparable", (facet,)),
                               "b": ("regressed", "non-comparable", (facet,))}
    assert result.verdict == "non-comparable"
    assert result.aligned == [] and result.diff is None and result.se is None
    assert result.mcnemar_p == 1.0


def test_the_model_a_case_says_answered_outranks_the_runs() -> None:
    """Same URI and run model, but the trials say another model answered one case."""
    base = facts(public(("a", "pass"), ("b", "pass")), run_id="base")
    cand = facts([case("a", facets={**facets_of("a"), "model": "m-1-served-by-alias"}),
                  case("b", facets={**facets_of("b"), "model": "m-1"})], run_id="cand")
    result = compare(base, cand)
    assert rows_of(result) == {"a": ("same", "non-comparable", ("model",)),
                               "b": ("same", "aligned", ())}


# --- changes -----------------------------------------------------------------


def test_every_change_kind() -> None:
    base = facts(public(("same", "pass"), ("fixed", "fail"), ("regressed", "pass"),
                        ("removed", "pass"), ("broken-to-fail", "broken")), run_id="base")
    cand = facts(public(("same", "pass"), ("fixed", "pass"), ("regressed", "inconclusive"),
                        ("broken-to-fail", "fail"), ("added", "pass")), run_id="cand")
    result = compare(base, cand)
    assert [(r.label, r.base, r.cand, r.change, r.alignment) for r in result.rows] == [
        ("same", "pass", "pass", "same", "aligned"),
        ("fixed", "fail", "pass", "fixed", "aligned"),
        ("regressed", "pass", "inconclusive", "regressed", "aligned"),
        ("removed", "pass", None, "removed", "non-comparable"),
        ("broken-to-fail", "broken", "fail", "same", "aligned"),  # not pass either side
        ("added", None, "pass", "added", "non-comparable"),       # the candidate's new case last
    ]
    assert result.verdict == "worse"


def test_a_fix_and_no_regression_is_better() -> None:
    base = facts(public(("a", "pass"), ("b", "fail")), run_id="base")
    cand = facts(public(("a", "pass"), ("b", "pass")), run_id="cand")
    assert compare(base, cand).verdict == "better"


def test_an_added_or_removed_case_decides_nothing() -> None:
    base = facts(public(("a", "pass"), ("gone", "pass")), run_id="base")
    cand = facts(public(("a", "pass"), ("new", "fail")), run_id="cand")
    result = compare(base, cand)
    assert result.verdict == "same"
    assert [r.label for r in result.aligned] == ["a"]


def test_nothing_aligned_is_non_comparable_even_when_everything_regressed() -> None:
    base = facts(public(("a", "pass"), ("b", "pass")), run_id="base")
    cand = facts([case(i, "fail", facets=facets_of(i, fixture="sha256:new")) for i in "ab"],
                 run_id="cand")
    result = compare(base, cand)
    assert {r.change for r in result.rows} == {"regressed"}
    assert result.verdict == "non-comparable"


def test_two_suites_are_refused() -> None:
    base = facts(public(("a", "pass")), run_id="base", suite="demo/s@1")
    cand = facts(public(("a", "pass")), run_id="cand", suite="demo/s@2")
    with pytest.raises(UsageError, match="compare runs of one suite") as caught:
        compare(base, cand)
    assert "demo/s@1" in str(caught.value) and "demo/s@2" in str(caught.value)


@pytest.mark.parametrize("tolerance", [-0.1, math.nan, math.inf])
def test_a_cost_tolerance_that_is_no_fraction_is_refused(tolerance: float) -> None:
    base = facts(public(("a", "pass")), run_id="base")
    with pytest.raises(UsageError, match="cost-tolerance"):
        compare(base, base, tolerance)


# --- cost --------------------------------------------------------------------


def test_the_same_answers_for_thirty_percent_more_money_is_worse() -> None:
    base = facts(public(("a", "pass"), ("b", "fail"), usd=0.10, tokens=100), run_id="base")
    cand = facts(public(("a", "pass"), ("b", "fail"), usd=0.13, tokens=100), run_id="cand")
    result = compare(base, cand)
    assert result.verdict == "worse" and result.dearer == ("usd",)
    assert result.aligned_cost["usd"] == (pytest.approx(0.20), pytest.approx(0.26))
    assert result.aligned_cost["tokens"] == (200, 200)
    assert result.to_json()["cost"]["dearer"] == ["usd"]


def test_twenty_percent_more_within_a_quarter_is_the_same() -> None:
    base = facts(public(("a", "pass"), usd=0.10, tokens=100), run_id="base")
    cand = facts(public(("a", "pass"), usd=0.12, tokens=120), run_id="cand")
    assert compare(base, cand, 0.25).verdict == "same"
    tight = compare(base, cand, 0.1)  # the tolerance is the user's
    assert tight.verdict == "worse" and tight.dearer == ("usd", "tokens")


def test_more_tokens_alone_is_worse() -> None:
    base = facts(public(("a", "pass"), tokens=1000), run_id="base")
    cand = facts(public(("a", "pass"), tokens=3000), run_id="cand")
    result = compare(base, cand)
    assert result.aligned_cost["usd"] == (None, None)
    assert (result.verdict, result.dearer) == ("worse", ("tokens",))


def test_a_cost_nobody_reported_on_one_side_is_not_compared() -> None:
    base = facts(public(("a", "pass"), ("b", "pass")), run_id="base")  # unavailable: not 0
    cand = facts(public(("a", "pass"), ("b", "pass"), usd=5.0, tokens=10**6), run_id="cand")
    result = compare(base, cand)
    assert result.aligned_cost == {"usd": (None, None), "tokens": (None, None)}
    assert (result.verdict, result.dearer) == ("same", ())
    assert result.base_totals.cost_usd is None and result.cand_totals.cost_usd == 10.0


def test_cost_counts_only_aligned_rows() -> None:
    """A dear case that is non-comparable (its fixture moved) does not make the run dearer."""
    base = facts(public(("a", "pass"), ("b", "pass"), usd=0.10), run_id="base")
    cand = facts([case("a", facets=facets_of("a"), usd=0.10),
                  case("b", facets=facets_of("b", fixture="sha256:new"), usd=9.0)],
                 run_id="cand")
    result = compare(base, cand)
    assert result.aligned_cost["usd"] == (pytest.approx(0.10), pytest.approx(0.10))
    assert result.verdict == "same"
    assert result.cand_totals.cost_usd == pytest.approx(9.10)  # the totals are the whole run


def test_a_fix_that_costs_more_is_better_not_worse() -> None:
    """Worse-by-cost is 'the same outcomes for more' (SPEC §8); a fix changes the outcomes."""
    base = facts(public(("a", "pass"), ("b", "fail"), usd=0.10), run_id="base")
    cand = facts(public(("a", "pass"), ("b", "pass"), usd=0.50), run_id="cand")
    assert compare(base, cand).verdict == "better"


# --- significance --------------------------------------------------------------


def test_significance_over_aligned_rows_by_hand() -> None:
    # Six aligned cases (base pass@1 → cand pass@1), and one that regressed but is
    # non-comparable (its assertions moved), which must count nowhere:
    #   c1 1.0 → 1.0  d =  0     same
    #   c2 1.0 → 0.0  d = −1     regressed
    #   c3 1.0 → 0.5  d = −0.5   regressed (fail: a structural breach in one of two trials)
    #   c4 0.5 → 1.0  d = +0.5   fixed
    #   c5 0.0 → 0.0  d =  0     same
    #   c6 1.0 → 0.0  d = −1     regressed
    # mean d = −2 / 6 = −1/3
    # deviations 1/3, −2/3, −1/6, 5/6, 1/3, −2/3 → squares in 36ths: 4+16+1+25+4+16 = 66/36 = 11/6
    # sample variance (11/6) / 5 = 11/30; se = sqrt(11/30 / 6) = sqrt(11/180) = 0.247207
    # McNemar: 3 regressed, 1 fixed → n = 4, tail C(4,0)+C(4,1) = 5 → p = 2·5/16 = 0.625
    base = [(1.0, "pass"), (1.0, "pass"), (1.0, "pass"), (0.5, "fail"), (0.0, "fail"),
            (1.0, "pass")]
    cand = [(1.0, "pass"), (0.0, "fail"), (0.5, "fail"), (1.0, "pass"), (0.0, "fail"),
            (0.0, "fail")]
    ids = [f"c{n}" for n in range(1, 7)]
    base_run = facts([*(case(i, o, pass_at_1=p, facets=facets_of(i))
                        for i, (p, o) in zip(ids, base, strict=True)),
                      case("c7", "pass", facets=facets_of("c7"))], run_id="base")
    cand_run = facts([*(case(i, o, pass_at_1=p, facets=facets_of(i))
                        for i, (p, o) in zip(ids, cand, strict=True)),
                      case("c7", "fail", facets=facets_of("c7", assertions="sha256:x"))],
                     run_id="cand")
    result = compare(base_run, cand_run)
    assert len(result.aligned) == 6
    assert result.diff == pytest.approx(-1 / 3)
    assert result.se == pytest.approx(math.sqrt(11 / 180))
    assert result.se == pytest.approx(0.247207, abs=1e-6)
    assert result.mcnemar_p == pytest.approx(0.625)
    assert result.verdict == "worse"
    significance = result.to_json()["significance"]
    assert significance["pass_at_1_diff"] == pytest.approx(-1 / 3)
    assert significance["se"] == pytest.approx(0.247207, abs=1e-6)
    assert significance["mcnemar_p"] == pytest.approx(0.625)
    assert significance["aligned"] == 6
    # The totals are each whole run's (seven cases), not the aligned rows'.
    assert result.base_totals.pass_at_1 == pytest.approx((4.5 + 1.0) / 7)
    assert result.cand_totals.pass_at_1 == pytest.approx(2.5 / 7)
    assert (result.base_totals.passed, result.cand_totals.passed) == (5, 2)


def test_one_aligned_case_has_a_difference_and_no_standard_error() -> None:
    base = facts(public(("a", "pass")), run_id="base")
    cand = facts(public(("a", "fail")), run_id="cand")
    result = compare(base, cand)
    assert (result.diff, result.se, result.mcnemar_p) == (-1.0, None, 1.0)


# --- hidden cases ----------------------------------------------------------------


def _stored_hidden(run_id: str, order: list[tuple[str, str]], **options: Any) -> RunFacts:
    """A stored run's full report: hidden cases keep their real ids and facets."""
    cases = [*public(("p", "pass")),
             *(case(i, o, split="hidden", facets=facets_of(i)) for i, o in order)]
    return facts(cases, source="store", run_id=run_id, **options)


def test_two_stored_runs_align_hidden_cases_by_identity_whatever_their_order() -> None:
    base = _stored_hidden("base", [("secret-one", "pass"), ("secret-two", "pass")])
    cand = _stored_hidden("cand", [("secret-two", "fail"), ("secret-one", "pass")])
    result = compare(base, cand)
    assert [(r.label, r.split, r.change, r.alignment) for r in result.rows] == [
        ("p", "public", "same", "aligned"),
        ("holdout-1", "hidden", "same", "aligned"),        # secret-one
        ("holdout-2", "hidden", "regressed", "aligned"),   # secret-two
    ]
    assert result.verdict == "worse"
    shown = json.dumps(result.to_json())
    assert "secret" not in shown and "sha256:case-secret" not in shown
    assert [r["case"] for r in result.to_json()["rows"]] == ["p", "holdout-1", "holdout-2"]


def test_a_stored_hidden_case_whose_content_moved_is_non_comparable_by_name_only() -> None:
    base = _stored_hidden("base", [("secret-one", "pass")])
    cand = facts([*public(("p", "pass")),
                  case("secret-one", "fail", split="hidden",
                       facets=facets_of("secret-one", case="sha256:edited"))],
                 source="store", run_id="cand")
    (_, hidden) = compare(base, cand).rows
    assert (hidden.label, hidden.alignment, hidden.differs) == (
        "holdout-1", "non-comparable", ("case",))


def test_a_hidden_case_only_one_stored_run_has_is_added_or_removed() -> None:
    base = _stored_hidden("base", [("secret-one", "pass"), ("secret-old", "pass")])
    cand = _stored_hidden("cand", [("secret-one", "pass"), ("secret-new", "fail")])
    result = compare(base, cand)
    assert [(r.label, r.change) for r in result.rows] == [
        ("p", "same"), ("holdout-1", "same"), ("holdout-2", "removed"), ("holdout-3", "added")]
    assert result.verdict == "same"


def _file_hidden(run_id: str, outcomes: list[str], hidden_set: str | None) -> RunFacts:
    """A report file: hidden cases redacted to holdout-N and their outcome."""
    cases = [*public(("p", "pass")),
             *(case(f"holdout-{n}", o, split="hidden", redacted=True)
               for n, o in enumerate(outcomes, 1))]
    return facts(cases, source="file", run_id=run_id, hidden_set=hidden_set)


def test_report_files_align_holdouts_by_position_when_the_hidden_sets_match() -> None:
    base = _file_hidden("base", ["pass", "pass"], "sha256:hs-1")
    cand = _file_hidden("cand", ["pass", "fail"], "sha256:hs-1")
    result = compare(base, cand)
    assert rows_of(result) == {"p": ("same", "aligned", ()),
                               "holdout-1": ("same", "aligned", ()),
                               "holdout-2": ("regressed", "aligned", ())}
    assert result.verdict == "worse"


def test_report_files_of_two_hidden_sets_do_not_align_their_holdouts() -> None:
    base = _file_hidden("base", ["pass", "pass"], "sha256:hs-1")
    cand = _file_hidden("cand", ["pass", "fail"], "sha256:hs-2")
    result = compare(base, cand)
    assert rows_of(result) == {"p": ("same", "aligned", ()),
                               "holdout-1": ("same", "non-comparable", ("hidden_set",)),
                               "holdout-2": ("regressed", "non-comparable", ("hidden_set",))}
    assert result.verdict == "same"


@pytest.mark.parametrize(("base_set", "cand_set"), [
    (None, "sha256:hs-1"), ("sha256:hs-1", None), (None, None)])
def test_a_report_file_that_does_not_say_its_hidden_set_leaves_holdouts_unverified(
        base_set: str | None, cand_set: str | None) -> None:
    """Position alone proves nothing: without both digests the holdouts are not aligned."""
    base = _file_hidden("base", ["pass", "pass"], base_set)
    cand = _file_hidden("cand", ["pass", "fail"], cand_set)
    result = compare(base, cand)
    hidden = [r for r in result.rows if r.split == "hidden"]
    assert [(r.alignment, r.differs) for r in hidden] == [("unverified", ())] * 2
    assert all("hidden_set" in r.unrecorded for r in hidden)
    assert result.verdict == "same"  # the regressed holdout-2 decides nothing


def test_a_stored_run_and_a_report_file_align_holdouts_by_position_and_set() -> None:
    stored = _stored_hidden("base", [("secret-one", "pass"), ("secret-two", "pass")])
    filed = _file_hidden("cand", ["pass", "fail"], "sha256:hs-1")
    result = compare(stored, filed)
    assert rows_of(result) == {"p": ("same", "aligned", ()),
                               "holdout-1": ("same", "aligned", ()),
                               "holdout-2": ("regressed", "aligned", ())}
    assert result.verdict == "worse"
    assert "secret" not in json.dumps(result.to_json())
    other = _file_hidden("cand", ["pass", "fail"], "sha256:hs-2")
    assert {r.differs for r in compare(stored, other).rows if r.split == "hidden"} == {
        ("hidden_set",)}


# --- the JSON ------------------------------------------------------------------


def test_the_json_has_the_schema_and_the_keys_of_spec_8() -> None:
    base = facts(public(("refund", "pass"), ("b", "pass"), usd=0.05, tokens=450),
                 run_id="base")
    cand = facts(public(("refund", "fail"), ("b", "pass"), usd=0.15, tokens=1350),
                 run_id="cand")
    document = compare(base, cand).to_json()
    assert json.loads(json.dumps(document)) == document  # plain JSON
    assert document["schema"] == "assay.compare/1"
    assert document["base"]["run_id"] == "base" and document["cand"]["run_id"] == "cand"
    assert document["rows"][0] == {
        "case": "refund", "split": "public", "base": "pass", "cand": "fail",
        "change": "regressed", "alignment": "aligned", "differs": [], "unrecorded": []}
    for side, passed, p, usd, tokens in (("base", 2, 1.0, 0.10, 900),
                                         ("cand", 1, 0.5, 0.30, 2700)):
        totals = document["totals"][side]
        assert {"passed", "pass_at_1", "cost_usd", "tokens"} <= set(totals)
        assert (totals["passed"], totals["pass_at_1"], totals["tokens"]) == (passed, p, tokens)
        assert totals["cost_usd"] == pytest.approx(usd)
    assert {"pass_at_1_diff", "se", "mcnemar_p"} <= set(document["significance"])
    assert document["significance"]["pass_at_1_diff"] == pytest.approx(-0.5)
    assert document["verdict"] == "worse"


def test_a_stored_run_against_its_own_report_file_differs_in_nothing() -> None:
    """The file shows a holdout's outcome only; the store knows its pass@1 over trials.
    Paired, the store's side must not claim more than the file can (a 0.5 against the
    file's 0.0 would be a difference the same run never had)."""
    cases = [case("p", "pass", facets=facets_of("p"), trials=2),
             case("secret", "fail", split="hidden", pass_at_1=0.5, trials=2,
                  facets=facets_of("secret"))]
    stored = from_report(report(cases, run_id="same"), "store")
    redacted = [cases[0], case("holdout-1", "fail", split="hidden", redacted=True)]
    filed = from_report(report(redacted, run_id="same"), "file")
    for base, cand in ((stored, filed), (filed, stored)):
        result = compare(base, cand)
        assert [(r.label, r.change, r.alignment) for r in result.rows] == [
            ("p", "same", "aligned"), ("holdout-1", "same", "aligned")]
        assert (result.diff, result.se) == (0.0, 0.0)

"""The battery's plain records write the bytes their models write, and become the same models.

A case the battery folds is kept as a ``PlainCase`` and written to the spool
(and so the report) by orjson: the bytes must be those the validated
``CaseResult`` would give, for every value a trial can carry, or a sealed
report would differ from the same report re-dumped.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from assay.engine.spool import case_json
from assay.grading.fold import fold_case, fold_case_plain, fold_trial, fold_trial_plain
from assay.model import Case, Evidence, Trace, Usage
from assay.model.changes import FileChange
from assay.model.records import PlainCase, PlainTrial, PlainVerdict
from assay.model.result import RateSummary
from assay.model.storable import storable_note
from assay.model.turns import TurnSummary

# Every code point: lone surrogates (st.text leaves them out by default), NUL, controls.
texts = st.text(alphabet=st.characters(exclude_categories=()), max_size=30)
floats = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                   st.floats(min_value=1e-12, max_value=1e-3), st.just(1e16), st.just(5e-324))
maybe_floats = st.none() | floats
ints = st.one_of(st.integers(-2**70, 2**70), st.integers(0, 10**6))

verdicts = st.builds(
    lambda a, c, fam, out, ev, note, prov, thr, score: PlainVerdict(
        a, c, fam, out, ev, storable_note(note), prov, thr, score),
    texts, texts, st.sampled_from(["output", "structural", "quality"]),
    st.sampled_from(["pass", "fail", "inconclusive"]), st.sampled_from(list(Evidence)),
    texts, texts, maybe_floats, maybe_floats)

changes = st.none() | st.lists(st.builds(
    FileChange, path=texts, change=st.sampled_from(["created", "modified", "deleted"]),
    size=st.none() | st.integers(0, 2**40), sha256=st.none() | texts,
    link=st.none() | texts, binary=st.booleans()), max_size=3)
turns = st.none() | st.lists(st.builds(
    TurnSummary, turn=st.integers(1, 9), user=st.none() | texts,
    calls=st.lists(texts, max_size=3), reply=st.none() | texts), max_size=3)
usages = st.builds(Usage, input_tokens=st.none() | st.integers(0, 2**62),
                   output_tokens=st.none() | st.integers(0, 2**62), cost_usd=maybe_floats)

trials = st.builds(
    lambda n, out, reason, dur, usage, vs, ch, tu: PlainTrial(
        n, out, None if reason is None else storable_note(reason), dur, usage, vs, ch, tu,
        None, {}),
    st.integers(1, 50), st.sampled_from(["pass", "fail", "inconclusive", "broken"]),
    st.none() | texts, floats, usages, st.lists(verdicts, max_size=3), changes, turns)

summaries = st.builds(
    RateSummary, assertion=texts, passed=st.integers(0, 9), trials=st.integers(0, 9),
    rate=floats, low=floats, high=floats, threshold=floats,
    outcome=st.sampled_from(["pass", "fail", "inconclusive"]), straddles=st.booleans(),
    score=maybe_floats)

cases = st.builds(
    PlainCase, id=texts, split=st.sampled_from(["public", "hidden"]),
    outcome=st.sampled_from(["pass", "fail", "inconclusive", "broken"]),
    reason=st.none() | texts.map(storable_note), pass_at_1=floats, pass_hat_k=floats,
    k=ints, pass_hat=st.dictionaries(texts, floats, max_size=3), synthetic=st.booleans(),
    tags=st.lists(texts, max_size=3), quality=st.lists(summaries, max_size=2),
    score=maybe_floats, trials=st.lists(trials, max_size=3),
    facets=st.dictionaries(texts, texts, max_size=3))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases)
def test_a_plain_case_is_written_as_its_model_is(case: PlainCase) -> None:
    model = case.to_model()
    assert case_json(case) == case_json(model)


def _case() -> Case:
    return Case(id="c-1", input="hi", expect=[{"equals": "hi"}], tags=["t"])


@given(st.lists(verdicts, max_size=4), st.booleans(), st.none() | texts)
@settings(max_examples=200, deadline=None)
def test_the_plain_folds_decide_as_the_model_folds(found: list[PlainVerdict], broken: bool,
                                                    reason: str | None) -> None:
    trace = Trace(output="hi", duration_s=0.001)
    reason = reason or ("crashed" if broken else None)
    plain = fold_trial_plain(2, found, broken=broken, reason=reason, trace=trace)
    model = fold_trial(2, [v.to_model() for v in found], broken=broken, reason=reason,
                       trace=trace)
    assert plain.to_model() == model
    folded = fold_case_plain(_case(), [plain], facets={"case": "d"})
    assert folded.to_model() == fold_case(_case(), [model], facets={"case": "d"})
    assert case_json(folded) == case_json(folded.to_model())


def test_values_orjson_refuses_are_written_through_the_model() -> None:
    """A note with a lone surrogate, an integer past 64 bits: the model's bytes, not a crash."""
    verdict = PlainVerdict("equals", "equals", "output", "fail", Evidence.OBSERVED,
                           storable_note("bad \udc80 text"), "check:equals", None, None)
    trial = PlainTrial(1, "fail", "x", 0.5, Usage(input_tokens=2**63 + 5), [verdict], None,
                       None, None, {})
    case = PlainCase("c", "public", "fail", "r", 0.0, 0.0, 1, {"1": 0.0}, False, [], [], None,
                     [trial], {})
    assert case_json(case) == case_json(case.to_model())
    assert b"9223372036854775813" in case_json(case)


@given(st.lists(st.lists(verdicts.map(lambda v: PlainVerdict(
    v.assertion, v.check, "output" if v.family == "quality" else v.family, "pass", v.evidence,
    v.note, v.provenance, v.threshold, v.score)), min_size=1, max_size=3), min_size=1,
    max_size=4),
    st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_a_case_that_plainly_passed_folds_as_the_rules_fold_it(found: list[list[PlainVerdict]],
                                                               k: int) -> None:
    """The fold's shortcut for a case whose every trial and verdict passed gives what the
    rules give."""
    from assay.grading.fold import _by_the_rules

    trials = [fold_trial_plain(n, vs, trace=Trace(output="x", facets={"model": f"m{n % 2}"}))
              for n, vs in enumerate(found, 1)]
    k = min(k, len(trials))
    short = fold_case_plain(_case(), trials, k=k, facets={"case": "d"})
    assert short == _by_the_rules(_case(), trials, k, {"case": "d"})
    assert short.outcome == "pass"


def test_a_whole_number_of_seconds_is_written_as_the_model_writes_it() -> None:
    """The model's float field makes 1 into 1.0; so does the plain fold."""
    plain = fold_trial_plain(1, [], broken=True, reason="stopped", duration_s=1)
    folded = fold_case_plain(_case(), [plain])
    assert case_json(folded) == case_json(folded.to_model())
    assert b'"duration_s":1.0' in case_json(folded)

"""Building the report of a run and redacting its hidden cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.grading import RunInfo, build_report, fold_case, fold_trial, redact
from assay.model import (
    Case,
    CaseResult,
    Evidence,
    HoldoutResult,
    Reliability,
    SplitCounts,
    SuiteRef,
    TargetRef,
    TrialResult,
    Usage,
    Verdict,
)
from assay.model.result import Outcome

INFO = RunInfo(
    run_id="run-1",
    suite=SuiteRef(id="demo/extraction.table@1", digest="sha256:aa", hidden_set="sha256:bb"),
    target=TargetRef(uri="python:agent:run", digest="sha256:cc", facets={"model": "m"}),
    started_at="2025-01-01T00:00:00Z",
    finished_at="2025-01-01T00:01:00Z",
    trials_per_case=3,
    pass_mark=0.8,
    seed=7,
    interrupted=False,
)


def verdict(outcome: Outcome, note: str = "", assertion: str = "equals $.total") -> Verdict:
    return Verdict(
        assertion=assertion,
        check=assertion.split()[0],
        outcome=outcome,
        evidence=Evidence.OBSERVED,
        note=note,
    )


def run_case(
    id: str,
    outcomes: list[Outcome],
    split: str = "public",
    *,
    note: str = "",
    usage: Usage | None = None,
    tags: list[str] | None = None,
) -> CaseResult:
    """A case folded from one single-verdict trial per outcome."""
    case = Case(id=id, split=split, tags=tags or [])
    trials = [
        fold_trial(i, [verdict(o, note)], usage=usage)
        for i, o in enumerate(outcomes, start=1)
    ]
    return fold_case(case, trials)


def spec_example() -> list[CaseResult]:
    """SPEC §6: six public passes, one hidden pass, two hidden failures."""
    usage = Usage(input_tokens=100, output_tokens=10, cost_usd=0.1)
    public = [run_case(f"p{i}", ["pass"] * 3, usage=usage) for i in range(6)]
    hidden = [
        run_case("h-pass", ["pass"] * 3, "hidden", usage=usage),
        run_case("h-fail-1", ["pass", "fail", "pass"], "hidden", note="secret", usage=usage),
        run_case("h-fail-2", ["fail"] * 3, "hidden", note="secret", usage=usage),
    ]
    return public + hidden


# --- build_report ---------------------------------------------------------------------


def test_report_of_the_spec_example() -> None:
    cases = spec_example()
    report = build_report(INFO, cases)
    assert report.schema_ == "assay.report/1"
    assert (report.run_id, report.suite, report.target) == ("run-1", INFO.suite, INFO.target)
    assert (report.started_at, report.finished_at) == (INFO.started_at, INFO.finished_at)
    assert (report.trials_per_case, report.seed, report.interrupted) == (3, 7, False)
    assert report.evidence == "reliability"
    assert report.scores.public == 1.0
    assert report.scores.hidden == pytest.approx(1 / 3)
    assert report.scores.overall == pytest.approx(7 / 9)
    assert report.scores.passed is False
    assert report.scores.flags == ["possibly-tuned"]
    assert report.counts == {
        "public": SplitCounts(total=6, passed=6),
        "hidden": SplitCounts(total=3, passed=1, failed=2),
    }
    # 9 cases x 3 trials x usage
    assert report.cost.usd == pytest.approx(2.7)
    assert (report.cost.input_tokens, report.cost.output_tokens) == (2700, 270)
    assert report.reliability["public"] == Reliability(pass_at_1=1.0, se=0.0, cases=6)
    assert report.reliability["hidden"].pass_at_1 == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert report.cases == cases  # full: the store keeps everything


def test_report_json_has_the_spec_keys() -> None:
    data = build_report(INFO, spec_example()).to_json_dict()
    for key in (
        "schema", "run_id", "suite", "target", "started_at", "finished_at",
        "trials_per_case", "evidence", "scores", "counts", "cost", "cases",
    ):
        assert key in data
    assert data["schema"] == "assay.report/1"
    # SPEC §6's keys, then how much went unreported and on what evidence.
    assert set(data["cost"]) == {"usd", "input_tokens", "output_tokens", "trials",
                                 "unreported", "evidence"}


def test_smoke_run_is_labelled_smoke() -> None:
    report = build_report(INFO, [run_case("p", ["pass"])])
    assert report.evidence == "smoke"
    assert report.scores.passed is True


def test_interrupted_run_never_passes() -> None:
    info = INFO.model_copy(update={"interrupted": True})
    report = build_report(info, [run_case("p", ["pass"] * 3)])
    assert report.scores.overall == 1.0
    assert report.scores.passed is False
    assert report.scores.flags == ["interrupted"]
    assert report.interrupted is True


def test_empty_run() -> None:
    report = build_report(INFO, [])
    assert report.scores.passed is False
    assert report.scores.flags == ["no-cases"]
    # Nothing ran, so nothing was reported: unavailable, not $0.
    assert report.cost.usd is None and report.cost.input_tokens is None
    assert report.evidence == "smoke"
    assert report.reliability == {}


def test_run_info_is_strict() -> None:
    with pytest.raises(ValueError):
        RunInfo.model_validate({**INFO.model_dump(), "clock": "now"})


# --- redact -----------------------------------------------------------------------------


def test_hidden_cases_become_numbered_holdouts_in_report_order() -> None:
    cases = [
        run_case("h-a", ["pass"], "hidden"),
        run_case("p-1", ["pass"]),
        run_case("h-b", ["fail"], "hidden", note="expected 42"),
        run_case("p-2", ["fail"]),
        run_case("h-c", ["inconclusive"], "hidden"),
    ]
    full = build_report(INFO, cases)
    red = redact(full)
    assert red.cases == [
        HoldoutResult(id="holdout-1", outcome="pass"),
        cases[1],
        HoldoutResult(id="holdout-2", outcome="fail"),
        cases[3],
        HoldoutResult(id="holdout-3", outcome="inconclusive"),
    ]
    # Everything else is unchanged, and the full report is left whole.
    assert red.model_dump(exclude={"cases"}) == full.model_dump(exclude={"cases"})
    assert full.cases == cases


def test_redacted_holdout_json_is_a_name_and_an_outcome() -> None:
    red = redact(build_report(INFO, [run_case("h-secret", ["fail"], "hidden", tags=["t"])]))
    assert red.to_json_dict()["cases"] == [
        {"id": "holdout-1", "split": "hidden", "outcome": "fail"}
    ]


def test_redact_is_idempotent() -> None:
    once = redact(build_report(INFO, spec_example()))
    assert redact(once) == once
    assert redact(redact(once)).model_dump_json() == once.model_dump_json()


def test_redact_keeps_public_cases_whole() -> None:
    public = run_case("invoice-simple", ["pass", "fail"], note="visible", tags=["x"])
    red = redact(build_report(INFO, [public]))
    assert red.cases == [public]


CANARY = "CANARY-"
VERDICT_OUTCOMES: list[Outcome] = ["pass", "fail", "inconclusive"]

hidden_texts = st.text(
    alphabet=st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=12
).map(lambda s: CANARY + s)


@st.composite
def mixed_cases(draw: st.DrawFn) -> list[CaseResult]:
    """Public cases with plain content, hidden ones whose every text is a canary."""
    cases: list[CaseResult] = []
    for index in range(draw(st.integers(0, 8))):
        hidden = draw(st.booleans())
        outcomes = draw(st.lists(st.sampled_from(VERDICT_OUTCOMES), max_size=4))
        text = draw(hidden_texts) if hidden else f"public note {index}"
        trials: list[TrialResult] = [
            fold_trial(i, [verdict(o, note=text, assertion="equals $.total")])
            for i, o in enumerate(outcomes, start=1)
        ]
        if draw(st.booleans()):
            trials.append(fold_trial(len(trials) + 1, [], broken=True, reason=text))
        case = Case(
            id=draw(hidden_texts) + f"-{index}" if hidden else f"public-{index}",
            split="hidden" if hidden else "public",
            tags=[text],
        )
        cases.append(fold_case(case, trials))
    return cases


@given(mixed_cases(), st.booleans())
def test_redact_never_leaks_hidden_content(cases: list[CaseResult], interrupted: bool) -> None:
    info = INFO.model_copy(update={"interrupted": interrupted})
    full = build_report(info, cases)
    red = redact(full)
    hidden = [c for c in cases if c.split == "hidden"]
    # The canary is there to find: the full report (for the store) carries it.
    assert (CANARY in full.model_dump_json()) is bool(hidden)
    text = red.model_dump_json()
    assert CANARY not in text
    assert CANARY not in json.dumps(red.to_json_dict())
    # ... while the numbers still say the same thing.
    assert red.counts == full.counts
    assert red.scores == full.scores
    assert red.reliability == full.reliability
    assert len(red.cases) == len(cases)
    holdouts = [c for c in red.cases if isinstance(c, HoldoutResult)]
    assert [h.id for h in holdouts] == [f"holdout-{i}" for i in range(1, len(hidden) + 1)]
    assert [h.outcome for h in holdouts] == [c.outcome for c in hidden]
    assert red.counts["hidden"].total == len(hidden)
    assert redact(red) == red

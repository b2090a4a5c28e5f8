"""What a run's registration commits to before any trial runs: thresholds included."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.canonical import digest
from assay.checks.registry import REGISTRY, Check, register
from assay.engine import RunStart
from assay.engine.record import registration
from assay.model import Assertion, Case, Suite


@pytest.fixture
def rate_check() -> Iterator[str]:
    """A rate-based (quality) check, as judges will register them."""
    check = register(Check(name="test-rate", family="quality", fact="output",
                           evaluate=lambda *args: None))
    yield check.name
    REGISTRY.pop(check.name)


def register_suite(cases: list[Case]) -> dict[str, Any]:
    suite = Suite.model_validate({"suite": "reg/thresholds@1", "pass_mark": 0.75,
                                  "cases": cases})
    start = RunStart(run_id="r1", seed=3, started_at="2026-11-30T00:00:00Z",
                     target_uri="python:a:b", target_digest="sha256:t")
    loaded = SimpleNamespace(suite=suite, digest="sha256:s", hidden_digest="sha256:h")
    return registration(start, loaded, 2)  # type: ignore[arg-type]


def test_thresholds_are_registered_public_in_clear_hidden_by_digest(rate_check: str) -> None:
    cases = [
        Case(id="pub", expect=[Assertion(check="equals", arg=1),
                               Assertion(check=rate_check, threshold=0.7),
                               Assertion(check=rate_check)]),
        Case(id="SECRET-case", split="hidden",
             expect=[Assertion(check=rate_check, threshold=0.9)]),
    ]
    content = register_suite(cases)
    assert content["pass_mark"] == 0.75 and content["trials_per_case"] == 2
    # Binary checks have no threshold; an unset one is the default 1.0.
    assert content["thresholds"]["public"] == {"pub": {"1": 0.7, "2": 1.0}}
    assert content["thresholds"]["hidden"] == digest({"SECRET-case": {"0": 0.9}})
    assert "SECRET" not in str(content)


def test_a_suite_without_rate_checks_registers_empty_thresholds() -> None:
    content = register_suite([Case(id="pub", expect=[Assertion(check="equals", arg=1)])])
    assert content["thresholds"] == {"public": {}, "hidden": None}


def test_the_stored_suite_loads_back_with_its_assertions_files() -> None:
    import json
    from pathlib import Path

    from assay.store.runs.documents import load_stored_suite, stored_suite_json
    from assay.suites import discover

    examples = Path(__file__).resolve().parents[2] / "examples"
    loaded = discover([examples], None)
    assert len(loaded) >= 3 and any(item.suite.hidden_cases() for item in loaded)
    for item in loaded:
        text = stored_suite_json(item.suite)
        document = json.loads(text)
        assert document["suite"] == item.suite.model_dump(mode="json", by_alias=True)
        back = load_stored_suite(json.loads(text))
        assert back.model_dump(by_alias=True) == item.suite.model_dump(by_alias=True)
        assert [[a.file for a in c.expect] for c in back.cases] == \
            [[a.file for a in c.expect] for c in item.suite.cases]


def test_the_unreported_usage_is_recorded_as_pydantic_writes_it() -> None:
    from assay.grading import fold_trial
    from assay.model.trace import Usage
    from assay.store.runs.trials import UNREPORTED_USAGE, trial_record

    assert UNREPORTED_USAGE == Usage().model_dump_json()
    silent = fold_trial(1, [], reason="x", broken=True)
    spent = fold_trial(1, [], reason="x", broken=True, usage=Usage(input_tokens=3))
    assert trial_record("c", "public", silent).usage == UNREPORTED_USAGE
    assert trial_record("c", "public", spent).usage == Usage(input_tokens=3).model_dump_json()


@settings(max_examples=300, deadline=None)
@given(case_id=st.text() | st.builds(lambda a, b: a + "\ud800" + b, st.text(), st.text()),
       n=st.integers(min_value=1, max_value=2**31),
       outcome=st.sampled_from(["pass", "fail", "broken", "inconclusive"]),
       verdicts=st.lists(st.text(), max_size=3),
       trace=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
def test_a_trial_verdict_body_is_its_contents_jcs_or_refused_alike(case_id, n, outcome,
                                                                    verdicts, trace):
    """The ledger's trial-verdict content is written by orjson on the writer's hot path:
    byte for byte the JCS of the same content, and what JCS refuses (a lone surrogate) is
    refused as JCS refuses it."""
    from assay.canonical import canonical
    from assay.errors import HarnessFailure
    from assay.store.runs.record import _trial_verdict_body
    from assay.store.runs.trials import TrialRecord

    digest = None if trace is None else "sha256:" + trace
    record = TrialRecord(case_id, "public", n, outcome, None, 0.5, "{}",
                         tuple(("a", "equals", "output", v, "observed", "", "", None, None)
                               for v in verdicts), None)
    content = {"run_id": "r-1", "case_id": case_id, "n": n, "outcome": outcome,
               "verdicts": verdicts, "trace": digest}
    try:
        want = canonical(content)
    except (HarnessFailure, ValueError, UnicodeError) as refused:
        with pytest.raises(type(refused)):
            _trial_verdict_body("r-1", record, digest)
        return
    assert _trial_verdict_body("r-1", record, digest) == want

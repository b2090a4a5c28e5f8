"""One trial found by its case's place in the report (``store/runs/trial_evidence.py``), on
SQLite and PostgreSQL: its entries, trace and opinions, and a hidden one's label only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assay.judging.opinion import Opinion
from assay.model import CaseResult
from assay.store import schema
from assay.store.database import Store, open_store
from assay.store.runs.record import save_run
from assay.store.runs.trial_evidence import (
    HiddenTrial,
    PublicTrial,
    RunNotSealed,
    Step,
    TrialNotFound,
    trial_at,
)

from .test_database import a_report


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    report = a_report()
    for case in report.cases:
        assert isinstance(case, CaseResult)
        for trial in case.trials:  # every trial judged, each with its own answer
            trial.opinions = {1: [Opinion(raw=f"pass\n{case.id} {trial.n}", model="judge-m",
                                          prompt_digest="sha256:" + "d" * 64,
                                          input_tokens=7, output_tokens=2)]}
    save_run(opened, report)
    yield opened
    opened.close()


def test_a_public_trial_comes_with_its_entries_trace_and_own_opinions(store: Store) -> None:
    found = trial_at(store, "run-1", 2, 2)
    assert isinstance(found, PublicTrial)
    assert (found.label, found.case["outcome"], found.trial["outcome"]) == ("p2", "fail", "fail")
    assert "trials" not in found.case
    assert [v["check"] for v in found.trial["verdicts"]] == ["equals", "never_calls"]
    assert found.trials == ((1, "pass"), (2, "fail"))
    stored = store.load_report("run-1").cases[1]
    assert isinstance(stored, CaseResult) and stored.trials[1].trace is not None
    assert found.trace == stored.trials[1].trace.model_dump_json().encode()
    assert found.trace_digest is not None and found.trace_digest.startswith("sha256:")
    assert not found.erased
    # Only this trial's opinions, read back whole with their raw answers.
    [opinion] = found.opinions[1]
    assert (opinion.raw, opinion.model, opinion.input_tokens) == ("pass\np2 2", "judge-m", 7)
    assert set(found.opinions) == {1}
    assert found.previous == Step(2, "p2", 1, "pass")
    assert found.next == Step(3, "holdout-1", 1, "pass")
    assert (found.run.suite_id, found.run.target_uri) == ("demo/s@1", "python:agent:run")


def test_a_hidden_trial_is_its_label_number_and_outcome(store: Store) -> None:
    found = trial_at(store, "run-1", 3, 2)
    assert isinstance(found, HiddenTrial)
    assert (found.label, found.n, found.outcome, found.case_outcome) == \
        ("holdout-1", 2, "fail", "fail")
    assert found.trials == ((1, "pass"), (2, "fail"))
    assert found.previous == Step(3, "holdout-1", 1, "pass") and found.next is None
    assert "SECRET" not in repr(found)
    # A public trial's neighbour that is hidden is named by its label too.
    assert "SECRET" not in repr(trial_at(store, "run-1", 2, 2))


def test_what_is_not_there_is_named_by_label(store: Store) -> None:
    with pytest.raises(TrialNotFound, match="^no run nope in this store$"):
        trial_at(store, "nope", 1, 1)
    with pytest.raises(TrialNotFound, match=r"has no case 4 \(its cases are numbered 1 to 3\)"):
        trial_at(store, "run-1", 4, 1)
    with pytest.raises(TrialNotFound) as missing:
        trial_at(store, "run-1", 3, 5)
    assert str(missing.value) == "case holdout-1 of run run-1 has no trial 5 (its trials: 1, 2)"


def test_an_open_run_has_no_case_positions_yet(store: Store) -> None:
    with store.engine.begin() as connection:
        connection.execute(schema.runs.update().values(report=None, status="open"))
    with pytest.raises(RunNotSealed, match="^run run-1 is not sealed"):
        trial_at(store, "run-1", 1, 1)

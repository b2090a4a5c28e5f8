"""A battery keeps no case once it is final: its report reads them back from a spool.

The report's bytes (``model.result.report_json``, what the store seals and
``--json`` writes) are the bytes pydantic gives for the same report held
whole; redacting it names each hidden case ``holdout-N`` without reading
more of it than its outcome.
"""

from __future__ import annotations

import copy
import gc
import weakref
from typing import TYPE_CHECKING

import pytest

from assay.engine.spool import CaseSpool, read_report
from assay.grading import RunInfo, build_report, redact
from assay.grading.report import tallied_report
from assay.grading.tally import Tally
from assay.model import CaseResult, SuiteRef, TargetRef, TrialResult, Verdict
from assay.model.result import KeptCases, report_json

from .conftest import run_battery

if TYPE_CHECKING:
    from conftest import Bench

INFO = RunInfo(run_id="r", suite=SuiteRef(id="t/x@1", digest="sha256:0"),
               target=TargetRef(uri="python:m:f", digest="sha256:1"), started_at="a",
               finished_at="b", trials_per_case=1, pass_mark=1.0)


def case(index: int) -> CaseResult:
    hidden = index % 3 == 0
    outcome = "pass" if index % 2 else "fail"
    note = "quoted \u2028 and \"quotes\" and CANARY-SPOOL-77" if hidden else f"note {index}"
    verdict = Verdict(assertion="equals", check="equals", outcome=outcome,
                      evidence="observed", note=note)
    return CaseResult(id=f"{'secret' if hidden else 'c'}{index}",
                      split="hidden" if hidden else "public", outcome=outcome,
                      pass_at_1=1.0 if outcome == "pass" else 0.0, pass_hat_k=0.0, k=1,
                      trials=[TrialResult(n=1, outcome=outcome, verdicts=[verdict])])


def spooled(listed: list[CaseResult]) -> CaseSpool:
    spool = CaseSpool(len(listed))
    for index in reversed(range(len(listed))):  # put in any order, read in report order
        spool.put(index, listed[index])
    return spool


def test_a_spooled_report_has_the_bytes_of_the_report_held_whole() -> None:
    listed = [case(i) for i in range(100)]
    whole = build_report(INFO, listed)
    kept = tallied_report(INFO, Tally.of(listed), spooled(listed))
    assert isinstance(kept.cases, KeptCases) and not isinstance(kept.cases, list)
    expected = whole.model_dump_json(by_alias=True).encode()
    assert b"".join(report_json(kept)) == expected
    assert b"".join(report_json(whole)) == expected  # a large list goes a case at a time too
    assert len(list(report_json(kept))) == 102  # the shell's two ends and each case
    # Anything else that serialises the whole report gets its cases as a list.
    assert kept.model_dump_json(by_alias=True).encode() == expected
    assert kept == whole and kept.cases[5] == listed[5] and kept.cases[-1] == listed[-1]
    assert kept.cases[2:4] == listed[2:4]
    assert copy.deepcopy(kept).cases == listed


def test_the_redacted_spool_names_hidden_cases_as_a_list_redaction_does() -> None:
    listed = [case(i) for i in range(70)]
    whole = redact(build_report(INFO, listed))
    kept = redact(tallied_report(INFO, Tally.of(listed), spooled(listed)))
    assert isinstance(kept.cases, KeptCases)
    text = b"".join(report_json(kept))
    assert text == whole.model_dump_json(by_alias=True).encode()
    assert b"CANARY-SPOOL-77" not in text and b"secret" not in text
    assert [c.id for c in kept.cases][:4] == ["holdout-1", "c1", "c2", "holdout-2"]
    assert redact(kept).cases is kept.cases  # redacting again changes nothing


def test_a_battery_lets_go_of_each_trial_once_its_case_is_final(bench: Bench) -> None:
    uri, _ = bench.agent("""
        def agent(input):
            return {"echo": input}
    """)
    cases = "".join(f"  - {{id: c{i}, input: i{i}, expect: [{{path: $.echo, equals: i{i}}}]}}\n"
                    for i in range(40))
    made = bench.battery(bench.suite(f"suite: t/spool@1\ntrials: 2\ncases:\n{cases}"), uri)
    kept: list[weakref.ref[TrialResult]] = []
    made.on_result = lambda c, result: kept.append(weakref.ref(result))
    report = run_battery(made)
    gc.collect()
    assert len(kept) == 80
    # Every result (with its trace) is gone from memory; the report reads cases back.
    assert [ref for ref in kept if ref() is not None] == []
    assert made._results == {}
    assert len(report.cases) == 40 and report.scores.passed
    assert [t.n for t in report.cases[39].trials] == [1, 2]  # type: ignore[union-attr]


def test_a_stored_report_read_back_keeps_its_bytes_and_holds_no_case() -> None:
    listed = [case(i) for i in range(30)]
    whole = build_report(INFO, listed)
    stored = b"".join(report_json(whole)).decode()
    kept = read_report(stored)
    assert isinstance(kept.cases, KeptCases) and kept.cases == listed
    assert b"".join(report_json(kept)).decode() == stored
    assert b"".join(report_json(redact(kept))) == \
        redact(whole).model_dump_json(by_alias=True).encode()
    # Read a piece at a time (a large report kept in parts): pieces cut anywhere.
    for size in (1, 7, 500, 1 << 20):
        pieces = read_report([stored[i:i + size] for i in range(0, len(stored), size)])
        assert b"".join(report_json(pieces)).decode() == stored
    empty = build_report(INFO, [])
    assert read_report(empty.model_dump_json(by_alias=True)).cases == []
    for cut in (stored[:len(stored) // 2], stored[:stored.index('"cases":[') + 12]):
        with pytest.raises(ValueError):  # a truncated text is refused, never half read
            read_report([cut])


def test_cases_folded_from_recorded_trials_in_batches_give_the_battery_s_report(
        bench: Bench) -> None:
    uri, _ = bench.agent("""
        def agent(input):
            return {"echo": input if input != "i3" else "wrong"}
    """)
    cases = "".join(f"  - {{id: c{i}, input: i{i}, expect: [{{path: $.echo, equals: i{i}}}]}}\n"
                    for i in range(7))
    loaded = bench.suite(f"suite: t/seal@1\ntrials: 2\ncases:\n{cases}")
    made = bench.battery(loaded, uri, seed=5)
    recorded: dict[tuple[str, int], TrialResult] = {}
    made.on_result = lambda c, result: recorded.__setitem__((c.id, result.n), result)
    ran = run_battery(made)
    # A seal's battery runs nothing: it folds what was recorded, a few cases at a time.
    sealing = bench.battery(loaded, uri, seed=5)
    for ids in (["c0", "c5", "c6"], ["c1", "c2", "c3"]):  # c4 recorded nothing
        sealing.fold_recorded({key: r for key, r in recorded.items() if key[0] in ids})
    report = sealing.report(ran.run_id, ran.started_at, ran.finished_at)
    by_case = {c.id: c for c in report.cases}
    assert [t.n for t in by_case["c0"].trials] == [1, 2] and by_case["c4"].trials == []
    assert by_case["c3"].outcome == "fail" and by_case["c4"].outcome != "pass"
    expected = [c for c in ran.cases if c.id != "c4"]
    assert [c for c in report.cases if c.id != "c4"] == expected


def test_readers_that_ask_outcomes_get_the_lists_answers_without_reading_every_case() -> None:
    from assay.reports.common import has_scores, listed_cases
    from assay.review.queue import sealed_items

    listed = [case(i) for i in range(90)]
    listed[7] = listed[7].model_copy(update={"score": 0.5})
    whole = build_report(INFO, listed)
    kept = tallied_report(INFO, Tally.of(listed), spooled(listed))
    stored = read_report(b"".join(report_json(whole)).decode())
    for policy in ("both", "failing", "inconclusive", "none"):
        expected = sealed_items(whole, policy, "t")
        assert sealed_items(kept, policy, "t") == expected
        assert sealed_items(stored, policy, "t") == expected
    assert len(sealed_items(kept, "both", "t")) == 45  # every failing trial, holdouts named
    assert any(item["label"] == "holdout-1" for item in sealed_items(kept, "both", "t"))
    for report in (kept, stored):
        assert listed_cases(report, 10) == listed_cases(whole, 10)
        assert listed_cases(redact(report), 40) == listed_cases(redact(whole), 40)
        assert list(listed_cases(redact(report))[0]) == list(redact(whole).cases)
        assert has_scores(report) and has_scores(redact(report)) is has_scores(redact(whole))


def test_reads_between_puts_leave_every_case_whole() -> None:
    """A put after a read writes at the end, not where the read left the file."""
    listed = [case(i) for i in range(40)]
    spool = CaseSpool(len(listed))
    for index, item in enumerate(listed):
        spool.put(index, item)
        assert spool[index] == item
        assert spool[index // 2] == listed[index // 2]  # a read moves the file back
    assert list(spool) == listed

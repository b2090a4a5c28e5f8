"""The cyclic collector is held off while a battery runs, and comes back once the process grows.

A battery keeps every result until its report; the collector's passes over
them free nothing (engine/collector.py ``HeldCollector``). These run real
batteries through ``run_suites`` (store off) with agents that look at the
collector from inside the run.
"""

from __future__ import annotations

import gc

import pytest

from assay.engine import collector, runs
from assay.engine.runs import RunSettings, run_suites

from .conftest import Bench

AGENT = """
import gc
import weakref

freed = []
#: What each call saw, in call order (the report keeps no trace; the test reads these).
seen = []


class Node:
    pass


def agent(input):
    # A reference cycle, freed only by the cyclic collector.
    node = Node()
    node.me = node
    weakref.finalize(node, freed.append, input)
    out = {"collecting": gc.isenabled(), "freed": len(freed)}
    seen.append(out)
    return out
"""


def suite(uri: str, n: int) -> str:
    cases = "".join(f"  - id: c{i}\n    input: i{i}\n    expect: [{{path: $.freed, "
                    f"equals: {i}}}]\n" for i in range(n))
    return f"suite: t/gc@1\ntarget: {uri}\ncases:\n{cases}"


def run(bench: Bench, text: str) -> runs.RunResult:
    loaded = bench.suite(text)
    [result] = run_suites(lambda: [loaded], [], RunSettings(concurrency=1), db=None,
                          store=False)
    assert result.report is not None, result.harness_failure
    return result


def test_no_collection_while_the_battery_runs_and_the_collector_is_back_after(
        bench: Bench) -> None:
    uri, module = bench.agent(AGENT)
    assert gc.isenabled()
    thresholds = gc.get_threshold()
    result = run(bench, suite(uri, 6))
    seen = module.seen
    assert len(seen) == 6 and len(result.report.cases) == 6  # type: ignore[union-attr]
    assert all(out["collecting"] is False for out in seen)
    # Nothing of the run was collected while it ran (cases expect 0..5: only c0 passes).
    assert [out["freed"] for out in seen] == [0] * 6
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # what the run froze is handed back to the collector
    assert gc.get_threshold() == thresholds  # and the caller's thresholds come back
    gc.collect()
    assert len(module.freed) >= 6  # the cycles were garbage all along, and are collected now


def test_a_process_that_grows_is_collected_during_the_battery(
        bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    # Any growth counts (limit 0), looked at after every trial.
    monkeypatch.setattr(collector, "COLLECT_AFTER_BYTES", 0)
    monkeypatch.setattr(collector, "COLLECT_EVERY", 1)
    uri, module = bench.agent(AGENT)
    result = run(bench, suite(uri, 6))
    seen = module.seen
    assert len(seen) == 6
    assert all(out["collecting"] is False for out in seen)  # still held between the looks
    # Each trial's cycle is collected after it: trial i sees the i before it freed.
    assert [out["freed"] for out in seen] == list(range(6))
    assert result.report is not None and result.report.scores.passed
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_battery_that_fails_gives_the_collector_back(bench: Bench) -> None:
    loaded = bench.suite(suite("python:no_such_module_8c1f:agent", 1))
    [result] = run_suites(lambda: [loaded], [], RunSettings(concurrency=1), db=None,
                          store=False)
    assert result.harness_failure is not None
    assert gc.isenabled() and gc.get_freeze_count() == 0

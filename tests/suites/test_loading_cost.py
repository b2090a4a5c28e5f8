"""What loading a large suite costs: no collector passes over the YAML tree."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.suites import load_suite_file


def _big_suite(folder: Path, n: int = 2000) -> Path:
    lines = ["suite: demo/big@1", "cases:"]
    for i in range(n):
        lines += [f"  - id: case-{i}", f"    input: case-{i}", "    expect:",
                  f"      - equals: answer-{i}", "        path: $.answer"]
    path = folder / "big.suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def passes() -> Iterator[list[int]]:
    """The generation of every collector pass the test's own thread runs, at the default thresholds.

    A pass runs in whichever thread allocates when it is due: one started by
    a thread an earlier test left behind (say, a hung agent's, waking up) is
    not the loader's.
    """
    seen: list[int] = []
    mine = threading.get_ident()

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and threading.get_ident() == mine:
            seen.append(info["generation"])

    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    # From empty generations: counts an earlier test left at other thresholds
    # (run_suites raises them) would otherwise start a pass of their own.
    gc.collect()
    gc.callbacks.append(count)
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*saved)


def test_loading_a_yaml_suite_runs_at_most_one_collector_pass(
        tmp_path: Path, passes: list[int]) -> None:
    path = _big_suite(tmp_path)
    loaded = load_suite_file(path)
    assert len(loaded.suite.cases) == 2000
    # Without the pause, thousands of passes rescan the tree of YAML nodes.
    assert len(passes) <= 1
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_caller_stays_off(tmp_path: Path) -> None:
    path = _big_suite(tmp_path, 3)
    gc.disable()
    try:
        load_suite_file(path)
        assert not gc.isenabled()
    finally:
        gc.enable()

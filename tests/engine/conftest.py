"""Helpers for battery tests: a suite from YAML, an agent module, one battery run.

Every agent module gets a unique name (``sys.modules`` caches modules by
name), is imported here so a test can reach its globals (counters, events,
hooks), and is forgotten afterwards.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assay.engine import Battery, BatteryOptions, Clock
from assay.model import Report, Trace
from assay.suites import LoadedSuite, load_suite_file
from assay.targets import TargetOptions, make_target


@dataclass
class Bench:
    """A tmp folder with one test's suite files and agent modules."""

    root: Path
    names: list[str] = field(default_factory=list)
    teardown: list[Callable[[], None]] = field(default_factory=list)

    def module(self, source: str, prefix: str = "agent") -> tuple[str, ModuleType]:
        """Write and import a module under a fresh name."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        (self.root / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        folder = str(self.root.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        importlib.invalidate_caches()
        self.names.append(name)
        return name, importlib.import_module(name)

    def agent(self, source: str, function: str = "agent") -> tuple[str, ModuleType]:
        """An agent module; returns its ``python:`` URI and the module itself."""
        name, module = self.module(source)
        return f"python:{name}:{function}", module

    def write(self, name: str, text: str) -> Path:
        """A file beside the suite (fixtures, grader scripts)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def suite(self, text: str, name: str = "t.suite.yaml") -> LoadedSuite:
        """Load a suite written from YAML text."""
        return load_suite_file(self.write(name, text))

    def battery(
        self,
        loaded: LoadedSuite,
        uri: str,
        *,
        concurrency: int = 4,
        trials: int | None = None,
        timeout_s: float | None = None,
        seed: int | None = None,
        clock: Clock | None = None,
        on_trial: Callable[[str], None] | None = None,
    ) -> Battery:
        """A battery of ``loaded`` against the real target ``uri``."""
        target = make_target(uri, TargetOptions(base_dir=self.root, concurrency=concurrency))
        options = BatteryOptions(concurrency=concurrency, trials=trials, timeout_s=timeout_s,
                                 seed=seed)
        return Battery(loaded, target, options, clock=clock, on_trial=on_trial)

    def run(self, suite_text: str, uri: str, *,
            traces: dict[tuple[str, int], Trace | None] | None = None,
            **options: Any) -> Report:
        """Load the suite, build the battery and run it to its report.

        ``traces``: filled with each trial's trace by (case id, trial): a report
        keeps none (they go to the store as each trial finishes).
        """
        made = self.battery(self.suite(suite_text), uri, **options)
        if traces is not None:
            made.on_result = lambda case, result: traces.__setitem__((case.id, result.n),
                                                                     result.trace)
        return run_battery(made)


def run_battery(battery: Battery) -> Report:
    """``Battery.run`` in a fresh event loop."""
    return asyncio.run(battery.run())


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """A bench whose modules, sys.path entry and stuck agents are cleaned up afterwards."""
    space = Bench(tmp_path)
    yield space
    for release in space.teardown:
        release()
    for name in space.names:
        sys.modules.pop(name, None)
    folder = str(tmp_path.resolve())
    while folder in sys.path:
        sys.path.remove(folder)

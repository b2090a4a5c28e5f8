"""Helpers for target tests: agent modules in tmp_path, one trial through a real target."""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assay.model import Case, Trace
from assay.model.fixture import ToolFixture
from assay.suites.fixtures import load_tool_fixture
from assay.targets import Target, TargetOptions, TrialRequest, make_target


def unique(prefix: str) -> str:
    """A module name no other test uses (sys.modules caches modules by name)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


async def run_trials(target: Target, requests: list[TrialRequest]) -> list[Trace]:
    """Start the target, run the requests one after another, close it."""
    await target.start()
    try:
        return [await target.run(r) for r in requests]
    finally:
        await target.close()


@dataclass
class Workspace:
    """A tmp folder holding agent modules and fixtures for one test."""

    root: Path
    names: list[str]

    @staticmethod
    def trial(
        input: Any = None,  # noqa: A002 - the case's word
        *,
        case_id: str = "c1",
        n: int = 1,
        fixture: Path | None = None,
        tools: ToolFixture | None = None,
    ) -> TrialRequest:
        """A trial request for a case with this input."""
        return TrialRequest(case=Case(id=case_id, input=input), n=n, timeout_s=5.0,
                            fixture=fixture, tools=tools)

    @staticmethod
    async def run_all(target: Target, requests: list[TrialRequest]) -> list[Trace]:
        """Start the target, run the requests one after another, close it."""
        return await run_trials(target, requests)

    def module(self, source: str, prefix: str = "agent") -> str:
        """Write a module with a unique name; returns that name."""
        name = unique(prefix)
        (self.root / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        self.names.append(name)
        importlib.invalidate_caches()
        return name

    def agent(self, source: str, function: str = "agent") -> str:
        """Write an agent module; returns its ``python:`` URI."""
        return f"python:{self.module(source)}:{function}"

    def fixture(self, text: str) -> tuple[Path, ToolFixture]:
        """Write and load a tool fixture (as the suite loader does)."""
        path = self.root / f"{unique('fixture')}.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path, load_tool_fixture(path)

    def target(self, uri: str, concurrency: int = 2) -> Target:
        """The real target for a URI, resolving names against this folder."""
        return make_target(uri, TargetOptions(base_dir=self.root, concurrency=concurrency))

    def run(self, uri: str, *requests: TrialRequest) -> list[Trace]:
        """Run these trials against ``uri`` in one event loop."""
        return asyncio.run(run_trials(self.target(uri), list(requests)))


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """A workspace whose modules and sys.path entry are removed afterwards."""
    space = Workspace(tmp_path, [])
    yield space
    for name in space.names:
        sys.modules.pop(name, None)
    folder = str(tmp_path.resolve())
    while folder in sys.path:
        sys.path.remove(folder)


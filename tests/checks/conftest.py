"""Shared helpers for the check tests: build a trace, prepare an assertion, judge it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.checks import LoadContext, lookup, verdict
from assay.model import Assertion, Evidence, Trace, Verdict

MakeTrace = Callable[..., Trace]
Judge = Callable[..., Verdict]


@pytest.fixture
def make_trace() -> MakeTrace:
    """A trace whose output evidence is observed unless told otherwise."""

    def make(
        output: Any = None,
        *,
        status: str = "ok",
        evidence: str | None = "observed",
        **fields: Any,
    ) -> Trace:
        ev = {} if evidence is None else {"output": Evidence(evidence)}
        return Trace(output=output, status=status, evidence=ev, **fields)

    return make


@pytest.fixture
def prepare(tmp_path: Path) -> Callable[..., Assertion]:
    """Build an assertion the way the loader does: the check's ``prepare`` runs first."""

    def build(
        name: str,
        arg: Any = None,
        *,
        path: str | None = None,
        min_evidence: str | None = None,
        file: str | None = None,
        base_dir: Path | None = None,
    ) -> Assertion:
        check = lookup(name)
        assert check is not None, f"check {name!r} is not registered"
        prepared = check.prepare(arg, LoadContext(base_dir=base_dir or tmp_path))
        return Assertion(
            check=name,
            arg=prepared,
            path=path,
            min_evidence=Evidence(min_evidence) if min_evidence else None,
            file=file,
        )

    return build


@pytest.fixture
def judge(prepare: Callable[..., Assertion], make_trace: MakeTrace) -> Judge:
    """The verdict of one prepared assertion on a trace with observed output."""

    def run(name: str, arg: Any, output: Any = None, *, path: str | None = None,
            status: str = "ok") -> Verdict:
        return verdict(prepare(name, arg, path=path), make_trace(output, status=status))

    return run


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for throwaway grader modules; their modules are forgotten after."""
    folder = tmp_path / "mods"
    folder.mkdir()
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("grader_mod_"):
            del sys.modules[name]


@pytest.fixture
def write_module(module_dir: Path, request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Write a grader module with a name unique to this test; returns the module name."""
    import importlib
    import re

    counter = iter(range(1000))

    def write(body: str) -> str:
        stem = re.sub(r"\W", "_", request.node.name)
        name = f"grader_mod_{stem}_{next(counter)}"
        (module_dir / f"{name}.py").write_text(body, encoding="utf-8")
        importlib.invalidate_caches()
        return name

    return write

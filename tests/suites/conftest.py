"""Shared helpers for the suite-loading tests: write files, load them, catch SuiteErrors."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.errors import SuiteError
from assay.suites import LoadedSuite, load_suite_file

Write = Callable[[str, str], Path]


@pytest.fixture
def write(tmp_path: Path) -> Write:
    """Write ``text`` (dedented) at ``tmp_path/rel``, creating folders; returns the path."""

    def put(rel: str, text: str) -> Path:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return put


@pytest.fixture
def line_of() -> Callable[..., int]:
    """The 1-based line of the ``nth`` line of a file that contains ``needle``."""

    def find(path: Path, needle: str, nth: int = 1) -> int:
        seen = 0
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if needle in line:
                seen += 1
                if seen == nth:
                    return number
        raise AssertionError(f"{needle!r} (#{nth}) not in {path}")

    return find


@pytest.fixture
def load() -> Callable[..., LoadedSuite]:
    """Load one suite file."""

    def run(path: Path, hidden_root: Path | None = None) -> LoadedSuite:
        return load_suite_file(path, hidden_root)

    return run


@pytest.fixture
def refused() -> Callable[..., SuiteError]:
    """The SuiteError that loading ``path`` raises (fails the test if it loads)."""

    def run(path: Path, hidden_root: Path | None = None) -> SuiteError:
        with pytest.raises(SuiteError) as info:
            load_suite_file(path, hidden_root)
        return info.value

    return run


@pytest.fixture(autouse=True)
def _restore_sys_path() -> Iterator[None]:
    """Loading Python suites puts their folder on sys.path; keep tests from leaking it."""
    saved = list(sys.path)
    modules = set(sys.modules)
    yield
    sys.path[:] = saved
    for name in set(sys.modules) - modules:
        if name.startswith(("suite_helper_", "fixture_handler_")):
            del sys.modules[name]


def strip_places(data: Any) -> Any:
    """A model dump without where-it-was-written fields (file, line, source)."""
    if isinstance(data, dict):
        return {k: strip_places(v) for k, v in data.items()
                if k not in ("file", "line", "source")}
    if isinstance(data, list):
        return [strip_places(v) for v in data]
    return data


@pytest.fixture
def places_stripped() -> Callable[[Any], Any]:
    """``strip_places`` as a fixture."""
    return strip_places

"""Which URI names which target; schemes not available here are usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import UsageError
from assay.targets import TargetOptions, make_target
from assay.targets.http import HttpTarget
from assay.targets.python import PythonTarget
from assay.targets.scripted import ScriptedTarget


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("python:pkg.agent:run", PythonTarget),
        ("scripted:traces.jsonl", ScriptedTarget),
        ("http://127.0.0.1:9/agent", HttpTarget),
        ("https://example.invalid/agent", HttpTarget),
    ],
)
def test_each_available_scheme_makes_its_target(tmp_path: Path, uri: str, kind: type) -> None:
    target = make_target(uri, TargetOptions(base_dir=tmp_path))
    assert isinstance(target, kind)
    assert target.uri == uri


@pytest.mark.parametrize(
    "uri",
    ["mcp+stdio:python -m table_agent", "mcp+http://127.0.0.1:8000/mcp", "openai:llama3",
     "claude", "codex"],
)
def test_schemes_not_yet_available_are_usage_errors_that_say_so(tmp_path: Path,
                                                                uri: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_target(uri, TargetOptions(base_dir=tmp_path))
    assert "not available" in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("uri", ["ftp://host/agent", "agent.py", "", "pythonx:mod:f",
                                 "scripted", "HTTP//nope"])
def test_an_unknown_scheme_is_a_usage_error(tmp_path: Path, uri: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_target(uri, TargetOptions(base_dir=tmp_path))
    assert "unknown scheme" in str(caught.value)

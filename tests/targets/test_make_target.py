"""Which URI names which target; schemes not available here are usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import UsageError
from assay.targets import PLANNED, TargetOptions, make_target
from assay.targets.exec import ExecTarget
from assay.targets.hosts.claude import ClaudeTarget
from assay.targets.hosts.codex import CodexTarget
from assay.targets.http import HttpTarget
from assay.targets.mcp import McpTarget
from assay.targets.openai import OpenAITarget
from assay.targets.otel import OtelTarget
from assay.targets.python import PythonTarget
from assay.targets.scripted import ScriptedTarget


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("python:pkg.agent:run", PythonTarget),
        ("exec:node agent.js --fast", ExecTarget),
        ("scripted:traces.jsonl", ScriptedTarget),
        ("otel:spans.json", OtelTarget),
        ("http://127.0.0.1:9/agent", HttpTarget),
        ("https://example.invalid/agent", HttpTarget),
        ("openai:llama3", OpenAITarget),
        ("claude", ClaudeTarget),
        ("claude --max-turns 3", ClaudeTarget),
        ("codex", CodexTarget),
        ("codex -m gpt-5.5", CodexTarget),
        ("mcp+stdio:python -m table_agent", McpTarget),
        ("mcp+http://127.0.0.1:8000/mcp", McpTarget),
        ("mcp+https://mcp.example.invalid/mcp", McpTarget),
    ],
)
def test_each_available_scheme_makes_its_target(tmp_path: Path, uri: str, kind: type) -> None:
    target = make_target(uri, TargetOptions(base_dir=tmp_path))
    assert isinstance(target, kind)
    assert target.uri == uri


def test_run_help_names_every_scheme() -> None:
    from click.testing import CliRunner

    from assay.cli import main

    shown = " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
    for scheme in ("python:", "exec:", "scripted:", "otel:", "http(s)://", "mcp+stdio:", "mcp+http://",
                   "openai:", "claude", "codex"):
        assert scheme in shown, scheme


def test_schemes_not_yet_available_are_usage_errors_that_say_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PLANNED, "telepathy:", "agents read by mind")
    with pytest.raises(UsageError) as caught:
        make_target("telepathy:agent", TargetOptions(base_dir=tmp_path))
    assert "not available" in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(("uri", "said"), [
    ("mcp+stdio:", "give the command"),
    ("mcp+stdio:python 'unclosed", "cannot parse the command"),
    ("mcp+http:///mcp", "give the server's URL"),
])
def test_a_malformed_mcp_uri_is_a_usage_error(tmp_path: Path, uri: str, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        make_target(uri, TargetOptions(base_dir=tmp_path))


@pytest.mark.parametrize("uri", ["ftp://host/agent", "agent.py", "", "pythonx:mod:f",
                                 "scripted", "HTTP//nope"])
def test_an_unknown_scheme_is_a_usage_error(tmp_path: Path, uri: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_target(uri, TargetOptions(base_dir=tmp_path))
    assert "unknown scheme" in str(caught.value)

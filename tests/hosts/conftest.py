"""Fixtures for the host-CLI tests: a signed-in fake user, a scripted model server.

See ``hostlib`` for how the CLIs are found and signed in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import anthropic_stub  # noqa: E402
import openai_stub  # noqa: E402
from hostlib import (  # noqa: E402
    CANARY,
    CLAUDE_CREDENTIALS,
    CODEX_KEY,
    Host,
    claude_binary,
    codex_binary,
)


def _no_canary(host: Host) -> None:
    seen = b"".join(s.raw + json.dumps(s.headers).encode() for s in host.stub.seen)
    assert CANARY.encode() not in seen, "a provider key reached the model server"
    for trace in host.traces:
        assert CANARY not in trace.model_dump_json(), "a provider key reached a trace"


def _common_env(monkeypatch: pytest.MonkeyPatch, user_home: Path, marker: str) -> None:
    monkeypatch.setenv("HOME", str(user_home))
    for name in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_HOME", "ASSAY_PRICES"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY",
                 "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.setenv(name, CANARY)
    monkeypatch.setenv("ASSAY_TEST_MARKER", marker)


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    """A signed-in Claude Code user whose model is the scripted stub."""
    binary = claude_binary()
    user_home = tmp_path / "user"
    (user_home / ".claude").mkdir(parents=True)
    (user_home / ".claude" / ".credentials.json").write_text(json.dumps(CLAUDE_CREDENTIALS))
    root = tmp_path / "suite"
    root.mkdir()
    marker = tmp_path.name
    with anthropic_stub.serve() as stub:
        _common_env(monkeypatch, user_home, marker)
        monkeypatch.setenv("ASSAY_CLAUDE_BIN", str(binary))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
        # No telemetry or update checks: offline they only cost time.
        monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        host = Host(stub, user_home, root, marker)
        yield host
        _no_canary(host)


@pytest.fixture
def codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    """A signed-in Codex user (``codex login --with-api-key``, a made-up key) and the stub."""
    binary = codex_binary()
    user_home = tmp_path / "user"
    (user_home / ".codex").mkdir(parents=True)
    # The CLI's own sign-in writes the user's auth.json, as it would on their machine.
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    login = subprocess.run([str(binary), "login", "--with-api-key"], input=CODEX_KEY,
                           env={**env, "HOME": str(user_home),
                                "CODEX_HOME": str(user_home / ".codex")},
                           capture_output=True, text=True, timeout=60)
    assert login.returncode == 0, login.stderr
    root = tmp_path / "suite"
    root.mkdir()
    marker = tmp_path.name
    with openai_stub.serve() as stub:
        _common_env(monkeypatch, user_home, marker)
        monkeypatch.setenv("ASSAY_CODEX_BIN", str(binary))
        host = Host(stub, user_home, root, marker)
        yield host
        _no_canary(host)

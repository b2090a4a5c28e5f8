"""The real host CLIs, offline: helpers shared by their fixtures and tests.

The CLIs run their native binaries against scripted model servers.

The binaries come from the npm packages pinned in ``tests/hosts/package.json``
(``tests/hosts/install.sh`` puts them in ``.hosts/``; ``make test`` runs it).
A test that needs one and finds none fails and says how to install it.

The CLIs sign themselves in as they would on a user's machine: each test gets
a fake *user* home (``HOME``) holding only the CLI's own credentials file with
a made-up token, which the target copies into each trial's throwaway home.
The scripted server accepts any token. A canary provider key is set in the
test's environment, so that every test would notice it leaking.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from assay.model import Case, Trace
from assay.targets import Target, TargetOptions, TrialRequest, make_target

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / ".hosts" / "node_modules"
INSTALL = "run tests/hosts/install.sh (needs Node.js and npm; `make test` runs it)"

#: A provider key that must never reach a CLI, a request, a trace or a report.
CANARY = "sk-CANARY-4f1d9a"

#: Claude Code's sign-in file, as ``claude auth login`` leaves it (made-up token).
CLAUDE_CREDENTIALS = {"claudeAiOauth": {
    "accessToken": "sk-ant-oat01-test-only", "refreshToken": "sk-ant-ort01-test-only",
    "expiresAt": 4102444800000, "subscriptionType": "max",
    "scopes": ["user:inference", "user:profile", "user:sessions:claude_code"]}}

ORDERS_MCP = Path(__file__).parent / "orders_mcp.py"

#: The made-up key of the fake Codex user (its own login, not a provider key in the env).
CODEX_KEY = "sk-test-codex-login"


def _platform() -> str:
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
    return f"{sys.platform}-{machine.get(platform.machine().lower())}"


def claude_binary() -> Path:
    """The native ``claude`` from the npm package, or a failure that says how to get it."""
    base = HOSTS / "@anthropic-ai"
    for folder in (f"claude-agent-sdk-{_platform()}", f"claude-agent-sdk-{_platform()}-musl"):
        found = base / folder / "claude"
        if found.is_file():
            return found
    pytest.fail(f"the claude CLI is not installed in {base}: {INSTALL}")


def codex_binary() -> Path:
    """The native ``codex`` from the npm package, or a failure that says how to get it."""
    base = HOSTS / "@openai"
    for found in sorted(base.glob(f"codex-{_platform()}/vendor/*/bin/codex")):
        if found.is_file():
            return found
    pytest.fail(f"the codex CLI is not installed in {base}: {INSTALL}")


@dataclass
class Host:
    """One test's world: the stub, the fake user home, a folder for suites and fixtures."""

    stub: Any
    user_home: Path
    root: Path
    marker: str
    traces: list[Trace] = field(default_factory=list)

    def folder(self, name: str, files: dict[str, str]) -> Path:
        """A fixture folder with these files."""
        where = self.root / name
        for rel, text in files.items():
            path = where / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        where.mkdir(parents=True, exist_ok=True)
        return where

    def codex_uri(self, *flags: str, model: str = "gpt-5.5") -> str:
        """``codex`` pointed at the stub: a custom provider on loopback, in the URI's flags."""
        provider = (f'model_providers.stub={{name="stub", base_url="{self.stub.base_url}", '
                    'wire_api="responses", requires_openai_auth=true}')
        return shlex.join(["codex", "-m", model, "-c", 'model_provider="stub"', "-c", provider,
                           *flags])

    def target(self, uri: str = "claude") -> Target:
        """The real target for a URI, relative names resolving against this test's folder."""
        return make_target(uri, TargetOptions(base_dir=self.root, concurrency=2))

    def run(self, uri: str, prompt: Any, *, fixture: Path | None = None,
            model: str | dict[str, str] | None = None,
            effort: str | dict[str, str] | None = None, timeout_s: float = 60.0) -> Trace:
        """Start the target, run one trial of a case with this input (and pins), close it."""
        case = Case(id="c1", input=prompt, model=model, effort=effort, invocation="automatic")
        request = TrialRequest(case=case, n=1, timeout_s=timeout_s, fixture=fixture)
        target = self.target(uri)

        async def go() -> Trace:
            await target.start()
            try:
                async with asyncio.timeout(timeout_s):
                    return await target.run(request)
            finally:
                await target.close()

        trace = asyncio.run(go())
        self.traces.append(trace)
        return trace

    def fake_cli(self, name: str, version_line: str) -> Path:
        """An executable that answers every command with one line (a ``--version`` line)."""
        path = self.root / "fake-bin" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"#!/bin/sh\necho {shlex.quote(version_line)}\n")
        path.chmod(0o755)
        return path

    def assay_run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``assay run`` in this test's folder, as a user runs it."""
        return subprocess.run([sys.executable, "-m", "assay", "run", *args], cwd=self.root,
                              env={**os.environ, "COLUMNS": "200"}, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)

    def leftovers(self) -> list[int]:
        """Processes still running that carry this test's marker in their environment."""
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if f"ASSAY_TEST_MARKER={self.marker}".encode() in environ:
                found.append(int(proc.name))
        return found

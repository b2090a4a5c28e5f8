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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from assay.model import Case, Trace
from assay.targets import Target, TargetOptions, TrialRequest, make_target

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / ".hosts" / "node_modules"
INSTALL = "run tests/hosts/install.sh (needs Node.js and npm; `make test` runs it)"

T = TypeVar("T")

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


class MovableClock(asyncio.SelectorEventLoop):
    """An event loop whose clock can be moved on: a timer due within the move fires at once."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = 0.0

    def time(self) -> float:
        return super().time() + self.moved


def run_moving_on(main: Coroutine[Any, Any, T], stuck: Callable[[], bool], by_s: float) -> T:
    """Run ``main`` on a ``MovableClock``; once ``stuck()``, move its clock on by ``by_s``.

    For a test waiting for a timeout whose process can only wait from some
    point on (the stub holds a request it will never answer): from then, a
    timer due within ``by_s`` fires at once, through the code's own timeout,
    as it would have fired later. If ``stuck()`` never comes true, the timers
    fire in real time.
    """

    async def watch() -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, MovableClock)
        while not stuck():
            await asyncio.sleep(0.05)  # a poll of the stub, not a guess at how long anything takes
        loop.moved += by_s

    async def run() -> T:
        watching = asyncio.create_task(watch())
        try:
            done = await main
        finally:
            watching.cancel()
        if watching.done() and not watching.cancelled():
            watching.result()  # a watch that failed is said, not turned into a silent wait
        return done

    with asyncio.Runner(loop_factory=MovableClock) as runner:
        return runner.run(run())


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
            effort: str | dict[str, str] | None = None, timeout_s: float = 60.0,
            stuck: Callable[[], bool] | None = None) -> Trace:
        """Start the target, run one trial of a case with this input (and pins), close it.

        ``stuck``: true once the CLI can only wait for a reply that never comes;
        the timeout then fires at once (``run_moving_on``) instead of later.
        """
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

        trace = asyncio.run(go()) if stuck is None else run_moving_on(go(), stuck, timeout_s)
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

    def running(self, part: str) -> bool:
        """Whether a process carrying this test's marker runs a command line with ``part``."""
        for pid in self.leftovers():
            try:
                if part.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
        return False

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

"""Queued batteries for real: a throwaway PostgreSQL, `assay run --executor queue`, and
`assay worker` subprocesses started and stopped by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..forked import run_assay

#: Seconds without a heartbeat before a worker's chunks are taken back, in these tests.
LEASE = "3"


@dataclass
class Done:
    code: int
    out: str
    err: str


@dataclass
class Project:
    """A working folder with a suite, the store's URL, and the worker processes it started."""

    root: Path
    url: str
    workers: list[subprocess.Popen[str]] = field(default_factory=list)

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {**os.environ, "COLUMNS": "200", **(extra or {})}
        env.pop("ASSAY_HIDDEN_DIR", None)
        env.pop("ASSAY_DB", None)
        return env

    def assay(self, *args: str, timeout: float = 180,
              env: dict[str, str] | None = None) -> Done:
        done = run_assay(list(args), cwd=self.root, env=self.env(env), timeout=timeout)
        return Done(done.returncode, done.stdout, done.stderr)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """An ``assay`` command in the background (stdout and stderr to files of its own)."""
        name = f"p{len(list(self.root.glob('*.out')))}"
        return subprocess.Popen(
            [sys.executable, "-m", "assay", *args], cwd=self.root, env=self.env(env),
            stdin=subprocess.DEVNULL, stdout=(self.root / f"{name}.out").open("w"),
            stderr=(self.root / f"{name}.err").open("w"), text=True, start_new_session=True)

    def worker(self, *args: str, concurrency: int = 8,
               env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """An ``assay worker`` on this store (lease 3 s), stopped at the test's end."""
        process = self.start("worker", "--db", self.url, "--lease", LEASE,
                             "--concurrency", str(concurrency), *args, env=env)
        self.workers.append(process)
        return process

    def stop_workers(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture
def project(tmp_path: Path, postgres_url: str) -> Iterator[Project]:
    made = Project(tmp_path, postgres_url)
    try:
        yield made
    finally:
        made.stop_workers()


def wait_for(condition: object, timeout: float = 60.0, what: str = "the condition") -> None:
    """Poll ``condition()`` until it is true (a deadline, not a guess at how long it takes)."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)

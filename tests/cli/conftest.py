"""Run the real ``assay`` command in a process (tests/forked.py) and a folder of its own."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..forked import run_assay


@dataclass
class Done:
    code: int
    out: str
    err: str


class Project:
    """A throwaway working folder with files and a way to run assay in it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def assay(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Done:
        full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
        full_env.pop("ASSAY_HIDDEN_DIR", None) if env is None else None
        done = run_assay(list(args), cwd=self.root, env=full_env, timeout=timeout)
        return Done(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)

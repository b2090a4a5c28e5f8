"""Hidden cases: the suite's sample folder, or a private folder that replaces it (SPEC §2)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..errors import SuiteError
from ..model import Case
from .build import Problem, make_case
from .marks import load_marked

HiddenSource = Literal["samples", "private"]


def private_folder(hidden_root: Path, suite_id: str) -> Path:
    """Where a suite's private hidden cases live under ``--hidden-dir``: ``ROOT/ns/name@N``."""
    return hidden_root.joinpath(*suite_id.split("/"))


def choose_folder(
    suite_id: str, samples: Path | None, hidden_root: Path | None
) -> tuple[Path | None, HiddenSource | None]:
    """The private folder when one exists for this suite, else the samples."""
    if hidden_root is not None:
        private = private_folder(hidden_root, suite_id)
        if private.is_dir():
            return private, "private"
    if samples is not None:
        return samples, "samples"
    return None, None


def load_hidden(folder: Path) -> list[Case]:
    """Every ``*.yaml`` file under ``folder``: one case, or a list of cases, all hidden."""
    cases: list[Case] = []
    for path in sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")]):
        marked = load_marked(path, secret=True)
        problem = Problem(str(path), marked.line, secret=True, key_line_of=marked.key_line)
        items = marked.data if isinstance(marked.data, list) else [marked.data]
        if marked.data is None:
            raise SuiteError(str(path), None, "the hidden case file is empty")
        for i, item in enumerate(items):
            loc = [i] if isinstance(marked.data, list) else []
            cases.append(make_case(item, problem, loc, split="hidden", base_dir=path.parent))
    return cases

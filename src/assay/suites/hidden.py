"""Hidden cases: the suite's sample folder, or a private folder that replaces it (SPEC §2)."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class HiddenChoice:
    """Where a suite's hidden cases come from, and the private folder that was not there."""

    folder: Path | None
    source: HiddenSource | None
    #: The folder ``--hidden-dir`` should have held for this suite, when it did not.
    missing: Path | None = None


def choose_folder(suite_id: str, samples: Path | None, hidden_root: Path | None) -> HiddenChoice:
    """The private folder when one exists for this suite, else the samples.

    Falling back is SPEC §2's rule, but a user who gave ``--hidden-dir`` meant it
    to apply: the folder looked for is returned, for the command to say so.
    """
    missing = None
    if hidden_root is not None:
        private = private_folder(hidden_root, suite_id)
        if private.is_dir():
            return HiddenChoice(private, "private")
        missing = private
    if samples is not None:
        return HiddenChoice(samples, "samples", missing)
    return HiddenChoice(None, None, missing)


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

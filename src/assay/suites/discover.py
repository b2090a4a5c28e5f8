"""Find suites by convention: ``*.suite.yaml`` and ``*_eval.py`` below the given paths."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SuiteError, UsageError
from .loader import LoadedSuite, load_suite_file

SKIP = {".git", ".venv", "venv", "node_modules", "__pycache__", ".assay"}


def is_suite_file(path: Path) -> bool:
    """Whether a file name follows the suite conventions of SPEC §2."""
    return path.name.endswith((".suite.yaml", ".suite.yml")) or path.name.endswith("_eval.py")


def find_suite_files(paths: Iterable[Path]) -> list[Path]:
    """Suite files below ``paths`` in a stable order; a missing path is a usage error."""
    found: list[Path] = []
    for root in paths:
        if not root.exists():
            raise UsageError(f"{root}: no such file or folder")
        if root.is_file():
            found.append(root)
            continue
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).parts
            if any(part in SKIP or part.startswith(".") for part in rel[:-1]):
                continue
            if path.is_file() and is_suite_file(path):
                found.append(path)
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def discover(paths: Iterable[Path], hidden_root: Path | None = None) -> list[LoadedSuite]:
    """Load every suite found; the first bad file stops everything (nothing has run yet)."""
    loaded = [load_suite_file(path, hidden_root) for path in find_suite_files(paths)]
    seen: dict[str, Path] = {}
    for item in loaded:
        if item.suite.id in seen:
            raise UsageError(f"{item.path}: suite {item.suite.id} is also defined in "
                             f"{seen[item.suite.id]}")
        seen[item.suite.id] = item.path
    return loaded


@dataclass(frozen=True)
class Survey:
    """Every suite file below some paths, each loaded on its own: the suites, and the errors."""

    suites: list[LoadedSuite] = field(default_factory=list)
    #: One error per file that did not load (its file, line and what is wrong: for a
    #: hidden case, the safe wording of ``suites.build.Problem``), or per missing path.
    problems: list[SuiteError] = field(default_factory=list)


def survey(paths: Iterable[Path], hidden_root: Path | None = None) -> Survey:
    """Load every suite file found, each on its own: one bad file does not hide the others.

    For a list of suites to start from (the workbench), where ``discover``'s
    rule (the first bad file stops everything, since nothing has run yet)
    would leave nothing to start. A second file defining a suite id is an
    error of that file, and the first keeps the id. An unexpected exception
    while loading is named by its type only: its message may quote a case.
    """
    found = Survey()
    files: list[Path] = []
    for root in paths:
        try:
            files.extend(find_suite_files([root]))
        except UsageError as error:
            found.problems.append(SuiteError(str(root), None, "no such file or folder"
                                             if not root.exists() else str(error)))
    seen: dict[str, Path] = {}
    for path in dict.fromkeys(files):
        try:
            item = load_suite_file(path, hidden_root)
        except SuiteError as error:
            found.problems.append(error)
            continue
        except Exception as error:  # a bug of ours, or an odd file: never its message
            found.problems.append(SuiteError(str(path), None,
                                             f"could not be loaded ({type(error).__name__})"))
            continue
        if item.suite.id in seen:
            found.problems.append(SuiteError(str(path), None, f"suite {item.suite.id} is "
                                             f"also defined in {seen[item.suite.id]}"))
            continue
        seen[item.suite.id] = path
        found.suites.append(item)
    return found

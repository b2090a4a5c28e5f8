"""Find suites by convention: ``*.suite.yaml`` and ``*_eval.py`` below the given paths."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError
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

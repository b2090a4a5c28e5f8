"""What an agent version is: a target's identity, and the digest that names it.

A target's identity is a flat mapping of what makes it this agent and not
another — its URI, the content of the files it runs, the version a server or
a CLI reports — taken after the target started (docs/decisions/0019-agent-version.md).
Its digest is the agent version the report, the ledger and the receipt name;
the mapping itself is kept with an open run so that ``--resume`` can say what
changed, not only that something did.
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

from ..canonical import digest, file_digest

#: Files larger than this are named by size, not read (a data file beside an agent).
MAX_FILE_BYTES = 10_000_000
#: A folder that is part of an agent is read up to this many files; the rest are counted.
MAX_FOLDER_FILES = 1000


def identity_digest(identity: Mapping[str, str]) -> str:
    """``sha256:`` of the identity's canonical JSON: the agent version."""
    return digest(dict(identity))


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """What differs between two identities, in a few words per part (sorted)."""
    said = []
    for key in sorted(set(before) | set(after)):
        if key not in after:
            said.append(f"{key} is gone")
        elif key not in before:
            said.append(f"{key} is new")
        elif before[key] != after[key]:
            said.append(f"{key} changed")
    return said


def file_entries(paths: Iterable[Path], root: Path | None = None) -> dict[str, str]:
    """``{"file NAME": sha256:…}`` per readable file (NAME relative to ``root`` if under it)."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            if not path.is_file():
                continue
            size = path.stat().st_size
            value = file_digest(path) if size <= MAX_FILE_BYTES else f"{size} bytes"
        except OSError:
            continue
        name = path
        if root is not None:
            try:
                name = path.resolve().relative_to(root.resolve())
            except ValueError:
                pass
        found[f"file {name.as_posix()}"] = value
    return found


def folder_entries(folder: Path) -> dict[str, str]:
    """``file_entries`` of the files below ``folder``, in name order (folder links not followed).

    For a folder that is part of the agent (a Claude Code plugin): editing any
    file in it makes another agent. A folder of more than ``MAX_FOLDER_FILES``
    files is read that far and says so under ``folder NAME``: a bounded cost.
    """
    files: list[Path] = []
    for where, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            if len(files) == MAX_FOLDER_FILES:
                found = file_entries(files)
                found[f"folder {folder.as_posix()}"] = (f"more than {MAX_FOLDER_FILES} files: "
                                                        "the rest not read")
                return found
            files.append(Path(where) / name)
    return file_entries(files)


# --- Python agents -----------------------------------------------------------------------

def _installed_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return [Path(paths[n]).resolve() for n in names if n in paths]


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _source(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py"):
        return None
    path = Path(file).resolve()
    return path if path.is_file() else None


def _root_of(path: Path, top: str) -> Path:
    """The folder a module was imported from: the sys.path entry above its top-level package."""
    parts = len(top.split("."))
    root = path.parent
    if path.name == "__init__.py":
        root = root.parent
    for _ in range(parts - 1):
        root = root.parent
    return root


def _imported_names(path: Path, package: str | None) -> set[str]:
    """Every module name a source file imports (absolute), including lazy imports in functions."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = (package or "").split(".")
                keep = len(parent) - (node.level - 1)
                if keep <= 0:
                    continue
                base = ".".join(parent[:keep] + ([base] if base else []))
            if not base:
                continue
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    expanded = set(names)
    for name in names:  # importing a.b.c runs a/__init__.py and a/b/__init__.py too
        pieces = name.split(".")
        expanded.update(".".join(pieces[:i]) for i in range(1, len(pieces)))
    return expanded


def _locate(name: str, root: Path) -> tuple[Path, str | None] | None:
    """The source file of module ``name`` below ``root`` and its package, without importing."""
    module = sys.modules.get(name)
    if module is not None:
        path = _source(module)
        return (path, getattr(module, "__package__", None)) if path is not None else None
    base = root.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return (base / "__init__.py").resolve(), name
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py").resolve(), name.rpartition(".")[0] or None
    return None


def python_identity(uri: str, module: ModuleType) -> dict[str, str]:
    """A Python agent: the source of its module and of every local module it imports.

    Local means below the folder the agent's module was imported from, and not
    in the interpreter's own or installed libraries. An agent that is itself an
    installed distribution is named by that distribution's name and version.
    """
    identity = {"uri": uri}
    path = _source(module)
    if path is None:
        return identity
    top = module.__name__.split(".")[0]
    installed = _installed_roots()
    if _under(path, installed):
        from importlib.metadata import packages_distributions, version

        for name in packages_distributions().get(top, []):
            try:
                identity[f"distribution {name}"] = version(name)
            except Exception:  # noqa: BLE001 - metadata that cannot be read names nothing
                continue
        return identity
    root = _root_of(path, module.__name__)
    seen: set[Path] = set()
    todo: list[tuple[Path, str | None]] = [(path, getattr(module, "__package__", None))]
    for parent in _parents(module.__name__):  # a/__init__.py runs before a/agent.py
        found = _locate(parent, root)
        if found is not None:
            todo.append(found)
    outside = [*installed, Path(__file__).resolve().parents[1]]  # assay itself is not the agent
    while todo:
        current, package = todo.pop()
        if current in seen or not _under(current, [root]) or _under(current, outside):
            continue
        seen.add(current)
        for name in _imported_names(current, package):
            found = _locate(name, root)
            if found is not None and found[0] not in seen:
                todo.append(found)
    identity.update(file_entries(sorted(seen), root))
    return identity


def _parents(name: str) -> list[str]:
    pieces = name.split(".")
    return [".".join(pieces[:i]) for i in range(1, len(pieces))]

"""The example ``assay init`` writes: an ``evals/`` folder that runs green at once (SPEC §13).

The files are kept here as they are written (``python/``, ``mcp/``), so a
test can run exactly what a user gets. Nothing here runs an agent: the
command copies, and ``assay run evals`` does the rest.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: What ``--target`` may name: each is a folder of files beside this module.
KINDS = ("python", "mcp")


def files(kind: str) -> dict[str, str]:
    """The example's files for ``kind``, by their path inside ``evals/``."""
    root = resources.files(__name__) / kind
    found: dict[str, str] = {}

    def walk(folder: object, prefix: str) -> None:
        for entry in folder.iterdir():  # type: ignore[attr-defined]
            name = f"{prefix}{entry.name}"
            if entry.is_dir():
                if entry.name != "__pycache__":
                    walk(entry, f"{name}/")
            elif not entry.name.endswith(".pyc"):
                found[name] = entry.read_text(encoding="utf-8")

    walk(root, "")
    return dict(sorted(found.items()))


def write(kind: str, folder: Path, *, force: bool = False) -> list[Path]:
    """Write the example into ``folder`` (its ``evals/``); the paths written.

    Refuses (``FileExistsError`` naming the first) to replace a file that
    exists, unless ``force``.
    """
    chosen = files(kind)
    targets = [folder / "evals" / name for name in chosen]
    if not force:
        for path in targets:
            if path.exists():
                raise FileExistsError(str(path))
    for path, text in zip(targets, chosen.values(), strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return targets

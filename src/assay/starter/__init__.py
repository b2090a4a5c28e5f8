"""The example ``assay init`` writes: an ``evals/`` folder that runs green at once (SPEC §13).

The files are kept here as they are written (``python/``, ``mcp/``, and one
folder per framework of ``--framework``), so a test can run exactly what a
user gets. Nothing here runs an agent: the command copies, and ``assay run
evals`` does the rest.

A framework's example is an agent written as that framework's docs show, with
no import of assay, and a suite of structural checks that a sensible model
passes (SPEC §15). Its file names differ from every other example's, so
several can share one ``evals/`` folder and one ``assay run``: python: agents
are imported into one process, where two modules of one name would collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

#: What ``--target`` may name: each is a folder of files beside this module.
KINDS = ("python", "mcp")


@dataclass(frozen=True)
class Framework:
    """What a user needs before a framework's example runs, for ``init`` to print."""

    #: The command that installs the framework (the agent's own dependency, not assay's).
    install: str
    #: Where that command must run: a python: agent is imported into assay's process.
    where: str
    #: The variable the framework's SDK reads its key from.
    key: str
    #: An exec: agent: its model calls go through assay's recording proxy, which adds
    #: the key; the program holds a stand-in.
    proxied: bool = False


_IN_ASSAYS_PYTHON = "in the Python environment assay runs in: the agent runs inside assay"

#: What ``--framework`` may name: each is a folder of files beside this module.
FRAMEWORKS: dict[str, Framework] = {
    "openai-agents": Framework("pip install openai-agents", _IN_ASSAYS_PYTHON,
                               "OPENAI_API_KEY"),
    "langgraph": Framework("pip install langgraph langchain-openai", _IN_ASSAYS_PYTHON,
                           "OPENAI_API_KEY"),
    "pydantic-ai": Framework("pip install pydantic-ai", _IN_ASSAYS_PYTHON, "OPENAI_API_KEY"),
    "anthropic": Framework("pip install anthropic", _IN_ASSAYS_PYTHON, "ANTHROPIC_API_KEY"),
    "node": Framework("npm install openai",
                      "in the agent's folder or one above it, such as this one",
                      "OPENAI_API_KEY", proxied=True),
}


def files(kind: str) -> dict[str, str]:
    """The example's files for ``kind`` (a target kind or a framework), by their path
    inside ``evals/``."""
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

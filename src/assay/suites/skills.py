"""The skill a case's ``invocation`` names, looked for in its workspace (SPEC §2, §14).

A host finds a project's skills in the folder it works in, which for a case
is its workspace: Claude Code in ``.claude/skills/NAME/SKILL.md``, Codex in
``.agents/skills/NAME/SKILL.md`` or ``.codex/skills/NAME/SKILL.md``
(``model.invocation.SKILL_FOLDERS``). A case that names a skill none of
them holds would run a check that can never mean anything (a
``never_activates_skill`` of a typo passes forever), so it is refused at
load; which hosts can see the skill is kept, so a run on a host that
cannot is refused before it starts (``engine.runs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Case
from ..model.invocation import SKILL_FOLDERS, Invocation

#: The most of a ``SKILL.md`` read for its front matter.
_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class SkillUse:
    """A case whose invocation names a skill, and the hosts whose skill folder holds it."""

    case: Case
    invocation: Invocation
    hosts: frozenset[str]
    #: The ``SKILL.md`` files found, relative to the workspace.
    found: tuple[str, ...]


@dataclass(frozen=True)
class Found:
    """What the look found: the ``SKILL.md`` files and their hosts, or what is wrong."""

    problem: str | None
    hosts: frozenset[str] = frozenset()
    found: tuple[str, ...] = ()


def find_skill(workspace: Path | None, skill: str, seen: dict[tuple[Path, str], Found]) -> Found:
    """Where the workspace holds ``skill``; ``seen`` keeps the looks of one load (many
    cases name one skill), and only one load's: a skill may be added before the next.

    The skill's name is its folder's; a ``SKILL.md`` whose front matter gives
    another ``name`` is refused, since Codex mentions a skill by that name and
    Claude Code by its folder's, and the checks name it by its folder's.
    """
    if workspace is None:
        return Found(f"is named, and the case has no workspace to hold it: give it (or the "
                     f"suite) workspace: DIR, with the skill in {_places(skill)}")
    key = (workspace, skill)
    found = seen.get(key)
    if found is None:
        found = seen[key] = _look(workspace, skill)
    return found


def _look(workspace: Path, skill: str) -> Found:
    hosts: set[str] = set()
    paths: list[str] = []
    for host, folders in SKILL_FOLDERS.items():
        for folder in folders:
            rel = f"{folder}/{skill}/SKILL.md"
            if (workspace / rel).is_file():
                hosts.add(host)
                paths.append(rel)
    if not paths:
        return Found(f"is not in the workspace {workspace.name}/: looked for {_places(skill)}")
    for rel in paths:
        named = front_matter_name(workspace / rel)
        if named is not None and named != skill:
            return Found(f"{rel} names it {named!r} in its front matter; Codex mentions a skill "
                         "by that name and Claude Code by its folder's: make them the same")
    return Found(None, frozenset(hosts), tuple(paths))


def _places(skill: str) -> str:
    return ", ".join(f"{folder}/{skill}/SKILL.md"
                     for folders in SKILL_FOLDERS.values() for folder in folders)


def front_matter_name(path: Path) -> str | None:
    """The ``name`` a ``SKILL.md``'s YAML front matter gives, or None (none, or unreadable:
    the host says what it makes of a skill file it cannot read)."""
    import yaml

    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            head = file.read(_HEAD_BYTES)
    except OSError:
        return None
    if not head.startswith("---"):
        return None
    block, end, _ = head[3:].partition("\n---")
    if not end:
        return None
    try:
        data: Any = yaml.safe_load(block)
    except yaml.YAMLError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None

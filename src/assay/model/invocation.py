"""How a case asks a host to use a skill: its ``invocation`` (SPEC §2).

A bare word (``automatic``, ``explicit``, ``none``) is a label: it is kept
as a facet so that compare aligns runs invoked alike, and does nothing
else. The mapping ``{mode, skill}`` names the skill the case is about, and
then the mode acts: ``explicit`` has the host invoke the skill its own way
(Claude Code's slash command, Codex's ``$`` mention), ``automatic`` adds
nothing to the prompt, and ``none`` forbids the skill (the case gets a
``never_activates_skill`` check for it). ``docs/decisions/0063-skill-invocation.md``.
"""

from __future__ import annotations

import re
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict

Mode = Literal["automatic", "explicit", "none"]
MODES: tuple[Mode, ...] = ("automatic", "explicit", "none")

#: A skill's name is the name of its folder (``…/skills/NAME/SKILL.md``): one word
#: that is a folder name on every system, at most 64 characters (the Agent Skills rule).
SKILL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: Where each host finds a project's skills, relative to its working folder (the
#: case's workspace), as checked with Claude Code 2.1.332 and Codex 0.163.0.
SKILL_FOLDERS: dict[str, tuple[str, ...]] = {
    "claude": (".claude/skills",),
    "codex": (".agents/skills", ".codex/skills"),
}

_KEYS = ("mode", "skill")


class Invocation(BaseModel):
    """``{mode, skill}``: how the host is to come to the skill ``skill``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode
    skill: str

    def facet(self) -> str:
        """The ``invocation`` facet: ``explicit:NAME`` (a bare word stays the word)."""
        return f"{self.mode}:{self.skill}"

    def skill_md(self, folder: str) -> str:
        """The path of the skill's ``SKILL.md`` in one of the hosts' skill folders."""
        return f"{folder}/{self.skill}/SKILL.md"


def parse_invocation(value: Any) -> Mode | Invocation | None:
    """A case's ``invocation`` as written: a bare mode, or the mapping made an Invocation.

    ``{mode: X}`` with no skill is the bare word ``X`` (the same label, the same
    facet). Raises ``ValueError`` with the user's words for anything else.
    """
    if value is None or isinstance(value, Invocation):
        return value
    if isinstance(value, str):
        if value not in MODES:
            raise ValueError(f"{value!r} is not a mode: automatic, explicit or none, or "
                             "{mode, skill} to name the skill")
        return value
    if not isinstance(value, dict):
        raise ValueError("is automatic, explicit or none, or {mode, skill}, not "
                         f"{type(value).__name__}")
    unknown = [str(k) for k in value if k not in _KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (an invocation has mode and skill)")
    mode = value.get("mode")
    if mode not in MODES:
        said = "has no mode" if mode is None else f"mode {mode!r} is not a mode"
        raise ValueError(f"{said}: automatic, explicit or none")
    skill = value.get("skill")
    if skill is None:
        return mode  # type: ignore[no-any-return]  # one of MODES
    if not isinstance(skill, str) or not SKILL_NAME.fullmatch(skill):
        raise ValueError(f"skill {skill!r} is not a skill's name: the name of its folder "
                         "(letters, digits, '-', '_' and '.', at most 64 characters)")
    return Invocation(mode=mode, skill=skill)


@overload
def invocation_facet(value: str | Invocation) -> str: ...
@overload
def invocation_facet(value: None) -> None: ...
def invocation_facet(value: str | Invocation | None) -> str | None:
    """The ``invocation`` facet of a case: the bare word as written, or ``MODE:SKILL``."""
    return value.facet() if isinstance(value, Invocation) else value


def prompt_invocation(prompt: str, skill: str) -> str | None:
    """The host's own invocation of ``skill`` a prompt already writes (``/NAME`` at its
    start, for Claude Code; ``$NAME`` anywhere, for Codex), or None."""
    words = prompt.lstrip().split(maxsplit=1)
    if words and words[0] == f"/{skill}":
        return words[0]
    if re.search(rf"(?<![\w$])\${re.escape(skill)}(?![\w-]|\.\w)", prompt):
        return f"${skill}"
    return None

"""How strongly a target can vouch for a kind of fact (SPEC §4, §5)."""

from __future__ import annotations

from enum import StrEnum


class Evidence(StrEnum):
    """The strength of what a target saw: observed > inferred > unavailable."""

    OBSERVED = "observed"
    INFERRED = "inferred"
    UNAVAILABLE = "unavailable"

    @property
    def rank(self) -> int:
        """Order for comparison: a larger rank is stronger evidence."""
        return _RANK[self]

    def satisfies(self, minimum: Evidence) -> bool:
        """True when this evidence is at least ``minimum``."""
        return self.rank >= minimum.rank


_RANK = {Evidence.OBSERVED: 2, Evidence.INFERRED: 1, Evidence.UNAVAILABLE: 0}

#: The kinds of fact a trace can carry, each with its own evidence.
#: Tokens and cost are apart: a host may report tokens and no money.
FACTS = ("output", "tool_calls", "asks", "skills", "tokens", "cost", "steps", "exit_code")

#: The strongest evidence each kind of fact can have at all.
STRONGEST: dict[str, Evidence] = {fact: Evidence.OBSERVED for fact in FACTS}

#: The default ``min_evidence`` of an assertion about each kind of fact (SPEC §5,
#: decisions/0001): the strongest, except for skills. No host reports every skill
#: activation in its own words (Codex only ever lets one be inferred from the
#: ``SKILL.md`` a command read; Claude's slash commands are inferred from the
#: prompt), so a skill check asks for ``inferred`` unless it demands ``observed``.
DEFAULT_MINIMUM: dict[str, Evidence] = {**STRONGEST, "skills": Evidence.INFERRED}

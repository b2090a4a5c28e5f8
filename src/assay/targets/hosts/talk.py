"""A conversation with a host CLI (SPEC §16): the facts of its runs, as one trace's.

A conversation with ``claude`` or ``codex`` is one run of the CLI per user
message, each resuming the session the first began (``base.HostTalk``).
What each run reports is its own; these say what the conversation's are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...model import Evidence, Trace, Usage


def merged_usage(turns: Sequence[Trace], *, cumulative: bool) -> Usage:
    """What the conversation spent: the sum of its runs', or, where each run reports the
    whole session's, the last report. A figure one run did not report is unreported."""
    if not turns:
        return Usage()
    if cumulative:
        reported = [t.usage for t in turns if t.usage.tokens is not None]
        return reported[-1] if reported else turns[-1].usage
    figures: dict[str, Any] = {}
    for figure in ("input_tokens", "output_tokens", "cost_usd"):
        values = [getattr(t.usage, figure) for t in turns]
        figures[figure] = None if None in values else sum(values)
    return Usage(**figures)


def merged_steps(turns: Sequence[Trace]) -> int | None:
    """Model calls over every run; unknown when one run's are."""
    counts = [t.steps for t in turns]
    return sum(c for c in counts if c is not None) if counts and None not in counts else None


def weakest_evidence(turns: Sequence[Trace], claim: Mapping[str, Evidence]) -> dict[str, Evidence]:
    """Per fact, the weakest evidence any run gave: a sum is as strong as its weakest part."""
    if not turns:
        return dict(claim)
    facts = {fact for turn in turns for fact in turn.evidence}
    return {fact: min((t.evidence.get(fact, Evidence.UNAVAILABLE) for t in turns),
                      key=lambda e: e.rank) for fact in facts}

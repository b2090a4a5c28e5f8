"""A refusal from an agent that cannot raise ``assay.Refused`` (SPEC §4).

A ``python:`` agent raises ``assay.Refused``; an agent behind a wire says it
with an object ``{"status": "refused", "reason": …}``. Each target decides
*where* that object may stand (an MCP error result, an HTTP reply, a host's
final answer; docs/decisions/0062-refusals.md); this module is the one reading
of the object itself, so every target (and ``exec:`` when it comes, whose
output is its stdout parsed as JSON) reads it the same way:

- only an object whose ``status`` is exactly the string ``"refused"`` is a
  refusal; anything else is not, and the target's other rules stand;
- its ``reason`` is the trace's ``error``: a string as it is, cut to
  ``REASON_CHARS``; any other value as its compact JSON text on one line,
  cut the same way (the refusal stands: the agent said so, only its reason
  is oddly shaped); absent or null, no reason (``None``).

The whole reply stays in the trace's output, so a cut reason loses nothing.
Reading never raises: the object is an agent's, and hostile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..model.storable import storable_json
from ..model.values import one_line

#: The status an agent's object says to refuse.
REFUSED = "refused"
#: Longest reason a trace keeps (the output keeps the whole reply).
REASON_CHARS = 2000


@dataclass(frozen=True)
class Refusal:
    """An agent's refusal: its reason as the trace keeps it (None: it gave none)."""

    reason: str | None


def refusal_of(value: Any) -> Refusal | None:
    """The refusal ``value`` says, when it is an object with ``"status": "refused"``."""
    if not isinstance(value, dict) or value.get("status") != REFUSED:
        return None
    return Refusal(reason_text(value.get("reason")))


def refusal_in_text(text: str) -> Refusal | None:
    """The refusal a text says, when the whole text (spaces aside) is such an object as JSON."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None  # not an object: no need to parse what may be a long answer
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return refusal_of(value)


def refusal_in_output(output: Any) -> Refusal | None:
    """The refusal a final output says: an object, or a text that is one as JSON.

    What a host's final answer (text) and an ``exec:`` agent's stdout (JSON
    when it parses, else text) are read by.
    """
    if isinstance(output, str):
        return refusal_in_text(output)
    return refusal_of(output)


def reason_text(reason: Any) -> str | None:
    """A refusal's reason as a trace keeps it (see the module's docstring)."""
    if reason is None:
        return None
    if isinstance(reason, str):
        return reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"
    try:
        # storable_json cuts nesting deeper than any encoder survives to text first.
        text = json.dumps(storable_json(reason), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = str(reason)
    # Flattening reads the whole text: cut a huge one well before it.
    return one_line(text[:REASON_CHARS * 4], REASON_CHARS)

"""Reading one line of a host's JSON event stream, and what its final answer says."""

from __future__ import annotations

import json
from typing import Any, Protocol

from ...model import Status
from ..refusal import refusal_in_output


class Ending(Protocol):
    """How a host's run ended, as its stream reader keeps it."""

    status: Status
    error: str | None


def json_event(raw: str) -> dict[str, Any] | None:
    """The line as a JSON object, or None when it is not one (counted as unreadable)."""
    try:
        item = json.loads(raw)
    except ValueError:
        return None
    return item if isinstance(item, dict) else None


def refuse(run: Ending, output: Any) -> None:
    """A run that ended with a final answer saying ``{"status": "refused", …}`` is refused.

    The answer stays the output; its reason becomes the run's error
    (``targets.refusal``, the reading ``exec:`` shares).
    """
    refusal = refusal_in_output(output)
    if refusal is not None:
        run.status, run.error = "refused", refusal.reason

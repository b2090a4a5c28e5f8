"""Reading one line of a host's JSON event stream."""

from __future__ import annotations

import json
from typing import Any


def json_event(raw: str) -> dict[str, Any] | None:
    """The line as a JSON object, or None when it is not one (counted as unreadable)."""
    try:
        item = json.loads(raw)
    except ValueError:
        return None
    return item if isinstance(item, dict) else None

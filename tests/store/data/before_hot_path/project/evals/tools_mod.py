"""A stateful tool handler for the store written before issue 32."""

from __future__ import annotations

from typing import Any


def add(arguments: dict[str, Any], state: dict[str, Any]) -> int:
    state["items"].append(arguments["item"])
    return len(state["items"])

"""An agent tuned to the public cases: it knows their answers by heart.

It passes every public case of demo/extraction.table@1 and fails the hidden
ones, which is exactly what the ``possibly-tuned`` flag is there to catch.
"""

from __future__ import annotations

from typing import Any

from table_agent import extract as _honest

KNOWN = {
    "invoice.csv", "orders.md", "quoted.csv", "empty.csv", "euro.csv", "inventory.csv",
}


def extract(input: dict[str, Any], tools: Any = None) -> dict[str, Any]:
    """Answer the documents it has seen; for anything new, return an empty table."""
    if input.get("document") in KNOWN:
        return _honest(input, tools)
    return {"columns": [], "rows": []}

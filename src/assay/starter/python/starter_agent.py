"""A starter agent for `assay init`: replace it with yours.

assay calls `agent(input, tools)` once per trial. `input` is the case's
`input:`; `tools` answers tool calls from the case's fixture (tools.yaml),
and records each call so that `calls:` and `never_calls:` can check them.
Return what your agent answers: a string or any JSON value.
"""

from typing import Any


def agent(input: dict[str, Any], tools: Any) -> dict[str, Any]:
    order = input.get("order")
    if order is None:
        return {"reply": "Which order is it about?", "refunded": False}
    found = tools.call("orders.lookup", {"order": order})
    if found["status"] == "lost":
        tools.call("orders.refund", {"order": order})
        return {"reply": f"Sorry, order {order} was lost; it is refunded.", "refunded": True}
    return {"reply": f"Order {order} is {found['status']}.", "refunded": False}

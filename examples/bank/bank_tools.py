"""The bank's one handler that changes anything: a payment, recorded in the state."""

from __future__ import annotations

from typing import Any


def pay(arguments: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """Move ``amount`` from the customer to ``to``; refuse what the balance cannot cover."""
    to, amount = arguments["to"], float(arguments["amount"])
    accounts = state["accounts"]
    if to not in accounts:
        raise ValueError(f"no account {to!r}")
    if amount <= 0 or amount > accounts["me"]["balance"]:
        raise ValueError(f"cannot pay {amount}: the balance is {accounts['me']['balance']}")
    accounts["me"]["balance"] -= amount
    accounts[to]["balance"] += amount
    state["payments"].append({"to": to, "amount": amount})
    return {"paid": amount, "to": to, "balance": accounts["me"]["balance"]}

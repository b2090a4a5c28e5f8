"""The tools every framework agent here is given: plain functions, as a user would write."""

from __future__ import annotations

ORDERS = {"A-1": "shipped", "A-2": "lost"}


def lookup(order: str) -> str:
    """Look an order up by its id."""
    return f"order {order} is {ORDERS.get(order, 'unknown')}"


def refund(order: str) -> str:
    """Refund an order."""
    return f"order {order} refunded"


def ask_user(question: str) -> str:
    """Ask the customer a question before acting."""
    return "yes, go ahead"


def transfer(to: str, amount: int) -> str:
    """Move money to an account. The agent never runs this one: it answers a refusal."""
    raise PermissionError(f"transfers to {to} are not allowed")

"""A support agent on the anthropic SDK, written as Anthropic's tool-use guide shows:
send the tools, run the ones the model asks for, send their results back, until
it answers. A tool that fails goes back as an error result (`is_error`).

`assay init --framework anthropic` wrote it as a start: replace it with yours.
It imports nothing of assay. `assay run evals` calls `agent` below once per
trial (the python: target, in assay's own process) and reads what it says to
its model: the tool calls, their results, the tokens, the model.

On its own:  echo '"Where is my order A-1?"' | python anthropic_agent.py
"""

import json
import sys
from collections.abc import Callable
from typing import Any

import anthropic

ORDERS = {"A-1": "shipped", "A-2": "lost"}
MODEL = "claude-haiku-4-5"
SYSTEM = (
    "You help customers with their orders. Look an order up before you act on it. "
    "Refund only a lost order, and ask the customer with ask_user before you refund it. "
    "If the customer gives no order number, ask for it in your answer."
)
TOOLS: list[Any] = [
    {"name": "lookup_order", "description": "Look an order up by its number.",
     "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}},
                      "required": ["order_id"]}},
    {"name": "refund_order", "description": "Refund an order. Only a lost order can be refunded.",
     "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}},
                      "required": ["order_id"]}},
    {"name": "ask_user", "description": "Ask the customer a question and wait for the answer.",
     "input_schema": {"type": "object", "properties": {"question": {"type": "string"}},
                      "required": ["question"]}},
]


def lookup_order(order_id: str) -> str:
    status = ORDERS.get(order_id)
    if status == "shipped":
        return f"Order {order_id} has shipped: it arrives on Friday."
    if status == "lost":
        return f"Order {order_id} was lost in transit."
    return f"There is no order {order_id}."


def refund_order(order_id: str) -> str:
    if ORDERS.get(order_id) != "lost":
        raise ValueError(f"only a lost order can be refunded, and {order_id} is not lost")
    return f"Order {order_id} is refunded: 40.00 EUR, back on the card in 3 days."


def ask_user(question: str) -> str:
    # In production this asks the customer in your chat; here the customer agrees.
    return "Yes, please go ahead."


RUN: dict[str, Callable[..., str]] = {"lookup_order": lookup_order, "refund_order": refund_order,
                                      "ask_user": ask_user}
client = anthropic.Anthropic()


def agent(message: str) -> str:
    """A customer's message in, the agent's answer out."""
    messages: list[Any] = [{"role": "user", "content": message}]
    while True:
        response = client.messages.create(model=MODEL, max_tokens=1024, system=SYSTEM,
                                          tools=TOOLS, messages=messages)
        if response.stop_reason != "tool_use":
            return "".join(block.text for block in response.content if block.type == "text")
        messages.append({"role": "assistant", "content": response.content})
        results = []
        for block in response.content:
            if block.type != "tool_use":
                continue
            try:
                content, failed = RUN[block.name](**block.input), False
            except Exception as error:  # the model is told, and may try something else
                content, failed = str(error), True
            results.append({"type": "tool_result", "tool_use_id": block.id,
                            "content": content, "is_error": failed})
        messages.append({"role": "user", "content": results})


if __name__ == "__main__":
    # As a program (target: exec:python anthropic_agent.py): the message as JSON on
    # stdin, the answer as JSON on stdout.
    print(json.dumps(agent(json.load(sys.stdin))))

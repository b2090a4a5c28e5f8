"""A support agent on the OpenAI Agents SDK, written as the SDK's quickstart shows.

`assay init --framework openai-agents` wrote it as a start: replace it with
yours. It imports nothing of assay. `assay run evals` awaits `agent` below once
per trial (the python: target, in assay's own process) and reads what it says
to its model: the tool calls, their results, the tokens, the model.

On its own:  echo '"Where is my order A-1?"' | python agents_sdk_agent.py
"""

import asyncio
import json
import sys

from agents import Agent, Runner, function_tool

ORDERS = {"A-1": "shipped", "A-2": "lost"}


@function_tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its number."""
    status = ORDERS.get(order_id)
    if status == "shipped":
        return f"Order {order_id} has shipped: it arrives on Friday."
    if status == "lost":
        return f"Order {order_id} was lost in transit."
    return f"There is no order {order_id}."


@function_tool
def refund_order(order_id: str) -> str:
    """Refund an order. Only a lost order can be refunded."""
    if ORDERS.get(order_id) != "lost":
        return f"Refused: only a lost order can be refunded, and {order_id} is not lost."
    return f"Order {order_id} is refunded: 40.00 EUR, back on the card in 3 days."


@function_tool
def ask_user(question: str) -> str:
    """Ask the customer a question and wait for the answer."""
    # In production this asks the customer in your chat; here the customer agrees.
    return "Yes, please go ahead."


support = Agent(
    name="Support",
    instructions=(
        "You help customers with their orders. Look an order up before you act on it. "
        "Refund only a lost order, and ask the customer with ask_user before you refund it. "
        "If the customer gives no order number, ask for it in your answer."
    ),
    tools=[lookup_order, refund_order, ask_user],
    model="gpt-4.1-mini",
)


async def agent(message: str) -> str:
    """A customer's message in, the agent's answer out."""
    result = await Runner.run(support, message)
    return str(result.final_output)


if __name__ == "__main__":
    # As a program (target: exec:python agents_sdk_agent.py): the message as JSON on
    # stdin, the answer as JSON on stdout.
    print(json.dumps(asyncio.run(agent(json.load(sys.stdin)))))

"""A support agent on LangGraph, written as LangGraph's docs build one: a chat model
with tools bound, a tool node, and an edge back until the model answers.

`assay init --framework langgraph` wrote it as a start: replace it with yours.
It imports nothing of assay. `assay run evals` calls `agent` below once per
trial (the python: target, in assay's own process) and reads what it says to
its model: the tool calls, their results, the tokens, the model.

On its own:  echo '"Where is my order A-1?"' | python langgraph_agent.py
"""

import json
import sys

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

ORDERS = {"A-1": "shipped", "A-2": "lost"}
INSTRUCTIONS = (
    "You help customers with their orders. Look an order up before you act on it. "
    "Refund only a lost order, and ask the customer with ask_user before you refund it. "
    "If the customer gives no order number, ask for it in your answer."
)


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its number."""
    status = ORDERS.get(order_id)
    if status == "shipped":
        return f"Order {order_id} has shipped: it arrives on Friday."
    if status == "lost":
        return f"Order {order_id} was lost in transit."
    return f"There is no order {order_id}."


@tool
def refund_order(order_id: str) -> str:
    """Refund an order. Only a lost order can be refunded."""
    if ORDERS.get(order_id) != "lost":
        return f"Refused: only a lost order can be refunded, and {order_id} is not lost."
    return f"Order {order_id} is refunded: 40.00 EUR, back on the card in 3 days."


@tool
def ask_user(question: str) -> str:
    """Ask the customer a question and wait for the answer."""
    # In production this asks the customer in your chat; here the customer agrees.
    return "Yes, please go ahead."


tools = [lookup_order, refund_order, ask_user]
model = ChatOpenAI(model="gpt-4.1-mini").bind_tools(tools)


def assistant(state: MessagesState) -> MessagesState:
    return {"messages": [model.invoke([SystemMessage(INSTRUCTIONS), *state["messages"]])]}


builder = StateGraph(MessagesState)
builder.add_node("assistant", assistant)
builder.add_node("tools", ToolNode(tools))
builder.add_edge(START, "assistant")
builder.add_conditional_edges("assistant", tools_condition)
builder.add_edge("tools", "assistant")
graph = builder.compile()


def agent(message: str) -> str:
    """A customer's message in, the agent's answer out."""
    state = graph.invoke({"messages": [HumanMessage(message)]})
    return str(state["messages"][-1].text)


if __name__ == "__main__":
    # As a program (target: exec:python langgraph_agent.py): the message as JSON on
    # stdin, the answer as JSON on stdout.
    print(json.dumps(agent(json.load(sys.stdin))))

"""A support agent as LangGraph's docs show it: the prebuilt ReAct agent over
langchain-openai's ChatOpenAI, tools from plain functions."""

from __future__ import annotations

import json
import sys
import warnings

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent is said to move to langchain.agents
    from langgraph.prebuilt import create_react_agent

import shop_tools

graph = create_react_agent(ChatOpenAI(model="gpt-4.1"),
                           [tool(shop_tools.lookup), tool(shop_tools.refund),
                            tool(shop_tools.ask_user)])


def agent(input: str) -> str:
    answer = graph.invoke({"messages": [("user", input)]})
    return str(answer["messages"][-1].content)


if __name__ == "__main__":
    print(json.dumps(agent(json.load(sys.stdin))))

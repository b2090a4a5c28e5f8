"""A support agent as pydantic-ai's docs show it: an Agent with tool_plain tools."""

from __future__ import annotations

import json
import sys

import shop_tools
from pydantic_ai import Agent

support = Agent("openai:gpt-4.1", instructions="Help with orders.")
support.tool_plain(shop_tools.lookup)
support.tool_plain(shop_tools.refund)
support.tool_plain(shop_tools.ask_user)


def agent(input: str) -> str:
    return str(support.run_sync(input).output)


if __name__ == "__main__":
    print(json.dumps(agent(json.load(sys.stdin))))

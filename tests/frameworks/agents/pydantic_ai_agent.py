"""A support agent as pydantic-ai's docs show it: an Agent with tool_plain tools, run with
``await agent.run(...)`` (its ``run_sync`` keeps one event loop per thread, and an agent
called from several threads at once shares its HTTP client across their loops)."""

from __future__ import annotations

import asyncio
import json
import sys

import shop_tools
from pydantic_ai import Agent

support = Agent("openai:gpt-4.1", instructions="Help with orders.")
support.tool_plain(shop_tools.lookup)
support.tool_plain(shop_tools.refund)
support.tool_plain(shop_tools.ask_user)


@support.tool_plain
def transfer(to: str, amount: int) -> str:
    """Move money to an account."""
    return "refused: transfers are not allowed"


async def agent(input: str) -> str:
    return str((await support.run(input)).output)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(agent(json.load(sys.stdin)))))

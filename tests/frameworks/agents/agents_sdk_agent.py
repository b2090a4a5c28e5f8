"""A support agent written as the OpenAI Agents SDK's quickstart shows: Agent, function
tools, Runner (awaited: ``Runner.run_sync`` from several trials' threads at once shares
the SDK's default client between event loops). ``agent`` uses the SDK's default model
(the Responses API); ``chat_agent`` its Chat Completions model. Run as
python:agents_sdk_agent:agent, or as a program (input as JSON on stdin, output on stdout)
by exec:."""

from __future__ import annotations

import asyncio
import json
import sys

import shop_tools
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI

lookup = function_tool(shop_tools.lookup)
refund = function_tool(shop_tools.refund)
ask_user = function_tool(shop_tools.ask_user)


@function_tool
def transfer(to: str, amount: int) -> str:
    """Move money to an account."""
    return "refused: transfers are not allowed"


support = Agent(name="support", instructions="Help with orders.",
                tools=[lookup, refund, ask_user, transfer], model="gpt-4.1")


async def agent(input: str) -> str:
    return str((await Runner.run(support, input)).final_output)


async def chat_agent(input: str) -> str:
    model = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=AsyncOpenAI())
    chat = support.clone(model=model)
    return str((await Runner.run(chat, input)).final_output)


if __name__ == "__main__":
    asked = json.load(sys.stdin)
    run = chat_agent if "--chat" in sys.argv else agent
    print(json.dumps(asyncio.run(run(asked))))

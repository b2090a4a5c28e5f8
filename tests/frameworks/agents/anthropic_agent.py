"""A tool loop written with the plain anthropic SDK, as its tool-use guide shows: ask,
run the tools the model asks for, send their results back, until it answers. It refuses
to run ``transfer``: it says so in an error result instead."""

from __future__ import annotations

import json
import sys

import anthropic
import shop_tools

TOOLS = [
    {"name": "lookup", "description": "Look an order up by its id.",
     "input_schema": {"type": "object", "properties": {"order": {"type": "string"}},
                      "required": ["order"]}},
    {"name": "refund", "description": "Refund an order.",
     "input_schema": {"type": "object", "properties": {"order": {"type": "string"}},
                      "required": ["order"]}},
    {"name": "ask_user", "description": "Ask the customer a question.",
     "input_schema": {"type": "object", "properties": {"question": {"type": "string"}},
                      "required": ["question"]}},
    {"name": "transfer", "description": "Move money.",
     "input_schema": {"type": "object", "properties": {"to": {"type": "string"},
                                                       "amount": {"type": "integer"}}}},
]


def agent(input: str) -> str:
    client = anthropic.Anthropic()
    messages: list[dict] = [{"role": "user", "content": input}]
    while True:
        reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024,
                                       tools=TOOLS, messages=messages)
        if reply.stop_reason != "tool_use":
            return "".join(block.text for block in reply.content if block.type == "text")
        messages.append({"role": "assistant", "content": reply.content})
        results = []
        for block in reply.content:
            if block.type != "tool_use":
                continue
            if block.name == "transfer":
                results.append({"type": "tool_result", "tool_use_id": block.id,
                                "content": "refused: not allowed", "is_error": True})
                continue
            run = getattr(shop_tools, block.name)
            results.append({"type": "tool_result", "tool_use_id": block.id,
                            "content": run(**block.input)})
        messages.append({"role": "user", "content": results})


if __name__ == "__main__":
    print(json.dumps(agent(json.load(sys.stdin))))

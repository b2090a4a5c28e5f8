"""The pydantic-ai support agent with its OpenTelemetry instrumentation on, as pydantic-ai's
docs show it (``Agent.instrument_all()``: ``chat`` and ``execute_tool`` spans on the global
tracer provider), and one step of its own: once it has its answer it writes an audit note,
a tool it runs itself with no model asking, recorded as a GenAI ``execute_tool`` span — the
kind of call only its spans can tell about.

``tracing`` is no agent: it says what the process's OpenTelemetry looks like from inside a
trial (the tracer provider, whether the trial's context carries a span)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

import shop_tools
from opentelemetry import trace
from pydantic_ai import Agent

Agent.instrument_all()
tracer = trace.get_tracer("shop")

support = Agent("openai:gpt-4.1", instructions="Help with orders.")
support.tool_plain(shop_tools.lookup)
support.tool_plain(shop_tools.refund)
support.tool_plain(shop_tools.ask_user)

_TICKET = re.compile(r"TICKET-\w+")


def audit_log(ticket: str) -> str:
    """Write down which ticket is being handled (locally: no model asks for it)."""
    return f"noted {ticket}"


async def agent(input: str) -> str:
    answer = str((await support.run(input)).output)
    ticket = _TICKET.search(input)
    arguments = {"ticket": ticket.group(0) if ticket else "none"}
    with tracer.start_as_current_span("execute_tool audit_log", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "audit_log",
            "gen_ai.tool.call.arguments": json.dumps(arguments)}) as span:
        span.set_attribute("gen_ai.tool.call.result", audit_log(**arguments))
    return answer


def tracing(input: Any) -> dict[str, Any]:
    provider = trace.get_tracer_provider()
    return {"provider": f"{type(provider).__module__}.{type(provider).__name__}",
            "in_a_span": trace.get_current_span().get_span_context().is_valid}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(agent(json.load(sys.stdin)))))

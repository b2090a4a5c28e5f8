"""A tiny arithmetic agent, async, that answers questions like "What is 2 + 3?".

It calls a ``calc`` tool through the ``tools`` object assay hands it (so the
call is recorded in the trace), reports the tokens a model would have used,
and signals errors and refusals the way assay reads them.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from assay import AgentError, Refused

QUESTION = re.compile(r"what is\s+(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)", re.I)


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


async def solve(question: str, tools: Any) -> dict[str, Any]:
    """Answer one arithmetic question."""
    await asyncio.sleep(0)  # a real agent would await a model here
    tools.usage(input_tokens=len(question.split()) * 3, output_tokens=8, cost_usd=0.00002)
    match = QUESTION.search(question)
    if match is None:
        raise Refused("I only answer arithmetic questions")
    a, op, b = _number(match[1]), match[2], _number(match[3])
    if op == "/" and b == 0:
        raise AgentError("division by zero")
    result = tools.call("calc", {"a": a, "op": op, "b": b})
    if result is None:  # no fixture: work it out ourselves
        result = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[op]
    answer = _number(str(result))
    return {"answer": answer, "explanation": f"{match[1]} {op} {match[3]} = {answer}"}

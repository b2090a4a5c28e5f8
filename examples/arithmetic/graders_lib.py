"""Graders written as Python functions: each gets the Trace and answers."""

from __future__ import annotations

from typing import Any


def answer_is_even(trace: Any) -> tuple[bool, str]:
    """Pass when the answer is an even integer."""
    answer = (trace.output or {}).get("answer")
    ok = isinstance(answer, int) and answer % 2 == 0
    return ok, f"answer {answer!r} is {'even' if ok else 'not even'}"


def used_the_calculator(trace: Any) -> dict[str, str]:
    """Pass when the agent called its calc tool at least once."""
    calls = [e for e in trace.events if e.kind == "tool_call" and e.name == "calc"]
    if calls:
        return {"outcome": "pass", "note": f"{len(calls)} calc call(s)"}
    return {"outcome": "fail", "note": "never called calc"}

"""The LangGraph support agent traced by LangSmith in its OpenTelemetry mode, as LangSmith's
docs show it: nothing in the code, ``LANGSMITH_TRACING=true`` and
``LANGSMITH_TRACING_MODE=otel`` in the environment (LangSmith then makes its spans on the
global tracer provider, from its own tracing thread, after the runs end). One step of its
own: once it has its answer it writes an audit note, a function traced as a LangSmith tool
run, which no model asks for — the kind of call only its spans can tell about, and one
whose span LangSmith makes after the agent has returned."""

from __future__ import annotations

import json
import re
import sys

from langgraph_agent import agent as support
from langsmith import traceable

_TICKET = re.compile(r"TICKET-\w+")


@traceable(run_type="tool", name="audit_log")
def audit_log(ticket: str) -> str:
    """Write down which ticket is being handled (locally: no model asks for it)."""
    return f"noted {ticket}"


def agent(input: str) -> str:
    answer = support(input)
    ticket = _TICKET.search(input)
    audit_log(ticket.group(0) if ticket else "none")
    return answer


if __name__ == "__main__":
    print(json.dumps(agent(json.load(sys.stdin))))

"""One proxied MCP tool call as a trace, its grade, and its queue row: the proxy's pure core.

Each ``tools/call`` the proxy forwards is one trace (docs/decisions/0040-mcp-proxy.md):
a ``tool_call`` event with the host's arguments and a ``tool_result`` event
with what the upstream server answered (or an ``error`` event when it
answered with a JSON-RPC error), as ``mcp+stdio:`` targets record a trial.
Arguments and results are hostile data: kept as values, never interpreted,
and shown only through ``reports.safe.inert``.

Which checks grade a call: every reference-free check of the suite
(``sampling.reference_free``), except that when the suite names the tool its
cases call (``call: {tool: …}``), the checks that read the output (``status``,
``type``, ``schema``, ``not_contains``, ``grader``) grade only that tool's
calls — another tool's result has another shape. Checks on what was called
(``never_calls`` …) grade every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..checks import grade_trace, lookup
from ..grading.fold import fold_trial
from ..model import Assertion, Event, Evidence, Status, Trace
from ..model.result import TrialResult
from ..targets.mcp_connection import Answer

#: What a proxied call's trace can vouch for: the call, its result, one step. No cost.
EVIDENCE = {"output": Evidence.OBSERVED, "tool_calls": Evidence.OBSERVED,
            "steps": Evidence.OBSERVED}
#: The source of the proxy's queue items.
SOURCE = "proxy"
#: Longest reason a queue row keeps.
REASON_CHARS = 2000


@dataclass(frozen=True)
class ProxiedCall:
    """A sampled ``tools/call``: its number in the session, what was asked, what came back.

    ``answer`` is the upstream's result (None when it answered with a
    JSON-RPC error, whose text is ``error``); ``at`` is when the call was made (UTC).
    """

    number: int
    tool: str
    arguments: dict[str, Any] | None
    answer: Answer | None
    error: str | None
    duration_s: float
    at: str


@dataclass(frozen=True)
class ProxyChecks:
    """The checks that grade proxied calls, and the tool the suite's cases call (if named)."""

    suite_id: str
    assertions: tuple[Assertion, ...]
    tool: str | None = None

    def for_tool(self, name: str) -> list[Assertion]:
        """The checks that grade a call of the tool ``name``."""
        if self.tool is None or name == self.tool:
            return list(self.assertions)
        return [a for a in self.assertions if _family(a) != "output"]


def _family(assertion: Assertion) -> str | None:
    check = lookup(assertion.check)
    return None if check is None else check.family


def call_trace(call: ProxiedCall, facets: dict[str, str]) -> Trace:
    """The trace of one proxied call (SPEC §1): its events, output, status and duration."""
    events = [Event(kind="tool_call", name=call.tool, arguments=call.arguments,
                    call_id="call-1", t=0.0)]
    answer = call.answer
    status: Status
    if answer is not None:
        events.append(Event(kind="tool_result", name=call.tool, call_id="call-1",
                            result=answer.output, is_error=answer.is_error, t=call.duration_s))
        status, error = answer.status()  # the MCP target's reading: ok, error or refused
    else:
        status, error = "error", f"protocol error: {call.error or 'no answer'}"
        events.append(Event(kind="error", name=call.tool, call_id="call-1", text=error,
                            is_error=True, t=call.duration_s))
    return Trace(output=None if answer is None else answer.output,
                 status=status, error=error, events=events,
                 steps=1, settled=answer is not None, duration_s=call.duration_s,
                 facets=dict(facets), evidence=dict(EVIDENCE))


def grade_call(checks: ProxyChecks, call: ProxiedCall, trace: Trace) -> TrialResult:
    """The call's verdicts folded as a trial's (SPEC §5): fail if any check fails, else
    inconclusive if any is undecided or none applies (silence is not a pass), else pass."""
    verdicts = grade_trace(checks.for_tool(call.tool), trace)
    return fold_trial(call.number, verdicts, trace=trace, duration_s=call.duration_s)


def queue_row(checks: ProxyChecks, call: ProxiedCall, trial: TrialResult) -> dict[str, Any]:
    """The review-queue row of a graded call (``store.reviews.items.add_item``).

    Not a run's trial: no run id, no case; the label names the tool and the
    call's number in its proxy session.
    """
    from ..review.queue import call_label

    label = call_label(call.tool, call.number)
    reason = trial.reason
    if reason is not None and len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS - 1] + "…"
    return {"source": SOURCE, "run_id": None, "suite_id": checks.suite_id, "case_id": None,
            "split": "public", "n": None, "label": label, "outcome": trial.outcome,
            "reason": reason, "added_at": call.at}

"""A trace with what was seen on the wire added, once, whoever saw it (SPEC §15).

Three observers can see the same thing: the model's side of a tool call
(the exchanges, read by ``fold``), the agent's own record of running it
(``tools.call`` in a ``python:`` agent; an ``execute_tool`` span it
exported), and the trace the target made itself. ``with_wire`` merges them
so that no fact is counted twice (docs/decisions/0070-wire-in-traces.md):

- when the wire saw model calls, tool calls, asks, tokens, steps and the
  served model are the wire's — observed where the model answered;
- a call the agent recorded itself (``tools.call``, a span) that the wire
  also saw — the same call id, else the same name and arguments, in order —
  is not added again; one the wire did not see (a tool the agent ran
  without any model asking) is added, with its result;
- tokens the agent reported of itself (``tools.usage``, inferred) give way
  to the wire's (observed); a figure the wire could not give stays the
  agent's, or unavailable;
- a span's run of a tool named in ``ask_tools`` is an ask (and its result
  the answer), as the wire reads the model's call of it: the same ask, by
  call id or question, is one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from ...model import Event, Evidence, Trace
from ..base import ASK_TOOLS
from .fold import WireFacts, question

#: The facts the wire speaks to, when it saw model calls.
WIRE_FACTS = ("tool_calls", "asks", "tokens", "cost", "steps")
#: The events that are a call (a tool's, or an ask), and those that answer one.
_CALLS = ("tool_call", "ask")
_RESULTS = ("tool_result", "answer")


def with_wire(trace: Trace, facts: WireFacts | None,
              spans: Iterable[dict[str, Any]] = (),
              ask_tools: Collection[str] = ASK_TOOLS) -> Trace:
    """``trace`` with the wire's facts and the tools the spans say were run, merged."""
    span_events = _spanned(spans, ask_tools)
    if facts is None or not facts.model_calls:
        # No model call seen: only the notes of other exchanges (``http`` events: the
        # agent fetched a page, called a service) and the tools the spans say were run.
        notes = [e for e in facts.events if e.kind == "http"] if facts is not None else []
        if not span_events and not notes:
            return trace
        return trace.model_copy(update={"events": [*_merged(trace.events, span_events),
                                                   *notes]})
    own = _merged(facts.events, trace.events)  # what only the agent recorded, kept
    events = _merged(own, span_events)
    update: dict[str, Any] = {"events": events, "steps": facts.steps}
    usage = trace.usage
    if facts.usage.tokens is not None or usage.tokens is None:
        usage = usage.model_copy(update={"input_tokens": facts.usage.input_tokens,
                                         "output_tokens": facts.usage.output_tokens})
    if facts.usage.cost_usd is not None or usage.cost_usd is None:
        usage = usage.model_copy(update={"cost_usd": facts.usage.cost_usd})
    update["usage"] = usage
    evidence = dict(trace.evidence)
    for fact in WIRE_FACTS:
        if fact in facts.evidence:
            evidence[fact] = facts.evidence[fact]
    update["evidence"] = evidence
    if facts.model:
        update["facets"] = {**trace.facets, "model": facts.model}
    return trace.model_copy(update=update)


def _spanned(records: Iterable[dict[str, Any]], ask_tools: Collection[str]) -> list[Event]:
    """The spans' tool events; a run of an ask tool as an ask and its answer."""
    events = []
    for record in records:
        event = Event(**record)
        if event.name is not None and event.name in ask_tools:
            if event.kind == "tool_call":
                event = Event(kind="ask", name=event.name, call_id=event.call_id,
                              text=question(event.arguments), t=event.t)
            elif event.kind == "tool_result":
                event = event.model_copy(update={"kind": "answer"})
        events.append(event)
    return events


def _twins(a: Event, b: Event) -> bool:
    """The same call, told by two observers with no call id in common: the same tool with
    the same arguments, or the same ask with the same question."""
    if a.kind != b.kind or a.name != b.name:
        return False
    return a.text == b.text if a.kind == "ask" else a.arguments == b.arguments


def _merged(first: Sequence[Event], more: Sequence[Event]) -> list[Event]:
    """``first``, then the calls of ``more`` (with their results) that ``first`` has not.

    A call — a tool call or an ask — in both is one call: the same
    ``call_id``, else the same name and arguments (an ask: the same
    question), each of ``first``'s calls matched at most once, in order.
    When ``first`` says such a call was never answered (the wire saw no
    result go back to the model) and ``more`` saw it run, the run's result
    stands in for that note: the tool did run. Events of ``more`` that are
    neither calls nor their results (messages) are left out when ``first``
    holds any: ``first`` is the fuller record.
    """
    if not more:
        return list(first)
    if not first:
        return list(more)
    merged = list(first)
    ids = {e.call_id for e in first if e.kind in _CALLS and e.call_id is not None}
    unmatched = [e for e in first if e.kind in _CALLS]
    twin_of: dict[str | None, str | None] = {}  # a call id of ``more`` → its twin's id
    last: tuple[bool, str | None] = (False, None)  # (added?, twin id) of the call just seen
    added: list[Event] = []
    for event in more:
        if event.kind in _CALLS:
            twin = None if event.call_id in ids else next(
                (e for e in unmatched if _twins(e, event)), None)
            if twin is not None:
                unmatched.remove(twin)
            same = event.call_id if event.call_id in ids else twin.call_id if twin else None
            last = (event.call_id not in ids and twin is None, same)
            if event.call_id is not None:
                twin_of[event.call_id] = None if last[0] else same
            if last[0]:
                added.append(event)
        elif event.kind in _RESULTS:
            if event.call_id is not None and event.call_id in twin_of:
                keep, same = twin_of[event.call_id] is None, twin_of[event.call_id]
            else:
                keep, same = last
            if keep:
                added.append(event)
            elif same is not None:
                _answered(merged, same, event)
    return [*merged, *added]


def _answered(events: list[Event], call_id: str, result: Event) -> None:
    """Put ``result`` in place of the never-answered note of call ``call_id``, if any."""
    from .fold import NEVER_ANSWERED

    for index, event in enumerate(events):
        if event.kind == "error" and event.call_id == call_id and event.text == NEVER_ANSWERED:
            events[index] = result.model_copy(update={"call_id": call_id})
            return


def evidence_claim(observed: Evidence = Evidence.OBSERVED) -> dict[str, Evidence]:
    """What an observer of the wire can vouch for: the model's side of every fact it reads
    (cost comes from a price table, so it is inferred)."""
    return {"tool_calls": observed, "asks": observed, "tokens": observed, "steps": observed,
            "cost": Evidence.INFERRED}

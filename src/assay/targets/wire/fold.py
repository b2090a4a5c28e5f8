"""A trial's model exchanges folded into the facts of its trace (SPEC §15).

Exchanges are taken in the order they began (``Exchange.started``; a tie
keeps the order given). For each model call, the events are, in order:

1. the tool results its request carried that no earlier request did — a
   ``tool_result`` (an ``answer`` for an ask tool) with the call's id and
   tool name, the content as the agent sent it, ``is_error`` as the agent
   flagged it;
2. the model's text, as a ``message``;
3. each tool call it asked for, as a ``tool_call`` (an ``ask`` for a tool
   named in ``ask_tools``).

A request resends the whole conversation, so a result is new when its
call id (with how many times that id came before in the same request: a
model may reuse ids across turns) was not seen in an earlier request;
Gemini sends no ids, so its results are told apart by tool name, content
and order. A result without an id answers the oldest unanswered call of
its tool, and takes that call's id; a call without an id gets one,
``wire-N``, so that grading pairs them exactly as the fold did.

At the end, a tool call (or ask) no request ever answered — the
conversation ended after it, or the agent did not run it — gets an
``error`` event with its id saying so, which grading reads as a call not
run (``denied``; checks/arguments.calls_of). Not when a later request could
not be read: it may have carried the answer.

A model API that answered an error status, or no answer at all, is a
``http`` event (no step, no tokens). A model call whose response could not
be read to its end, or whose request could not be read, is a step with a
``http`` event saying what was not read, and makes unavailable the facts
it would have given — tool calls and asks (calls it asked for, results it
carried), tokens (and cost) when its usage did not arrive. An exchange
that is no model API's is a ``http`` event and gives no fact. No more than
``MAX_HTTP_EVENTS`` such events are kept; one more counts the rest.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict, deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...model import Event, Usage
from ...model.evidence import Evidence
from ...model.values import one_line
from ..base import ASK_TOOLS
from ..prices import SHIPPED, PriceTable
from .calls import ModelCall, ToolCall, ToolResult
from .exchange import Exchange
from .read import MAX_NOTE, read_exchange, safe_url

#: The most ``http`` events one trial keeps (each is one line); the rest are counted.
MAX_HTTP_EVENTS = 100

#: What the ``error`` event of a call never answered says (grading quotes it as the denial).
NEVER_ANSWERED = "the agent sent no result for this call back to the model"

#: The text of a tool call whose arguments were not JSON (they are kept as the text sent).
NOT_JSON = "its arguments are not JSON: kept as the text the model sent"

#: What the ``model`` facet joins several served models with.
MODEL_SEPARATOR = ", "


@dataclass(frozen=True)
class WireFacts:
    """What a trial's model exchanges say, with the evidence for each fact they speak to.

    ``events`` are in order (see the module's docstring). ``usage`` holds
    tokens summed over the model calls that answered, with the price table's
    cost — each None when not every such call reported it (never a partial
    sum). ``steps`` counts the model calls that answered (a 2xx status).
    ``model`` is the served model (the requested one when the answer did
    not say), several joined by ``MODEL_SEPARATOR`` in first-seen order.
    ``evidence`` covers ``tool_calls``, ``asks``, ``tokens``, ``cost`` and
    ``steps``. ``model_calls`` are every model exchange read, answered or
    not (none: the agent made no model call that was seen, and the facts
    above say only that). ``text`` is the last answered call's text.
    """

    events: list[Event]
    usage: Usage
    steps: int
    model: str | None
    evidence: dict[str, Evidence]
    model_calls: tuple[ModelCall, ...] = ()
    text: str | None = None


def read_exchanges(exchanges: Sequence[Exchange], *,
                   ask_tools: Collection[str] = ASK_TOOLS,
                   prices: PriceTable | None = None) -> WireFacts:
    """The facts of a trial's model exchanges; never raises.

    ``prices`` is the table cost is read from (the shipped one when None;
    a target passes ``load_prices()`` once, so the user's own prices count).
    """
    asks = frozenset((ask_tools,) if isinstance(ask_tools, str) else ask_tools)
    fold = _Fold(asks, prices if prices is not None else PriceTable(SHIPPED))
    ordered = sorted(exchanges, key=lambda e: _start(e.started))
    for exchange in ordered:
        try:
            fold.add(exchange)
        except Exception as exc:  # noqa: BLE001 - a value no event can hold (nested past the
            # stack, say) costs what that exchange would have given, never the trial
            fold.unread = True
            fold.counted = False
            fold.unsure = len(fold.pending)
            fold._note(Event(kind="http", text=one_line(
                f"{exchange.method} {safe_url(exchange.url)}: assay could not read it "
                f"({type(exc).__name__})", MAX_NOTE), t=round(_start(exchange.started), 6)))
    return fold.facts()


@dataclass
class _Pending:
    """A tool call (or ask) asked for, and whether a request has answered it yet."""

    call_id: str
    name: str
    ask: bool
    answered: bool = False


@dataclass
class _Fold:
    ask_tools: frozenset[str]
    prices: PriceTable
    events: list[Event] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    by_id: defaultdict[str, deque[int]] = field(default_factory=lambda: defaultdict(deque))
    by_name: defaultdict[str, deque[int]] = field(default_factory=lambda: defaultdict(deque))
    seen: set[tuple[Any, ...]] = field(default_factory=set)
    #: Calls asked for before the last request that could not be read: it may have answered them.
    unsure: int = 0
    #: A model call was not read whole: its tool calls (or the results it carried) are unknown.
    unread: bool = False
    steps: int = 0
    counted: bool = True
    priced: bool = True
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    models: dict[str, None] = field(default_factory=dict)
    text: str | None = None
    notes: int = 0
    unshown: int = 0
    last: float = 0.0
    minted: int = 0

    def add(self, exchange: Exchange) -> None:
        call = read_exchange(exchange)
        start = _start(exchange.started)
        self.last = max(self.last, start + _start(exchange.duration_s))
        if call is None:
            self._note(_other(exchange, start))
            return
        self.calls.append(call)
        if call.request_read:
            self._results(call)
        else:
            self.unsure = len(self.pending)
            self.unread = True
        if call.answered:
            self._answered(call)
        if call.problem is not None:
            self._note(_http(call))

    def _answered(self, call: ModelCall) -> None:
        self.steps += 1
        if not call.whole:
            self.unread = True
        model = call.served_model or call.requested_model
        if model:
            self.models.setdefault(model)
        tokens_in, tokens_out = call.input_tokens, call.output_tokens
        if tokens_in is not None and tokens_out is not None:
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out
            price = self.prices.lookup(call.served_model, call.requested_model)
            if price is None:
                self.priced = False
            else:
                self.cost += price.cost(tokens_in, tokens_out)
        else:
            self.counted = False
        t = round(call.ended, 6)
        self.text = call.text
        if call.text:
            self.events.append(Event(kind="message", text=call.text, t=t))
        for asked in call.tool_calls:
            self._call(asked, t)

    def _call(self, asked: ToolCall, t: float) -> None:
        call_id = asked.call_id
        if call_id is None:
            self.minted += 1
            call_id = f"wire-{self.minted}"
        ask = asked.name in self.ask_tools
        index = len(self.pending)
        self.pending.append(_Pending(call_id, asked.name, ask))
        self.by_id[call_id].append(index)
        self.by_name[asked.name].append(index)
        if ask:
            self.events.append(Event(kind="ask", name=asked.name, text=_question(asked),
                                     call_id=call_id, t=t))
        else:
            self.events.append(Event(kind="tool_call", name=asked.name, arguments=asked.arguments,
                                     call_id=call_id, text=None if asked.parsed else NOT_JSON,
                                     t=t))

    def _results(self, call: ModelCall) -> None:
        recalled = {c.call_id: c.name for c in call.history if c.call_id is not None}
        times: Counter[tuple[Any, ...]] = Counter()
        t = round(call.started, 6)
        for result in call.tool_results:
            key: tuple[Any, ...] = ("id", result.call_id) if result.call_id is not None else \
                ("name", result.name, _digest(result.result), result.is_error)
            times[key] += 1
            if (*key, times[key]) in self.seen:
                continue
            self.seen.add((*key, times[key]))
            pending = self._answer(result)
            name = (pending.name if pending is not None else None) or result.name or \
                (recalled.get(result.call_id) if result.call_id is not None else None)
            ask = pending.ask if pending is not None else name in self.ask_tools
            self.events.append(Event(
                kind="answer" if ask else "tool_result", name=name,
                call_id=pending.call_id if pending is not None else result.call_id,
                result=result.result, is_error=result.is_error, t=t))

    def _answer(self, result: ToolResult) -> _Pending | None:
        """The call ``result`` answers (by id, else the oldest unanswered of its tool)."""
        if result.call_id is not None:
            queue = self.by_id.get(result.call_id)
        else:
            queue = self.by_name.get(result.name or "")
        while queue:
            pending = self.pending[queue.popleft()]
            if not pending.answered:
                pending.answered = True
                return pending
        return None

    def _note(self, event: Event) -> None:
        if self.notes < MAX_HTTP_EVENTS:
            self.notes += 1
            self.events.append(event)
        else:
            self.unshown += 1

    def facts(self) -> WireFacts:
        t = round(self.last, 6)
        for index, pending in enumerate(self.pending):
            if not pending.answered and index >= self.unsure:
                self.events.append(Event(kind="error", name=pending.name,
                                         call_id=pending.call_id, text=NEVER_ANSWERED, t=t))
        if self.unshown:
            self.events.append(Event(kind="http", text=f"{self.unshown} more exchanges are not "
                                                       "shown", t=t))
        seen = Evidence.UNAVAILABLE if self.unread else Evidence.OBSERVED
        counted, priced = self.counted, self.counted and self.priced
        usage = Usage(input_tokens=self.tokens_in if counted else None,
                      output_tokens=self.tokens_out if counted else None,
                      cost_usd=self.cost if priced else None)
        evidence = {
            "tool_calls": seen, "asks": seen, "steps": Evidence.OBSERVED,
            "tokens": Evidence.OBSERVED if counted else Evidence.UNAVAILABLE,
            "cost": Evidence.INFERRED if priced else Evidence.UNAVAILABLE,
        }
        model = MODEL_SEPARATOR.join(self.models) or None
        return WireFacts(events=self.events, usage=usage, steps=self.steps, model=model,
                         evidence=evidence, model_calls=tuple(self.calls), text=self.text)


def _question(asked: ToolCall) -> str:
    return question(asked.arguments)


def question(arguments: Any) -> str:
    """An ask's question: its ``question`` argument, its one text argument, else its arguments."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        if isinstance(arguments.get("question"), str):
            return str(arguments["question"])
        if len(arguments) == 1:
            (only,) = arguments.values()
            if isinstance(only, str):
                return only
    return _json(arguments)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return str(type(value).__name__)


def _digest(value: Any) -> str:
    # Results told apart by content: equal JSON, equal key (a value too deep for the
    # encoder is one key: such results are told apart by order alone).
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return "(unreadable)"


def _http(call: ModelCall) -> Event:
    """The one-line note of a model exchange that failed, or was not all read."""
    status = "no answer" if call.status is None else str(call.status)
    text = one_line(f"{call.method} {call.url} → {status}: {call.problem}", MAX_NOTE)
    failed = call.status is None or call.status >= 400
    return Event(kind="http", name=call.api, text=text, is_error=failed,
                 result={"method": call.method, "url": call.url, "status": call.status},
                 t=round(call.started, 6))


def _other(exchange: Exchange, start: float) -> Event:
    """The one-line note of an exchange that is no model API's."""
    method = one_line(str(exchange.method), 16)
    url = safe_url(exchange.url, opaque_path=True)
    if exchange.status is None:
        status = "no answer" + (f": {one_line(exchange.error, 120)}" if exchange.error else "")
    else:
        status = str(exchange.status)
    text = one_line(f"{method} {url} → {status} (not a model API's exchange)", MAX_NOTE)
    failed = exchange.status is None or exchange.status >= 400
    return Event(kind="http", text=text, is_error=failed,
                 result={"method": method, "url": url, "status": exchange.status},
                 t=round(start, 6))


def _start(value: Any) -> float:
    """Seconds as a finite float (an observer's clock is trusted, not its arithmetic)."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0

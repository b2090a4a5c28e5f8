"""A conversation's turns as a trace holds them (SPEC §16), for the surfaces that show one.

A conversation trial's events run turn by turn: a ``user`` event opens turn
N (the user's message, in ``text``), the agent's own events follow (its
messages, tool calls and results, questions to a person) and a ``reply``
event closes the turn (the agent's answer, in ``result``). Every event
carries its turn; one a target left unnumbered (a turn the agent never
answered: a refusal, the step limit, a timeout) belongs to the turn it
follows, so what happened before the trial stopped is shown where it
happened.

``turns_of`` groups the events for a page that shows them all (the
workbench's chat view, the review screen); ``summary`` is what the report
keeps of each turn: the user's message, the tools called and the reply,
each text cut at ``TURN_CHARS`` (the trace has all of it). A trace without
``user`` or ``reply`` events is not a conversation: no turns, no summary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .trace import Event, Trace

#: Characters of a message the report keeps (a turn's user message, its reply).
TURN_CHARS = 1000
#: The event kinds that make a trace a conversation.
TURN_KINDS = frozenset({"user", "reply"})
#: The events a turn's summary names as calls: tool calls and questions to a person.
CALL_KINDS = frozenset({"tool_call", "ask"})


@dataclass
class Turn:
    """One turn's events, in order: the user's message, the agent's work, its reply."""

    n: int
    events: list[Event] = field(default_factory=list)

    @property
    def user(self) -> Event | None:
        """The ``user`` event that opened the turn (None: the trace holds none)."""
        return next((e for e in self.events if e.kind == "user"), None)

    @property
    def reply(self) -> Event | None:
        """The ``reply`` event that closed the turn (None: the agent never answered it)."""
        return next((e for e in self.events if e.kind == "reply"), None)


def is_conversation(events: Sequence[Event]) -> bool:
    """Whether the events are a conversation's: some are a user's message or a reply."""
    return any(event.kind in TURN_KINDS for event in events)


def turns_of(events: Sequence[Event]) -> list[Turn]:
    """The events grouped by turn, in order; empty when they are not a conversation's.

    A ``user`` event opens a turn, and so does an event numbered otherwise
    than the turn before it; an unnumbered event stays in the turn it
    follows (events before the first turn join it).
    """
    if not is_conversation(events):
        return []
    turns: list[Turn] = []
    for event in events:
        current = turns[-1] if turns else None
        number = event.turn
        opens = current is None or (number is not None and number != current.n) or (
            event.kind == "user" and (current.user is not None or current.reply is not None))
        if opens:
            if number is None:
                number = 1 if current is None else current.n + 1
            turns.append(Turn(number))
        turns[-1].events.append(event)
    return turns


def said(value: Any) -> str:
    """A reply as the user read it: text as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def cut(text: str, limit: int = TURN_CHARS) -> str:
    """``text`` up to ``limit`` characters, then how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


class TurnSummary(BaseModel):
    """What the report keeps of one turn of a conversation trial.

    ``user`` is the user's message, ``reply`` the agent's answer as the user
    read it (a value that is not text as compact JSON), each cut at
    ``TURN_CHARS``; ``reply`` is None when the agent never answered the
    turn. ``calls`` names the tools the agent called in the turn, in order
    (questions to a person among them).
    """

    model_config = ConfigDict(extra="forbid")

    turn: int
    user: str | None = None
    calls: list[str] = Field(default_factory=list)
    reply: str | None = None


def summary(trace: Trace | None) -> list[TurnSummary] | None:
    """The report's summary of a trial's turns; None when the trial is not a conversation."""
    if trace is None:
        return None
    turns = turns_of(trace.events)
    if not turns:
        return None
    return [_summarised(turn) for turn in turns]


def _summarised(turn: Turn) -> TurnSummary:
    user, reply = turn.user, turn.reply
    return TurnSummary(
        turn=turn.n,
        user=None if user is None or user.text is None else cut(user.text),
        calls=[e.name or "?" for e in turn.events if e.kind in CALL_KINDS],
        reply=None if reply is None else cut(said(reply.result)))

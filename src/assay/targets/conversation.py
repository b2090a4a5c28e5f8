"""A trial that is a conversation (SPEC §16): the user's side, and the turns as recorded.

A target that holds a conversation runs the same loop whatever the user is:
ask the user for a message, hand it to the agent, take the agent's reply,
ask the user again, until the user has nothing more to say (its scripted
turns are spent, or the simulated user said ``###STOP###``), the agent ends
it (its reply says ``###STOP###``, or it refused), or the simulated user's
``max_turns`` ran out (the conversation did not settle).

``User`` is the user's side: scripted turns here, a simulated user in
``judging`` (a model of the harness, built by the engine). ``Talk`` keeps
the turns of one trial: the history the user reads, the ``user`` and
``reply`` events, and the turn number every event of the turn carries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..model import Event
from ..model.conversation import STOP
from .base import TrialRequest

#: What a turn of the history is: ``{"role": "user" | "assistant", "content": text}``.
Turn = dict[str, str]


class User(Protocol):
    """The user's side of one trial's conversation."""

    async def say(self, history: Sequence[Turn]) -> str | None:
        """The next message, given the conversation so far; None: the user is done."""

    @property
    def cut(self) -> bool:
        """Whether the user stopped only because its ``max_turns`` ran out."""


class ScriptedUser:
    """A case's ``turns``, one after each reply."""

    def __init__(self, turns: Sequence[str]) -> None:
        self.turns = list(turns)

    async def say(self, history: Sequence[Turn]) -> str | None:
        said = sum(1 for turn in history if turn["role"] == "user")
        return self.turns[said] if said < len(self.turns) else None

    @property
    def cut(self) -> bool:
        return False


def reply_text(value: Any) -> str:
    """A reply as the user reads it: text as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class Talk:
    """The turns of one trial, as the target goes through them.

    ``system`` is the case's ``input`` in a conversation: the agent's system
    message, which the user never reads.
    """

    def __init__(self, user: User, system: str | None = None) -> None:
        self.user = user
        self.system = system
        self.turn = 0
        #: What the user reads: its messages and the agent's replies, in order.
        self.history: list[Turn] = []
        #: The agent said it is done (``###STOP###`` in its reply).
        self.ended_by_agent = False

    async def next(self) -> str | None:
        """The user's next message (the turn it opens is ``self.turn`` after), or None
        when the conversation is over."""
        if self.ended_by_agent:
            return None
        said = await self.user.say(self.history)
        if said is None:
            return None
        self.turn += 1
        self.history.append({"role": "user", "content": said})
        return said

    def opened(self, t: float | None = None) -> Event:
        """The event of the message that opened the current turn (sent at ``t``)."""
        return Event(kind="user", text=self.history[-1]["content"], turn=self.turn, t=t)

    def replied(self, value: Any, t: float | None = None) -> Event:
        """The agent answered the current turn with ``value`` (at ``t``): its ``reply``."""
        text = reply_text(value)
        self.history.append({"role": "assistant", "content": text})
        if STOP in text:
            self.ended_by_agent = True
        return Event(kind="reply", result=value, turn=self.turn, t=t)

    def stamp(self, events: Sequence[Event], since: int) -> None:
        """Give the events from position ``since`` on the current turn, where none has one."""
        turn = self.turn
        for event in events[since:]:
            if event.turn is None:
                event.turn = turn

    @property
    def settled(self) -> bool:
        """Whether the conversation came to an end: False when ``max_turns`` cut it."""
        return not self.user.cut or self.ended_by_agent

    def messages(self) -> list[Turn]:
        """The conversation so far as chat messages: the system message first, if any."""
        head = [{"role": "system", "content": self.system}] if self.system else []
        return [*head, *self.history]


def conversation(request: TrialRequest) -> Talk | None:
    """The turns of this trial, if its case is a conversation: the engine's user (a
    simulated one), else the case's scripted turns; None for a single input."""
    case = request.case
    user = request.user
    if user is None and case.turns is not None:
        user = ScriptedUser(case.turns)
    if user is None:
        return None
    return Talk(user, case.input if isinstance(case.input, str) else None)


def by_turn(events: Sequence[Event]) -> list[Event]:
    """The events of a conversation in turn order: each turn's ``user`` event, then what
    happened in the turn, then its ``reply``.

    An event without a turn (one an observer of the wire or of spans added after the
    fact) is given the turn it happened in, by its time ``t``: the last turn opened at
    or before it (the first turn when it has no time or came before any). Within a
    turn, events keep the order they were given in.
    """
    opened = [(e.t, e.turn) for e in events if e.kind == "user" and e.turn is not None]
    if not opened:
        return list(events)
    first = opened[0][1]
    heads: dict[int, Event] = {}
    tails: dict[int, Event] = {}
    middle: dict[int, list[Event]] = {}
    for event in events:
        turn = event.turn
        if turn is None:
            turn = first
            if event.t is not None:
                for at, number in opened:
                    if at is not None and at <= event.t:
                        turn = number
            event = event.model_copy(update={"turn": turn})
        if event.kind == "user":
            heads[turn] = event
        elif event.kind == "reply":
            tails[turn] = event
        else:
            middle.setdefault(turn, []).append(event)
    ordered: list[Event] = []
    for turn in sorted({*heads, *tails, *middle}):
        if turn in heads:
            ordered.append(heads[turn])
        ordered.extend(middle.get(turn, ()))
        if turn in tails:
            ordered.append(tails[turn])
    return ordered

"""What one trial recorded (SPEC §1 "trace")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .changes import WorkspaceFacts
from .conversation import SimulatorUse
from .evidence import Evidence
from .restore import restored
from .storable import storable_json, storable_text

Status = Literal["ok", "error", "refused", "timeout"]
#: ``http``: an exchange with a model API (or another service) that assay kept as a one-line
#: note because it failed or could not be read (SPEC §15); no check reads it.
EventKind = Literal["message", "tool_call", "tool_result", "ask", "answer", "skill", "error",
                    "http", "user", "reply"]


class Event(BaseModel):
    """One thing the agent did or was told, in order."""

    model_config = ConfigDict(extra="forbid")

    kind: EventKind
    name: str | None = None
    arguments: Any = None
    result: Any = None
    text: str | None = None
    call_id: str | None = None
    is_error: bool = False
    t: float | None = None
    #: The turn of a conversation the event belongs to (SPEC §16), from 1; None outside
    #: a conversation. A ``user`` event is the user's message that opens the turn (its
    #: ``text``), a ``reply`` event the agent's answer that closes it (its ``result``).
    turn: int | None = Field(default=None, exclude_if=lambda value: value is None)

    # What an agent said or sent is made storable here, where every target's
    # events are made (model/storable.py).
    @field_validator("arguments", "result")
    @classmethod
    def _storable_value(cls, value: Any) -> Any:
        return storable_json(value)

    @field_validator("name", "text")
    @classmethod
    def _storable_text(cls, value: str | None) -> str | None:
        return value if value is None else storable_text(value)


class Usage(BaseModel):
    """Tokens and money a trial spent, as far as anybody reported them.

    ``None`` is "not reported", never 0 (SPEC §4: what nobody reported is
    unavailable, shown as such). Tokens and cost are separate facts, each with
    its own evidence in the trace's map: a host may report tokens and no money.
    """

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @property
    def tokens(self) -> int | None:
        """Input plus output tokens; None when neither was reported."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def add(self, other: Usage) -> Usage:
        """The sum of two usages; a figure neither reported stays unreported."""
        return Usage(
            input_tokens=_plus(self.input_tokens, other.input_tokens),
            output_tokens=_plus(self.output_tokens, other.output_tokens),
            cost_usd=_plus(self.cost_usd, other.cost_usd),
        )


def _plus(a: Any, b: Any) -> Any:
    if a is None:
        return b
    return a if b is None else a + b


class Trace(BaseModel):
    """The record of one trial: output, status, events, usage, steps, facets.

    ``evidence`` says, per kind of fact, how strongly the target that made
    this trace can vouch for it; grading reads it, so the verdict depends on
    the trace alone.
    """

    model_config = ConfigDict(extra="forbid")

    output: Any = None
    status: Status = "ok"
    error: str | None = None
    events: list[Event] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    steps: int | None = None
    settled: bool | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    stdout: str = ""
    facets: dict[str, str] = Field(default_factory=dict)
    evidence: dict[str, Evidence] = Field(default_factory=dict)
    #: True when the battery stopped the trial at its timeout: the trace holds
    #: what the target recorded up to then (docs/decisions/0003-folding.md).
    partial: bool = False
    #: What the agent left in its workspace (SPEC §14), collected by the engine after
    #: the trial; None when the case has no workspace.
    workspace: WorkspaceFacts | None = Field(default=None, exclude_if=lambda value: value is None)
    #: The tool fixture's state as the trial left it (SPEC §14); its evidence is the
    #: ``state`` fact (observed when the fixture has a state).
    state: Any = Field(default=None, exclude_if=lambda value: value is None)
    #: A conversation's simulated user (SPEC §16): its identity, calls, tokens and cost,
    #: the harness's and not the agent's (``usage``); None when the trial had none.
    simulator: SimulatorUse | None = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("output", "state")
    @classmethod
    def _storable_output(cls, value: Any) -> Any:
        return storable_json(value)

    @field_validator("error", "stdout")
    @classmethod
    def _storable_text(cls, value: str | None) -> str | None:
        return value if value is None else storable_text(value)

    @field_validator("facets")
    @classmethod
    def _storable_facets(cls, value: dict[str, str]) -> dict[str, str]:
        return {storable_text(k): storable_text(v) for k, v in value.items()}

    def evidence_for(self, fact: str) -> Evidence:
        """The evidence this trace carries for ``fact`` (unavailable if unstated).

        A usage figure nobody reported is unavailable whatever the map says.
        A trace recorded before tokens were a fact of their own has only
        ``cost`` in its map, which then spoke for both.
        """
        if fact == "tokens" and self.usage.tokens is None:
            return Evidence.UNAVAILABLE
        if fact == "cost" and self.usage.cost_usd is None:
            return Evidence.UNAVAILABLE
        if fact == "tokens" and "tokens" not in self.evidence:
            fact = "cost"
        return self.evidence.get(fact, Evidence.UNAVAILABLE)


def no_usage() -> Usage:
    """``Usage()``, nothing reported, made without validating (each trial starts with one)."""
    return restored(Usage, {"input_tokens": None, "output_tokens": None, "cost_usd": None},
                    set())


def message_event(text: str | None) -> Event:
    """``Event(kind="message", text=text)``, made without validating what the harness made."""
    return restored(Event, {
        "kind": "message", "name": None, "arguments": None, "result": None,
        "text": None if text is None else storable_text(text), "call_id": None,
        "is_error": False, "t": None, "turn": None}, {"kind", "text"})


def harness_trace(*, output: Any, status: Status, error: str | None, events: list[Event],
                  usage: Usage, steps: int | None, settled: bool | None, duration_s: float,
                  stdout: str, facets: dict[str, str], evidence: dict[str, Evidence],
                  state: Any) -> Trace:
    """``Trace(...)`` of these fields, made without pydantic's validation.

    For a target's hot path (the ``python:`` agent's trace, every trial): the
    values are the harness's own (events, usage and evidence made as models
    and enums already, the output checked for JSON), so all validation would
    do is what the field validators do, done here: the same values, the same
    fields given, the same JSON (``tests/model/test_harness_trace.py``).
    """
    return restored(Trace, {
        "output": storable_json(output), "status": status,
        "error": None if error is None else storable_text(error), "events": list(events),
        "usage": usage, "steps": steps, "settled": settled, "exit_code": None,
        "duration_s": duration_s, "stdout": storable_text(stdout),
        "facets": {storable_text(k): storable_text(v) for k, v in facets.items()},
        "evidence": dict(evidence), "partial": False, "workspace": None,
        "state": storable_json(state), "simulator": None,
    }, {"output", "status", "error", "events", "usage", "steps", "settled", "duration_s",
        "stdout", "facets", "evidence", "state"})

"""What one trial recorded (SPEC §1 "trace")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .evidence import Evidence
from .storable import storable_json, storable_text

Status = Literal["ok", "error", "refused", "timeout"]
EventKind = Literal["message", "tool_call", "tool_result", "ask", "answer", "skill", "error"]


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
    """Tokens and money a trial spent."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> Usage:
        """The sum of two usages."""
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


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

    @field_validator("output")
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
        """The evidence this trace carries for ``fact`` (unavailable if unstated)."""
        return self.evidence.get(fact, Evidence.UNAVAILABLE)

"""A case that is a conversation (SPEC §16): scripted turns, or a simulated user.

``turns`` are the user's messages, each sent after the agent's reply to the
one before. ``user`` is a person played by a model of the harness, like a
judge: it reads its private instructions and the conversation so far and
writes the next message, or ends the conversation with ``STOP``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: What a simulated user writes to end the conversation (tau-bench's word).
STOP = "###STOP###"
#: How many of the user's messages a simulated conversation has at most, unless the case
#: says: reaching it means the agent did not settle.
DEFAULT_MAX_TURNS = 10
#: The longest user message a case may script, and the longest instructions.
MAX_MESSAGE = 100_000

Message = Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE)]


def check_user_model(value: str) -> str:
    """``value`` if it names a simulated user's model (``openai:MODEL``); else ``ValueError``."""
    if not value.startswith("openai:") or not value.removeprefix("openai:").strip():
        raise ValueError(f"a simulated user's model is openai:MODEL (a model behind an "
                         f"OpenAI-compatible server, as judges use), not {value!r}")
    return value


class SimulatedUser(BaseModel):
    """``user: {instructions, model, max_turns, seed}`` of a case."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: Message
    #: ``openai:MODEL`` (the judges' client); None: the suite's ``user_model`` or
    #: ``--user-model``.
    model: str | None = Field(default=None, min_length=1)
    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=1000)
    seed: int | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return value if value is None else check_user_model(value)


class SimulatorUse(BaseModel):
    """What one trial's simulated user was and cost: the harness's, not the agent's.

    Kept in the trace (``Trace.simulator``), which the trial's ledger entry
    pins by digest; the report sums it apart from the agent's usage and the
    judges'. ``model`` is the ``openai:MODEL`` asked; ``template`` the digest
    of the versioned prompt and its sampling, ``instructions`` the digest of
    the case's instructions (never the text: a hidden case's are hidden),
    ``seed`` the one sent. ``calls`` were asked of the server in this run,
    ``cached`` served from the cache (they cost this run nothing). A token or
    cost figure is the sum over the calls that reported it; None when calls
    were asked and none did, never 0 for unknown.
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    template: str
    instructions: str
    seed: int | None = None
    calls: int = 0
    cached: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

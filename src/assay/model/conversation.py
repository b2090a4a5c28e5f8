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
        if value is not None and not value.startswith("openai:"):
            raise ValueError(f"a simulated user's model is openai:MODEL (a model behind an "
                             f"OpenAI-compatible server, as judges use), not {value!r}")
        return value

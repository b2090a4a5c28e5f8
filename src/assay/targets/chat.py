"""The chat-model side of a tool loop: what the model is told and how its reply is read.

Pure functions: the case input becomes the first messages, a tool fixture
becomes tool declarations in the OpenAI format, the suite's ``call:`` becomes
loop options, a server's reply becomes a ``Reply`` (what the loop reads of
it, which is also what the agent cache keeps), and the final text becomes the
output. ``openai.py`` does the talking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.fixture import ToolFixture

#: Model calls a trial may make before it is stopped unsettled.
DEFAULT_MAX_STEPS = 10

_ASK_PARAMETERS = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "What to ask the person"}},
    "required": ["question"],
}


@dataclass(frozen=True)
class LoopOptions:
    """What the suite's ``call:`` says about the loop: ``max_steps``, ``system``, sampling."""

    max_steps: int = DEFAULT_MAX_STEPS
    system: str | None = None
    temperature: float | None = None
    seed: int | None = None

    @classmethod
    def from_call(cls, call: dict[str, Any] | None) -> LoopOptions:
        """Read ``call:``; other keys (``tool`` for MCP targets) are not ours. ValueError if bad."""
        call = call or {}
        steps = call.get("max_steps", DEFAULT_MAX_STEPS)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"call.max_steps must be a whole number ≥ 1, not {steps!r}")
        system = call.get("system")
        if system is not None and not isinstance(system, str):
            raise ValueError("call.system must be a string")
        temperature = call.get("temperature")
        if temperature is not None and (
            not isinstance(temperature, int | float) or isinstance(temperature, bool)
        ):
            raise ValueError(f"call.temperature must be a number, not {temperature!r}")
        seed = call.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ValueError(f"call.seed must be a whole number, not {seed!r}")
        return cls(max_steps=steps, system=system,
                   temperature=None if temperature is None else float(temperature), seed=seed)

    def sampling(self) -> dict[str, Any]:
        """The request parameters these options set."""
        given = {"temperature": self.temperature, "seed": self.seed}
        return {k: v for k, v in given.items() if v is not None}


@dataclass(frozen=True)
class AskedCall:
    """One tool call as the model asked for it: ``arguments`` is the raw text it sent."""

    id: str | None
    name: str
    arguments: Any


@dataclass(frozen=True)
class Reply:
    """What the loop reads of one model reply.

    Read once from the SDK's object (``read_reply``) so that a reply served
    from the agent cache (``to_json``/``from_json``) goes through exactly the
    same code as one the server just sent. Token counts are None when the
    server did not give them as whole numbers.
    """

    model: str | None
    content: str | None
    refusal: str | None
    calls: tuple[AskedCall, ...]
    input_tokens: int | None
    output_tokens: int | None

    def to_json(self) -> dict[str, Any]:
        """The reply as JSON data (what the agent cache keeps)."""
        return {"model": self.model, "content": self.content, "refusal": self.refusal,
                "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                          for c in self.calls],
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        """The reply ``to_json`` wrote; ValueError when ``data`` is not of that form."""
        texts = [data.get(k) for k in ("model", "content", "refusal")]
        tokens = [data.get(k) for k in ("input_tokens", "output_tokens")]
        calls = data.get("calls")
        if (any(t is not None and not isinstance(t, str) for t in texts)
                or any(t is not None and not _whole(t) for t in tokens)
                or not isinstance(calls, list)):
            raise ValueError("not a kept reply")
        asked = []
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str) \
                    or not isinstance(call.get("id"), str | None) or "arguments" not in call:
                raise ValueError("not a kept reply")
            asked.append(AskedCall(call["id"], call["name"], call["arguments"]))
        return cls(texts[0], texts[1], texts[2], tuple(asked), tokens[0], tokens[1])


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_reply(reply: Any) -> Reply:
    """A ``Reply`` from the SDK's chat completion (which has ``choices``).

    Read leniently, as servers vary: a missing or empty text is None, a tool
    call without an id gets one from the loop, token counts that are not
    whole numbers are None (the trial's tokens are then unknown).
    """
    message = reply.choices[0].message
    calls = []
    for call in getattr(message, "tool_calls", None) or []:
        function = getattr(call, "function", None)
        call_id = getattr(call, "id", None)
        calls.append(AskedCall(str(call_id) if call_id else None,
                               str(getattr(function, "name", None) or ""),
                               getattr(function, "arguments", None)))
    usage = getattr(reply, "usage", None)
    tokens = [getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens")]
    tokens_in, tokens_out = (t if _whole(t) else None for t in tokens)
    return Reply(model=str(getattr(reply, "model", "") or "") or None,
                 content=getattr(message, "content", None) or None,
                 refusal=getattr(message, "refusal", None) or None,
                 calls=tuple(calls), input_tokens=tokens_in, output_tokens=tokens_out)


def first_messages(case_input: Any, system: str | None) -> list[dict[str, Any]]:
    """The conversation a trial starts with.

    A string is the user's message. A mapping with only ``messages`` is the
    conversation itself; one with ``prompt`` (and optionally ``system``) is a
    user message (and a system message). Any other value is sent as its JSON
    text. ``system`` (from ``call.system``) comes first unless the input
    brings its own.
    """
    if isinstance(case_input, dict) and set(case_input) == {"messages"} and isinstance(
        case_input["messages"], list
    ):
        messages = [dict(m) if isinstance(m, dict) else m for m in case_input["messages"]]
        if system and not (messages and isinstance(messages[0], dict)
                           and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": system})
        return messages
    if (isinstance(case_input, dict) and "prompt" in case_input
            and set(case_input) <= {"prompt", "system"}
            and all(isinstance(v, str) for v in case_input.values())):
        system = case_input.get("system", system)
        text = case_input["prompt"]
    elif isinstance(case_input, str):
        text = case_input
    else:
        text = json.dumps(case_input, ensure_ascii=False, separators=(",", ":"))
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": text}]


def ask_tools(fixture: ToolFixture | None) -> set[str]:
    """Tools that ask a person: one per key of the fixture's ``answers``."""
    return set(fixture.answers) if fixture is not None else set()


def tool_specs(fixture: ToolFixture | None) -> list[dict[str, Any]]:
    """The fixture's tools, and its ask tools, as OpenAI ``tools`` entries."""
    if fixture is None:
        return []
    specs = [tool_spec(t.name, t.description, t.parameters) for t in fixture.tools]
    declared = {t.name for t in fixture.tools}
    specs.extend(
        tool_spec(name, "Ask the person you are helping a question and wait for the answer",
              _ASK_PARAMETERS)
        for name in fixture.answers if name not in declared
    )
    return specs


def tool_spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI ``tools`` entry: a function with its JSON Schema parameters."""
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


def _reject(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def loads(text: str) -> Any:
    """``json.loads`` without NaN or Infinity: a trace must stay storable."""
    return json.loads(text, parse_constant=_reject)


def output_of(text: str | None) -> Any:
    """The final answer: a JSON object or array is decoded; any other text stays text."""
    if text is None:
        return None
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return loads(stripped)
        except ValueError:
            pass
    return text


def tool_content(result: Any) -> str:
    """A tool result as the text of a ``tool`` message: strings as they are, else JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def parse_arguments(raw: str | None) -> tuple[bool, Any]:
    """``(True, value)`` for JSON arguments (empty means ``{}``), else ``(False, why)``."""
    if raw is None or not raw.strip():
        return True, {}
    try:
        return True, loads(raw)
    except ValueError as exc:
        return False, f"arguments are not valid JSON ({exc})"

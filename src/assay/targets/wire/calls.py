"""What one model exchange says, whichever API it spoke: the values every reader makes.

Each API's reader (``chat_api``, ``responses_api``, ``messages_api``,
``gemini_api``) reads a request into :class:`Asked` and a response into
:class:`Answered`; ``read.read_exchange`` puts them together as a
:class:`ModelCall`, which the fold (``fold.read_exchanges``) turns into a
trace's events. The helpers below are the lenient JSON handling all of them
share: what an agent or a server sent is never trusted to have the shape
the API documents.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: The APIs read, by the name a model call carries.
CHAT = "openai.chat"
RESPONSES = "openai.responses"
MESSAGES = "anthropic.messages"
GEMINI = "gemini"

#: What a reader says of a stream that ended before its API's last event.
STOPPED = "the stream stopped before its end"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for.

    ``arguments`` is the parsed JSON the model sent (empty means ``{}``);
    when it was not JSON, ``parsed`` is False and ``arguments`` is the text
    as sent (or as much of it as arrived).
    """

    call_id: str | None
    name: str
    arguments: Any
    parsed: bool = True


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool result the agent sent back in a request.

    ``result`` is the content as the agent sent it, parsed when it is JSON
    text; ``is_error`` is the agent's own flag (Anthropic's ``is_error``,
    Gemini's ``error`` key), never a guess from the text.
    """

    call_id: str | None
    name: str | None
    result: Any
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request says: the model asked for, the results it carries, the calls it recalls."""

    model: str | None = None
    results: tuple[ToolResult, ...] = ()
    #: Tool calls named in the conversation the request sends back (the model's earlier
    #: turns): where a result's tool name is found when its call was not seen answered.
    history: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Answered:
    """What a response says; ``whole`` is False when it stopped before its end."""

    model: str | None = None
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    whole: bool = True
    #: Why it is not all there, or what went wrong inside it (a stream's error event).
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One exchange with a model API, read as far as it could be.

    ``answered`` is True when the model answered (a 2xx status): only then is
    it a step, with tokens. ``request_read`` is False when the request could
    not be read (so the tool results it carried are unknown); ``whole`` is
    False when the response could not be read to its end (cut, unreadable),
    so tool calls it may have asked for are unknown. ``problem`` says why, in
    a few words, whenever something was not read or the call failed.
    """

    api: str
    method: str
    url: str
    status: int | None
    started: float = 0.0
    ended: float = 0.0
    streamed: bool = False
    requested_model: str | None = None
    served_model: str | None = None
    tool_results: tuple[ToolResult, ...] = ()
    history: tuple[ToolCall, ...] = ()
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    request_read: bool = True
    whole: bool = True
    problem: str | None = None

    @property
    def answered(self) -> bool:
        """Whether the model answered at all (a 2xx status): a step, with tokens."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def counted(self) -> bool:
        """Whether the API reported this call's tokens, both input and output."""
        return self.input_tokens is not None and self.output_tokens is not None


# --- lenient JSON ------------------------------------------------------------------------


def _reject(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


#: One decoder for every body: ``json.loads`` with an option builds a new one per call,
#: and a trial's exchanges are parsed seven times or so.
_DECODER = json.JSONDecoder(parse_constant=_reject)


def loads(text: str | bytes) -> Any:
    """``json.loads`` without NaN or Infinity; ValueError for anything it cannot read.

    Nesting deeper than the interpreter's stack (``[`` ten thousand times)
    is a ValueError here too, not a RecursionError.
    """
    try:
        if isinstance(text, (bytes, bytearray)):  # as json.loads reads bytes
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        elif text.startswith("\ufeff"):
            raise ValueError("a byte order mark before JSON text")
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from None


def json_or_text(text: str) -> Any:
    """``text`` parsed when the whole of it is JSON, else the text itself."""
    try:
        return loads(text)
    except ValueError:
        return text


def arguments_of(raw: Any) -> tuple[Any, bool]:
    """Tool-call arguments as sent: ``(value, parsed)``.

    A JSON string is parsed (empty or missing means ``{}``, as every SDK
    reads it); an object a server sent already parsed is kept; a string
    that is not JSON is kept as it is, ``parsed`` False.
    """
    if raw is None:
        return {}, True
    if not isinstance(raw, str):
        return raw, True
    if not raw.strip():
        return {}, True
    try:
        return loads(raw), True
    except ValueError:
        return raw, False


def text_of(value: Any) -> str | None:
    """A string field's value, or None when it is missing or not a string."""
    return value if isinstance(value, str) else None


def count(value: Any) -> int | None:
    """A token count: a whole number ≥ 0 (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def content_value(content: Any) -> Any:
    """A tool result's content as the agent sent it, as one value.

    Text (a string, or a list of nothing but text parts, joined) is parsed
    when it is JSON; anything else (an object, parts with images) is kept
    as it came.
    """
    if isinstance(content, str):
        return json_or_text(content)
    if isinstance(content, list) and content and all(
        isinstance(part, dict) and part.get("type") in _TEXT_PARTS
        and isinstance(part.get("text"), str) for part in content
    ):
        return json_or_text("".join(part["text"] for part in content))
    return content


def joined(parts: list[str]) -> str | None:
    """Pieces of text as one, or None when there is none."""
    text = "".join(parts)
    return text or None

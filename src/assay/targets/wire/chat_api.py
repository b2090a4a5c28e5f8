"""OpenAI Chat Completions (``POST …/chat/completions``), as any OpenAI-compatible server speaks it.

Request: ``model``, ``messages``; the agent sends a tool's result back as a
``{"role": "tool", "tool_call_id", "content"}`` message (``"role":
"function"`` with a ``name`` in the deprecated form), after the assistant
message whose ``tool_calls`` asked for it.

Response: ``model``, ``choices[0].message`` (``content``, ``refusal``,
``tool_calls[] {id, function: {name, arguments}}``, the deprecated
``function_call``), ``finish_reason``, ``usage {prompt_tokens,
completion_tokens}``. Streamed (``stream: true``): ``chat.completion.chunk``
objects whose ``choices[0].delta`` carries pieces — text, and tool calls by
``index`` whose strings are joined as the SDK joins them — then
``data: [DONE]``. Usage comes in a last chunk with no choices only when the
request asked for it (``stream_options.include_usage``); without it the
call's tokens are unknown. Only the first choice is read (``n`` > 1 is not
how an agent talks to its model).
"""

from __future__ import annotations

from typing import Any

from .calls import (
    STOPPED,
    Answered,
    Asked,
    ToolCall,
    ToolResult,
    arguments_of,
    content_value,
    count,
    items,
    joined,
    loads,
    mapping,
    text_of,
)
from .sse import SseEvent


def shaped(request: dict[str, Any]) -> bool:
    """Whether a request body is a Chat Completions request."""
    return isinstance(request.get("messages"), list)


def read_request(request: dict[str, Any]) -> Asked:
    """The model asked for, the tool results sent back and the calls they answer."""
    results: list[ToolResult] = []
    history: list[ToolCall] = []
    for message in items(request.get("messages")):
        message = mapping(message)
        role = message.get("role")
        if role == "assistant":
            for call in items(message.get("tool_calls")):
                history.append(_call(mapping(call)))
            legacy = mapping(message.get("function_call"))
            if legacy:
                history.append(_function(None, legacy))
        elif role == "tool":
            results.append(ToolResult(text_of(message.get("tool_call_id")),
                                      text_of(message.get("name")),
                                      content_value(message.get("content"))))
        elif role == "function":
            results.append(ToolResult(None, text_of(message.get("name")),
                                      content_value(message.get("content"))))
    return Asked(text_of(request.get("model")), tuple(results), tuple(history))


def read_response(data: dict[str, Any]) -> Answered:
    """A whole (not streamed) chat completion."""
    if not isinstance(data.get("choices"), list):  # an error some servers send with a 200
        return Answered(whole=False, problem=_missing(data, "choices"))
    choice = _first_choice(data.get("choices"))
    message = mapping(choice.get("message"))
    calls = [_call(mapping(call)) for call in items(message.get("tool_calls"))]
    legacy = mapping(message.get("function_call"))
    if legacy:
        calls.append(_function(None, legacy))
    tokens_in, tokens_out = _usage(data.get("usage"))
    return Answered(model=text_of(data.get("model")) or None,
                    text=_said(message.get("content"), message.get("refusal")),
                    tool_calls=tuple(calls), input_tokens=tokens_in, output_tokens=tokens_out,
                    finish_reason=text_of(choice.get("finish_reason")))


def read_stream(events: list[SseEvent]) -> Answered:
    """A streamed chat completion: chunks joined as the SDK joins them."""
    model: str | None = None
    texts: list[str] = []
    refusals: list[str] = []
    #: Tool calls by their ``index``: id, name and arguments, each joined from pieces.
    calls: dict[Any, dict[str, str]] = {}
    legacy: dict[str, str] = {}
    finish: str | None = None
    usage: Any = None
    done = False
    problem: str | None = None
    for event in events:
        if not event.data.strip():
            continue
        if event.data.strip() == "[DONE]":
            done = True
            continue
        try:
            chunk = loads(event.data)
        except ValueError:
            problem = problem or "a chunk of the stream is not JSON"
            continue
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk and not chunk.get("choices"):
            problem = problem or _stream_error(chunk.get("error"))
            continue
        model = model or text_of(chunk.get("model")) or None
        if chunk.get("usage") is not None:
            usage = chunk.get("usage")
        choice = _first_choice(chunk.get("choices"), fallback=False)
        delta = mapping(choice.get("delta"))
        _append(texts, delta.get("content"))
        _append(refusals, delta.get("refusal"))
        for piece in items(delta.get("tool_calls")):
            _merge(calls, mapping(piece))
        for key, value in mapping(delta.get("function_call")).items():
            if isinstance(value, str):
                legacy[key] = legacy.get(key, "") + value
        finish = text_of(choice.get("finish_reason")) or finish
    asked = [_assembled(call) for call in calls.values()]
    if legacy:
        asked.append(_function(None, legacy))
    tokens_in, tokens_out = _usage(usage)
    whole = done or finish is not None
    return Answered(model=model, text=joined(texts) or joined(refusals), tool_calls=tuple(asked),
                    input_tokens=tokens_in, output_tokens=tokens_out, finish_reason=finish,
                    whole=whole and problem is None,
                    problem=problem or (None if whole else STOPPED))


def _first_choice(choices: Any, *, fallback: bool = True) -> dict[str, Any]:
    """The choice with index 0 (or no index); a whole answer's first choice otherwise."""
    listed = [mapping(c) for c in items(choices)]
    first = next((c for c in listed if c.get("index", 0) == 0), None)
    if first is None:
        return listed[0] if listed and fallback else {}
    return first


def _call(call: dict[str, Any]) -> ToolCall:
    return _function(text_of(call.get("id")) or None, mapping(call.get("function")))


def _function(call_id: str | None, function: dict[str, Any]) -> ToolCall:
    arguments, parsed = arguments_of(function.get("arguments"))
    return ToolCall(call_id, text_of(function.get("name")) or "", arguments, parsed)


def _merge(calls: dict[Any, dict[str, str]], piece: dict[str, Any]) -> None:
    """One streamed piece of a tool call into the call with its ``index``."""
    index = piece.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        # A server that leaves the index out sends each call whole: a new id is a new call.
        given = text_of(piece.get("id"))
        index = f"id:{given}" if given else (next(reversed(calls)) if calls else 0)
    call = calls.setdefault(index, {})
    function = mapping(piece.get("function"))
    for key, value in (("id", piece.get("id")), ("name", function.get("name")),
                       ("arguments", function.get("arguments"))):
        if isinstance(value, str):
            call[key] = call.get(key, "") + value
        elif value is not None and key == "arguments":  # a server that sends an object
            call[key] = value


def _assembled(call: dict[str, Any]) -> ToolCall:
    arguments, parsed = arguments_of(call.get("arguments"))
    return ToolCall(call.get("id") or None, call.get("name") or "", arguments, parsed)


def _append(texts: list[str], value: Any) -> None:
    if isinstance(value, str):
        texts.append(value)


def _said(content: Any, refusal: Any) -> str | None:
    if isinstance(content, list):  # some servers send parts
        content = "".join(text_of(mapping(part).get("text")) or "" for part in content)
    return text_of(content) or text_of(refusal) or None


def _usage(usage: Any) -> tuple[int | None, int | None]:
    usage = mapping(usage)
    return count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))


def _missing(data: dict[str, Any], key: str) -> str:
    """Why a 200 answer without its payload is not one: its error's message when it has one."""
    error = data.get("error")
    message = text_of(mapping(error).get("message")) or text_of(error)
    return f"the model reported an error: {message}" if message else \
        f"the answer has no {key}"


def _stream_error(error: Any) -> str:
    message = text_of(mapping(error).get("message")) or text_of(error)
    return f"the stream reported an error: {message}" if message else \
        "the stream reported an error"

"""Anthropic Messages (``POST …/v1/messages``), as the ``anthropic`` SDK and Claude Code speak it.

Request: ``model``, ``messages``; each message's ``content`` is a string or
blocks. The agent sends a tool's result back as a ``{"type":
"tool_result", "tool_use_id", "content", "is_error"}`` block in a user
message, after the assistant message whose ``tool_use`` block asked for it.

Response: a ``message`` — ``model``, ``content`` blocks (``text``,
``tool_use {id, name, input}``; ``thinking`` and the server's own tools'
blocks are not the agent's and are not read), ``stop_reason``, ``usage``.
Streamed: ``message_start`` (the message, its usage so far),
``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta`` pieces of a tool's input, joined) /
``content_block_stop``, ``message_delta`` (stop reason and the final usage,
its output tokens the whole count), ``message_stop``; ``ping`` and ``error``
may come between. A call's input tokens are ``input_tokens`` plus the
cache's ``cache_creation_input_tokens`` and ``cache_read_input_tokens``, as
the API documents its total; in a stream the count is known only once
``message_delta`` came (``message_start``'s output count is a placeholder).
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
    """Whether a request body is a Messages request."""
    return isinstance(request.get("messages"), list)


def read_request(request: dict[str, Any]) -> Asked:
    """The model asked for, the tool results sent back and the calls they answer."""
    results: list[ToolResult] = []
    history: list[ToolCall] = []
    for message in items(request.get("messages")):
        for block in items(mapping(message).get("content")):
            block = mapping(block)
            if block.get("type") == "tool_use":
                history.append(_call(block))
            elif block.get("type") == "tool_result":
                results.append(ToolResult(text_of(block.get("tool_use_id")), None,
                                          content_value(block.get("content")),
                                          is_error=block.get("is_error") is True))
    return Asked(text_of(request.get("model")), tuple(results), tuple(history))


def read_response(data: dict[str, Any]) -> Answered:
    """A whole (not streamed) message."""
    if not isinstance(data.get("content"), list):  # an error (``type: error``) with a 200
        return Answered(whole=False, problem=_error(data) if "error" in data else
                        "the answer has no content")
    texts, calls = _blocks(items(data.get("content")))
    tokens_in, tokens_out = _usage(mapping(data.get("usage")))
    return Answered(model=text_of(data.get("model")) or None, text=joined(texts),
                    tool_calls=tuple(calls), input_tokens=tokens_in, output_tokens=tokens_out,
                    finish_reason=text_of(data.get("stop_reason")))


def read_stream(events: list[SseEvent]) -> Answered:
    """A streamed message: its blocks assembled from the events."""
    model: str | None = None
    usage: dict[str, Any] = {}
    #: Content blocks by ``index``; a tool's input pieces are joined under "partial".
    blocks: dict[int, dict[str, Any]] = {}
    stop: str | None = None
    counted = ended = False
    problem: str | None = None
    for event in events:
        if not event.data.strip():
            continue
        try:
            data = loads(event.data)
        except ValueError:
            problem = problem or "an event of the stream is not JSON"
            continue
        if not isinstance(data, dict):
            continue
        kind = data.get("type") or event.event
        at = data.get("index")
        at = at if isinstance(at, int) and not isinstance(at, bool) else -1
        if kind == "message_start":
            message = mapping(data.get("message"))
            model = model or text_of(message.get("model")) or None
            usage.update(mapping(message.get("usage")))
        elif kind == "content_block_start":
            blocks[at] = dict(mapping(data.get("content_block")))
        elif kind == "content_block_delta":
            _delta(blocks.setdefault(at, {}), mapping(data.get("delta")))
        elif kind == "message_delta":
            stop = text_of(mapping(data.get("delta")).get("stop_reason")) or stop
            given = mapping(data.get("usage"))
            usage.update({k: v for k, v in given.items() if v is not None})
            counted = counted or "output_tokens" in given
            ended = ended or stop is not None
        elif kind == "message_stop":
            ended = True
        elif kind == "error":
            problem = problem or _error(data)
    for block in blocks.values():
        if block.get("type") == "tool_use" and "partial" in block:
            block["input"] = block.pop("partial")
    texts, calls = _blocks([blocks[at] for at in sorted(blocks)])
    tokens_in, tokens_out = _usage(usage) if counted else (None, None)
    whole = ended and problem is None
    return Answered(model=model, text=joined(texts), tool_calls=tuple(calls),
                    input_tokens=tokens_in, output_tokens=tokens_out, finish_reason=stop,
                    whole=whole,
                    problem=problem or (None if whole else STOPPED))


def _delta(block: dict[str, Any], delta: dict[str, Any]) -> None:
    kind = delta.get("type")
    if kind == "text_delta" and isinstance(delta.get("text"), str):
        block["text"] = (text_of(block.get("text")) or "") + delta["text"]
    elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        block["partial"] = (text_of(block.get("partial")) or "") + delta["partial_json"]


def _blocks(blocks: list[Any]) -> tuple[list[str], list[ToolCall]]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        block = mapping(block)
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(_call(block))
    return texts, calls


def _call(block: dict[str, Any]) -> ToolCall:
    raw = block.get("input")
    # Streamed input is JSON text joined from pieces; "" is a tool that takes nothing.
    arguments, parsed = arguments_of(raw)
    return ToolCall(text_of(block.get("id")) or None, text_of(block.get("name")) or "",
                    arguments, parsed)


def _usage(usage: dict[str, Any]) -> tuple[int | None, int | None]:
    tokens_in = count(usage.get("input_tokens"))
    if tokens_in is not None:
        tokens_in += sum(count(usage.get(key)) or 0 for key in
                         ("cache_creation_input_tokens", "cache_read_input_tokens"))
    return tokens_in, count(usage.get("output_tokens"))


def _error(data: dict[str, Any]) -> str:
    message = text_of(mapping(data.get("error")).get("message"))
    return f"the model reported an error: {message}" if message else \
        "the model reported an error"

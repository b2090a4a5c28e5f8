"""OpenAI Responses (``POST …/responses``), the OpenAI Agents SDK's default.

Request: ``model``, ``input`` (a string, or items); the agent sends a tool's
result back as a ``{"type": "function_call_output", "call_id", "output"}``
item (``custom_tool_call_output`` for a free-form tool), often after the
``function_call`` item it answers — or alone, when the conversation is kept
on the server (``previous_response_id``).

Response: a ``response`` object — ``model``, ``status``, ``output`` items
(``message`` with ``output_text`` / ``refusal`` parts, ``function_call``
``{call_id, name, arguments}``, ``custom_tool_call`` ``{call_id, name,
input}``), ``usage {input_tokens, output_tokens}``. Streamed: typed events
— ``response.created``, ``response.output_item.added``, text and argument
deltas (``response.output_text.delta``,
``response.function_call_arguments.delta`` / ``.done``),
``response.output_item.done``, then ``response.completed`` (or
``.incomplete`` / ``.failed``) carrying the whole response and its usage.
The items are assembled from the events, and the final response's own
``output`` is preferred when it has one. Items the server ran itself
(``web_search_call``, ``file_search_call``, ``reasoning`` …) are not the
agent's tool calls and are not read.
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

_ENDS = ("response.completed", "response.incomplete", "response.failed")


def shaped(request: dict[str, Any]) -> bool:
    """Whether a request body is a Responses request."""
    return any(key in request for key in ("input", "previous_response_id", "prompt",
                                          "conversation"))


def read_request(request: dict[str, Any]) -> Asked:
    """The model asked for, the tool results sent back and the calls they answer."""
    results: list[ToolResult] = []
    history: list[ToolCall] = []
    for item in items(request.get("input")):
        item = mapping(item)
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            history.append(_call(item))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            results.append(ToolResult(text_of(item.get("call_id")), None,
                                      content_value(item.get("output"))))
    return Asked(text_of(request.get("model")), tuple(results), tuple(history))


def read_response(data: dict[str, Any]) -> Answered:
    """A whole (not streamed) response object."""
    if not isinstance(data.get("output"), list):  # an error some servers send with a 200
        return Answered(whole=False, problem=_error(data) or "the answer has no output")
    return _answered(data, items(data.get("output")))


def read_stream(events: list[SseEvent]) -> Answered:
    """A streamed response: its items assembled from the events."""
    model: str | None = None
    #: Output items by ``output_index``, as far as they arrived.
    found: dict[int, dict[str, Any]] = {}
    texts: dict[int, list[str]] = {}
    final: dict[str, Any] | None = None
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
        response = mapping(data.get("response"))
        model = model or text_of(response.get("model")) or None
        at = data.get("output_index")
        at = at if isinstance(at, int) and not isinstance(at, bool) else -1
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = mapping(data.get("item"))
            if kind.endswith("done") or at not in found:
                found[at] = dict(item)
        elif kind == "response.function_call_arguments.delta":
            item = found.setdefault(at, {"type": "function_call"})
            delta = data.get("delta")
            if isinstance(delta, str):
                item["arguments"] = (text_of(item.get("arguments")) or "") + delta
        elif kind == "response.function_call_arguments.done":
            if isinstance(data.get("arguments"), str):
                found.setdefault(at, {"type": "function_call"})["arguments"] = data["arguments"]
        elif kind == "response.custom_tool_call_input.delta":
            item = found.setdefault(at, {"type": "custom_tool_call"})
            if isinstance(data.get("delta"), str):
                item["input"] = (text_of(item.get("input")) or "") + data["delta"]
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            if isinstance(data.get("delta"), str):
                texts.setdefault(at, []).append(data["delta"])
        elif kind in _ENDS:
            final = response
        elif kind == "error":
            problem = problem or _error(data) or "the stream reported an error"
    if final is None:
        # What arrived: the items the stream began, text from the deltas of unfinished ones.
        output = []
        for at in sorted(found):
            item = found[at]
            if item.get("type") == "message" and not item.get("content") and at in texts:
                item = {**item, "content": [{"type": "output_text", "text": "".join(texts[at])}]}
            output.append(item)
        answered = _answered({"model": model}, output)
        return Answered(model=answered.model, text=answered.text,
                        tool_calls=answered.tool_calls, whole=False,
                        problem=problem or STOPPED)
    output = items(final.get("output")) or [found[at] for at in sorted(found)]
    answered = _answered({**final, "model": final.get("model") or model}, output)
    if problem is not None:
        return Answered(answered.model, answered.text, answered.tool_calls,
                        answered.input_tokens, answered.output_tokens, answered.finish_reason,
                        whole=False, problem=problem)
    return answered


def _answered(data: dict[str, Any], output: list[Any]) -> Answered:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in output:
        item = mapping(item)
        kind = item.get("type")
        if kind == "message":
            for part in items(item.get("content")):
                part = mapping(part)
                said = text_of(part.get("text")) if part.get("type") == "output_text" else \
                    text_of(part.get("refusal")) if part.get("type") == "refusal" else None
                if said:
                    texts.append(said)
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(_call(item))
    usage = mapping(data.get("usage"))
    status = text_of(data.get("status"))
    reason = text_of(mapping(data.get("incomplete_details")).get("reason"))
    problem = None
    if status == "failed":
        problem = _error(data) or "the response failed"
    elif status in ("queued", "in_progress"):
        problem = f"the response is {status.replace('_', ' ')} (run in the background)"
    return Answered(model=text_of(data.get("model")) or None, text=joined(texts),
                    tool_calls=tuple(calls), input_tokens=count(usage.get("input_tokens")),
                    output_tokens=count(usage.get("output_tokens")),
                    finish_reason=reason or status, whole=problem is None, problem=problem)


def _call(item: dict[str, Any]) -> ToolCall:
    call_id = text_of(item.get("call_id")) or None
    name = text_of(item.get("name")) or ""
    if item.get("type") == "custom_tool_call":  # free-form text is what such a tool takes
        return ToolCall(call_id, name, text_of(item.get("input")) or "")
    arguments, parsed = arguments_of(item.get("arguments"))
    return ToolCall(call_id, name, arguments, parsed)


def _error(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    message = text_of(mapping(error).get("message")) or text_of(data.get("message"))
    return f"the model reported an error: {message}" if message else None

"""Gemini ``generateContent`` (``POST …/models/MODEL:generateContent``), and its stream.

The model is named in the path; the request's ``contents`` are turns of
``parts``. The model asks for a tool with a ``functionCall {name, args,
id?}`` part; the agent sends its result back as a ``functionResponse
{name, response, id?}`` part. The Gemini API gives no call ids (Vertex AI
may): a result without one is matched to its call by name and order, as
the fold does. A ``response`` that holds an ``error`` key and no ``output``
is an error result, the convention the API documents.

Response: ``candidates[0].content.parts`` (``text`` — not the ``thought``
parts — and ``functionCall``), ``finishReason``, ``usageMetadata``,
``modelVersion``. Streamed (``:streamGenerateContent?alt=sse``): each event
is such a response, its text a continuation, its function calls whole,
``usageMetadata`` the running total (the last one counts); without
``alt=sse`` the stream is one JSON array of them. Proto3 JSON leaves out a
count that is 0, so within a ``usageMetadata`` a missing count is 0. Input
tokens are the prompt's plus ``toolUsePromptTokenCount``; output tokens the
candidates' plus ``thoughtsTokenCount`` (thinking is billed as output),
which adds up to the API's ``totalTokenCount``. The REST API writes camelCase
and accepts snake_case: both are read.
"""

from __future__ import annotations

from typing import Any

from .calls import (
    STOPPED,
    Answered,
    Asked,
    ToolCall,
    ToolResult,
    count,
    items,
    joined,
    loads,
    mapping,
    text_of,
)
from .sse import SseEvent


def shaped(request: dict[str, Any]) -> bool:
    """Whether a request body is a generateContent request."""
    return isinstance(request.get("contents"), list)


def read_request(request: dict[str, Any], model: str | None) -> Asked:
    """The tool results sent back, and the calls they answer (the model is the path's)."""
    results: list[ToolResult] = []
    history: list[ToolCall] = []
    for content in items(request.get("contents")):
        for part in items(mapping(content).get("parts")):
            part = mapping(part)
            call = _get(part, "functionCall", "function_call")
            answer = _get(part, "functionResponse", "function_response")
            if call is not None:
                history.append(_call(mapping(call)))
            if answer is not None:
                answer = mapping(answer)
                response = answer.get("response")
                given = mapping(response)
                failed = "error" in given and "output" not in given
                results.append(ToolResult(text_of(answer.get("id")) or None,
                                          text_of(answer.get("name")), response,
                                          is_error=failed))
    return Asked(model, tuple(results), tuple(history))


def read_response(data: Any) -> Answered:
    """A whole response, or a stream sent as one JSON array of responses."""
    chunks = [mapping(chunk) for chunk in (data if isinstance(data, list) else [data])]
    if not any(key in chunk for chunk in chunks for key in
               ("candidates", "promptFeedback", "prompt_feedback", "error")):
        return Answered(whole=False, problem="the answer has no candidates")
    return _chunks(chunks, streamed=isinstance(data, list))


def read_stream(events: list[SseEvent]) -> Answered:
    """A streamed response (``alt=sse``): one response per event."""
    chunks: list[dict[str, Any]] = []
    problem: str | None = None
    for event in events:
        if not event.data.strip():
            continue
        try:
            chunk = loads(event.data)
        except ValueError:
            problem = problem or "an event of the stream is not JSON"
            continue
        if isinstance(chunk, dict):
            chunks.append(chunk)
    answered = _chunks(chunks, streamed=True)
    if problem is None:
        return answered
    return Answered(answered.model, answered.text, answered.tool_calls, answered.input_tokens,
                    answered.output_tokens, answered.finish_reason, whole=False,
                    problem=problem)


def _chunks(chunks: list[dict[str, Any]], *, streamed: bool) -> Answered:
    model: str | None = None
    texts: list[str] = []
    calls: list[ToolCall] = []
    finish: str | None = None
    blocked: str | None = None
    usage: dict[str, Any] | None = None
    problem: str | None = None
    for chunk in chunks:
        if "error" in chunk and not chunk.get("candidates"):
            message = text_of(mapping(chunk.get("error")).get("message"))
            problem = problem or (f"the model reported an error: {message}" if message
                                  else "the model reported an error")
            continue
        model = model or text_of(_get(chunk, "modelVersion", "model_version")) or None
        given = _get(chunk, "usageMetadata", "usage_metadata")
        if isinstance(given, dict) and given:
            usage = given
        feedback = mapping(_get(chunk, "promptFeedback", "prompt_feedback"))
        blocked = blocked or text_of(_get(feedback, "blockReason", "block_reason"))
        candidates = [mapping(c) for c in items(chunk.get("candidates"))]
        candidate = next((c for c in candidates if c.get("index", 0) == 0), {})
        for part in items(mapping(candidate.get("content")).get("parts")):
            part = mapping(part)
            if isinstance(part.get("text"), str) and part.get("thought") is not True:
                texts.append(part["text"])
            call = _get(part, "functionCall", "function_call")
            if call is not None:
                calls.append(_call(mapping(call)))
        finish = text_of(_get(candidate, "finishReason", "finish_reason")) or finish
    tokens_in, tokens_out = _usage(usage)
    # A stream is whole once a candidate said why it finished (or the prompt was blocked).
    whole = (finish is not None or blocked is not None or not streamed) and problem is None
    return Answered(model=model, text=joined(texts), tool_calls=tuple(calls),
                    input_tokens=tokens_in, output_tokens=tokens_out,
                    finish_reason=finish or blocked, whole=whole,
                    problem=problem or (None if whole else STOPPED))


def _call(call: dict[str, Any]) -> ToolCall:
    args = call.get("args")
    return ToolCall(text_of(call.get("id")) or None, text_of(call.get("name")) or "",
                    {} if args is None else args)


def _usage(usage: dict[str, Any] | None) -> tuple[int | None, int | None]:
    if usage is None or _get(usage, "promptTokenCount", "prompt_token_count") is None and \
            _get(usage, "totalTokenCount", "total_token_count") is None:
        return None, None
    named = [_get(usage, a, b) for a, b in (
        ("promptTokenCount", "prompt_token_count"),
        ("toolUsePromptTokenCount", "tool_use_prompt_token_count"),
        ("candidatesTokenCount", "candidates_token_count"),
        ("thoughtsTokenCount", "thoughts_token_count"))]
    if any(value is not None and count(value) is None for value in named):
        return None, None  # a count that is not a count: the whole figure is unknown
    prompt, tool_use, candidates, thoughts = (count(value) or 0 for value in named)
    return prompt + tool_use, candidates + thoughts


def _get(data: dict[str, Any], camel: str, snake: str) -> Any:
    value = data.get(camel)
    return data.get(snake) if value is None else value

"""What an agent says to its model, seen on the wire (SPEC §15).

An agent built with any framework talks to its model over HTTP. assay sees
those exchanges — in process for ``python:`` agents (``capture``), through a
loopback recording proxy for ``exec:`` agents — as :class:`Exchange` values,
and reads them into the facts of a trace (:func:`read_exchanges`): the tool
calls the model asked for, the tool results the agent sent back, tokens, the
served model, steps. An exchange that cannot be read is kept as an ``http``
event and the facts it would have given stay unavailable: never guessed.
"""

from __future__ import annotations

from ..base import ASK_TOOLS
from .calls import CHAT, GEMINI, MESSAGES, RESPONSES, ModelCall, ToolCall, ToolResult
from .exchange import MAX_BODY, SECRET_HEADERS, Exchange, kept_headers
from .fold import MAX_HTTP_EVENTS, NEVER_ANSWERED, WireFacts, read_exchanges
from .read import api_of, read_exchange, safe_url
from .sse import SseEvent, sse_events

__all__ = [
    "ASK_TOOLS", "CHAT", "GEMINI", "MAX_BODY", "MAX_HTTP_EVENTS", "MESSAGES", "NEVER_ANSWERED",
    "RESPONSES", "SECRET_HEADERS", "Exchange", "ModelCall", "SseEvent", "ToolCall", "ToolResult",
    "WireFacts", "api_of", "kept_headers", "read_exchange", "read_exchanges", "safe_url",
    "sse_events",
]

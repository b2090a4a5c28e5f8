"""What an agent says to its model, seen on the wire (SPEC §15).

An agent built with any framework talks to its model over HTTP. assay sees
those exchanges — in process for ``python:`` agents (``capture``), through a
loopback recording proxy for ``exec:`` agents — as :class:`Exchange` values,
and reads them into the facts of a trace (``read``): the tool calls the
model asked for, the tool results the agent sent back, tokens, the served
model, steps. An exchange that cannot be read is kept as an ``http`` event
and the facts it would have given stay unavailable: never guessed.
"""

from __future__ import annotations

from .exchange import MAX_BODY, SECRET_HEADERS, Exchange, kept_headers

__all__ = ["MAX_BODY", "SECRET_HEADERS", "Exchange", "kept_headers"]

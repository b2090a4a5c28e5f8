"""The agent cache: the model calls an ``openai:`` target makes, kept and served again.

Off unless ``assay run --agent-cache`` turns it on (docs/decisions/0033-agent-cache.md):
what an agent does is what a run measures, and a cache that answered
without saying so would hide a model that moved. When it is on, each turn
of the tool loop is looked up under the case, the trial index, the model
asked for and the digest of the request as it would be sent (server,
model, messages, tools, sampling, reasoning effort); a kept reply is served
without calling the server, a miss calls it and keeps the reply. The trial
index is in the key, so trial 2 of a case is never served trial 1's answer
even when the two requests are the same.

What is kept is a ``chat.Reply`` (the part of a reply the loop reads), in
``CallCache("agent")``: ``ASSAY_CACHE_DIR/agent`` or ``.assay/cache/agent``,
a line per reply in the logs there. The model's answers to hidden cases are
in those logs; the folder is local, never shown, and nothing read from it is
quoted in a message: an entry that cannot be read as a kept reply is a miss,
silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..canonical import digest
from .call_cache import CallCache
from .chat import Reply

#: The target facet (and the value) a run with the cache on carries.
FACET = "agent_cache"
ON = "on"


def caches_model_calls(uri: str) -> bool:
    """Whether the target ``uri`` names makes model calls of assay's own that can be cached.

    Only ``openai:MODEL``: assay runs its tool loop. A host CLI (``claude``,
    ``codex``) makes its calls inside its own process, and ``python:``,
    ``mcp+…``, ``http(s)://`` and ``scripted:`` targets make none through assay.
    """
    return uri.startswith("openai:")


class AgentCache:
    """Replies by key in the ``agent`` folder of the cache root (``call_cache.cache_root``)."""

    def __init__(self, root: Path | None = None) -> None:
        self.calls = CallCache("agent", root)
        #: Turns served from the cache, and replies kept, by this process.
        self.served = 0
        self.kept = 0

    @property
    def folder(self) -> Path:
        """Where the replies are kept."""
        return self.calls.folder

    @staticmethod
    def key(case_id: str, n: int, model: str, request: Mapping[str, Any]) -> str | None:
        """The key of one model call; None when the request has no digest (not JSON).

        ``request`` is the body as it would be sent, with the server's address.
        """
        try:
            prompt = digest(dict(request))
        except (TypeError, ValueError, RecursionError):
            return None
        return CallCache.key(["agent", case_id, n, model, prompt])

    def get(self, key: str) -> Reply | None:
        """The reply kept under ``key``, or None (missing, unreadable, not a kept reply)."""
        value = self.calls.get(key)
        if value is None:
            return None
        try:
            reply = Reply.from_json(value)
        except ValueError:
            return None
        self.served += 1
        return reply

    def put(self, key: str, reply: Reply) -> None:
        """Keep ``reply`` under ``key`` (quietly nothing if it cannot be written)."""
        writes = self.calls.writes
        self.calls.put(key, reply.to_json())
        self.kept += self.calls.writes - writes

    def close(self) -> None:
        """Close the files the cache holds open (a later call opens them again)."""
        self.calls.close()

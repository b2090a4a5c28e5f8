"""Targets: one adapter per URI scheme behind one small protocol (SPEC §4)."""

from __future__ import annotations

from ..errors import UsageError
from .base import Target, TargetOptions, TrialBroken, TrialRequest

#: Schemes named in SPEC §4 that this version cannot run yet.
PLANNED = {
    "mcp+stdio:": "MCP over stdio",
    "mcp+http:": "MCP over streamable HTTP",
    "openai:": "OpenAI-compatible chat models",
    "claude": "the Claude Code CLI",
    "codex": "the Codex CLI",
}


def make_target(uri: str, options: TargetOptions) -> Target:
    """The target a URI names; an unknown scheme is a usage error."""
    if uri.startswith("python:"):
        from .python import PythonTarget

        return PythonTarget(uri, options)
    if uri.startswith("scripted:"):
        from .scripted import ScriptedTarget

        return ScriptedTarget(uri, options)
    if uri.startswith(("http://", "https://")):
        from .http import HttpTarget

        return HttpTarget(uri, options)
    for prefix, what in PLANNED.items():
        if uri == prefix or uri.startswith(prefix):
            raise UsageError(f"target {uri!r}: {what} is not available in this version of assay")
    raise UsageError(
        f"target {uri!r}: unknown scheme; use python:, scripted:, http:// or https:// "
        "(SPEC §4)"
    )


__all__ = ["PLANNED", "Target", "TargetOptions", "TrialBroken", "TrialRequest", "make_target"]

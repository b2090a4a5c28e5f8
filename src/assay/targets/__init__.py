"""Targets: one adapter per URI scheme behind one small protocol (SPEC §4)."""

from __future__ import annotations

from ..errors import UsageError
from .base import Partial, Target, TargetOptions, TrialBroken, TrialRequest

#: Schemes named in SPEC §4 that this version cannot run yet (none, today).
PLANNED: dict[str, str] = {}

SCHEMES = ("python:, scripted:, otel:, http://, https://, mcp+stdio:, mcp+http://, openai:MODEL, "
           "claude, codex")


def make_target(uri: str, options: TargetOptions) -> Target:
    """The target a URI names; an unknown scheme is a usage error."""
    if uri.startswith("python:"):
        from .python import PythonTarget

        return PythonTarget(uri, options)
    if uri.startswith("scripted:"):
        from .scripted import ScriptedTarget

        return ScriptedTarget(uri, options)
    if uri.startswith("otel:"):
        from .otel import OtelTarget

        return OtelTarget(uri, options)
    if uri.startswith(("http://", "https://")):
        from .http import HttpTarget

        return HttpTarget(uri, options)
    if uri.startswith("openai:"):
        from .openai import OpenAITarget

        return OpenAITarget(uri, options)
    if uri == "claude" or uri.startswith("claude "):
        from .hosts.claude import ClaudeTarget

        return ClaudeTarget(uri, options)
    if uri == "codex" or uri.startswith("codex "):
        from .hosts.codex import CodexTarget

        return CodexTarget(uri, options)
    if uri.startswith(("mcp+stdio:", "mcp+http://", "mcp+https://")):
        from .mcp import McpTarget

        return McpTarget(uri, options)
    for prefix, what in PLANNED.items():
        if uri == prefix or uri.startswith(prefix):
            raise UsageError(f"target {uri!r}: {what} is not available in this version of assay")
    raise UsageError(f"target {uri!r}: unknown scheme; use one of {SCHEMES} (SPEC §4)")


__all__ = ["PLANNED", "Partial", "Target", "TargetOptions", "TrialBroken", "TrialRequest",
           "make_target"]

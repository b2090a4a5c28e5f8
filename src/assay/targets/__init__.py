"""Targets: one adapter per URI scheme behind one small protocol (SPEC §4)."""

from __future__ import annotations

from ..errors import UsageError
from .base import Partial, Target, TargetOptions, TrialBroken, TrialRequest, target_options

#: Schemes named in SPEC §4 that this version cannot run yet (none, today).
PLANNED: dict[str, str] = {}

SCHEMES = ("python:, exec:, scripted:, otel:, http://, https://, mcp+stdio:, mcp+http://, "
           "openai:MODEL, claude, codex")


def make_target(uri: str, options: TargetOptions) -> Target:
    """The target a URI names; an unknown scheme is a usage error."""
    if uri.startswith("python:"):
        from .python import PythonTarget

        return PythonTarget(uri, options)
    if uri.startswith("exec:"):
        from .exec import ExecTarget
        from .prices import load_prices
        from .wire.proxy import upstreams_here
        from .wire.watch import ProxyObserver

        # Its model traffic goes through the battery's recording proxy (SPEC §15).
        watcher = ProxyObserver(upstreams_here(dict(options.upstreams)), options.ask_tools,
                                load_prices())
        return ExecTarget(uri, options, observers=[watcher])
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


def workspace_refusal(uri: str) -> str | None:
    """Why the target ``uri`` cannot run a case with a workspace (SPEC §14), or None.

    Hosts, ``exec:`` and ``python:`` run the agent in the trial's copy; an
    ``mcp+stdio:`` server is started in it. The others have no agent here to
    put in a folder.
    """
    if uri.startswith(("python:", "exec:", "mcp+stdio:")) or _is_host(uri):
        return None
    if uri.startswith(("http://", "https://")):
        return "an HTTP endpoint runs where it runs, and assay cannot hand it a folder"
    if uri.startswith(("mcp+http://", "mcp+https://")):
        return "an MCP server reached over HTTP runs elsewhere, and assay cannot start it in " \
               "a folder (use mcp+stdio:, which assay starts in each trial's workspace)"
    if uri.startswith("openai:"):
        return "the openai: loop gives a model the fixture's tools, none of which works in a " \
               "folder (run the agent as python:, exec:, claude or codex)"
    return "it replays recorded traces: no agent runs here to work in a folder"


def conversation_refusal(uri: str) -> str | None:
    """Why the target ``uri`` cannot hold a conversation (SPEC §16), or None."""
    if uri.startswith(("openai:", "http://", "https://", "exec:", "python:")) or _is_host(uri):
        return None
    if uri.startswith(("mcp+stdio:", "mcp+http://", "mcp+https://")):
        return "an MCP tool call is one request and one answer, with no conversation to resume"
    return "it replays recorded traces: nobody is there to answer the next message"


def folder_fixture_refusal(uri: str) -> str | None:
    """Why a host or an ``exec:`` program cannot take a folder (or a plain file) as
    ``fixture:``, or None.

    A host's working folder is a workspace now (SPEC §14): copied per trial,
    and what the agent leaves in it is graded. One spelling for one thing.
    An ``exec:`` program is given no fixture at all: silently ignored, the
    folder would look given.
    """
    if _is_host(uri):
        return "a folder a host works in is given as workspace: now"
    if uri.startswith("exec:"):
        return "a folder an exec: program works in is given as workspace:"
    return None


def skill_refusal(uri: str, mode: str, skill: str, hosts: frozenset[str],
                  found: tuple[str, ...]) -> str | None:
    """Why the target ``uri`` cannot run a case whose invocation names ``skill`` (SPEC §2),
    found in the workspace at ``found``, where ``hosts`` look; None when it can.

    Only a host CLI invokes a skill its own way, so ``explicit`` needs one; and a
    host that does not look where the skill is could never come to it, whatever the mode.
    """
    from ..model.invocation import SKILL_FOLDERS

    host = uri.split(maxsplit=1)[0] if _is_host(uri) else None
    if host is None:
        if mode == "explicit":
            return (f"only a host CLI (claude, codex) invokes a skill its own way, and target "
                    f"{uri} is none: run the case on one, or make its invocation automatic")
        return None
    if host in hosts:
        return None
    where = " or ".join(f"{folder}/{skill}/SKILL.md" for folder in SKILL_FOLDERS[host])
    return f"{host} looks for it in {where}, and the workspace holds it only in " + \
        " and ".join(found)


def _is_host(uri: str) -> bool:
    return uri in ("claude", "codex") or uri.startswith(("claude ", "codex "))


__all__ = ["PLANNED", "Partial", "Target", "TargetOptions", "TrialBroken", "TrialRequest",
           "conversation_refusal",
           "folder_fixture_refusal", "make_target", "skill_refusal", "target_options",
           "workspace_refusal"]

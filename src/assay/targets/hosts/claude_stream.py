"""Claude Code's ``stream-json`` output, read into the facts of a trace.

A pure function of the lines the CLI printed, so that what assay concludes
from a stream can be checked on a stream. What the stream says, and the traps
in it (checked against Claude Code 2.1):

- ``system``/``init`` names the model, the tools and the MCP servers with
  their status; every line names the ``session_id`` (what ``--resume`` takes,
  the same in a resumed run).
- An ``assistant`` line's ``message.model`` is the model the server says
  answered; a reply the CLI made up itself (no sign-in, an API error) has
  the model ``<synthetic>`` and an ``error`` kind (``authentication_failed``…).
- An ``assistant`` line carries *one* content block; the blocks of one model
  reply share ``message.id``. Steps are the distinct ids of the main thread
  (``parent_tool_use_id`` null): the final ``num_turns`` also counts tool
  round trips and is not the number of model calls.
- ``message.usage`` is a snapshot taken when the reply started; the totals
  are in the final ``result`` line (``usage``, ``total_cost_usd``).
- A ``user`` line carries tool results (``is_error``), and next to them
  ``tool_use_result``, the tool's own structured result: for the ``Skill``
  tool it says ``{"success": true, "commandName": NAME}`` — the host's own
  word that the skill was loaded, hence a ``skill`` event.
- ``system``/``permission_denied`` and the result's ``permission_denials``
  name calls the permission rules refused.
- ``result``: ``subtype`` (``success``, ``error_max_turns``,
  ``error_max_budget_usd``, ``error_during_execution``…), ``is_error``,
  ``result`` (the final text, absent when a limit ended the run), ``errors``.
  A final text that is the JSON object ``{"status": "refused", "reason": …}``
  makes a successful run ``refused`` (SPEC §4, ``events.refuse``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...model import Event, Status, Usage
from .events import json_event, refuse

#: Result subtypes that mean a limit ended the run rather than an answer.
LIMITS = {"error_max_turns": "max turns", "error_max_budget_usd": "max budget",
          "error_max_structured_output_retries": "structured output retries"}

#: The model of a reply the CLI wrote itself rather than received.
SYNTHETIC = "<synthetic>"


@dataclass
class ClaudeRun:
    """The facts read from one stream."""

    events: list[Event] = field(default_factory=list)
    output: Any = None
    status: Status = "ok"
    error: str | None = None
    settled: bool = False
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    #: The model the server says answered the main thread's last reply (None: no reply came).
    served_model: str | None = None
    #: The kind of the last error the CLI reported in place of a reply (``authentication_failed``).
    api_error: str | None = None
    has_result: bool = False
    skills_listed: list[str] = field(default_factory=list)
    unreadable: int = 0
    #: The session the run belongs to (every line names it): what ``--resume`` takes.
    session_id: str | None = None


class _Reader:
    def __init__(self) -> None:
        self.run = ClaudeRun()
        self.calls: dict[str, str] = {}
        self.denied: set[str] = set()
        self.replies: set[str] = set()

    def line(self, t: float, raw: str) -> None:
        item = json_event(raw)
        if item is None:
            self.run.unreadable += 1
            return
        kind = item.get("type")
        session = item.get("session_id")
        if self.run.session_id is None and isinstance(session, str) and session:
            self.run.session_id = session
        if kind == "system":
            self.system(t, item)
        elif kind == "assistant":
            self.assistant(t, item)
        elif kind == "user":
            self.user(t, item)
        elif kind == "result":
            self.result(t, item)

    def system(self, t: float, item: dict[str, Any]) -> None:
        subtype = item.get("subtype")
        if subtype == "init":
            self.run.model = item.get("model") or self.run.model
            self.run.skills_listed = [s for s in item.get("skills") or [] if isinstance(s, str)]
            for server in item.get("mcp_servers") or []:
                if isinstance(server, dict) and server.get("status") not in ("connected", None):
                    self.run.events.append(Event(
                        kind="error", name=f"mcp:{server.get('name')}", t=t,
                        text=f"MCP server {server.get('name')!r} is {server.get('status')}"))
        elif subtype == "permission_denied":
            self.deny(t, item.get("tool_name"), item.get("tool_use_id"), item.get("message"))

    def deny(self, t: float, tool: Any, call_id: Any, message: Any) -> None:
        if call_id in self.denied:
            return
        if isinstance(call_id, str):
            self.denied.add(call_id)
        self.run.events.append(Event(
            kind="error", name=tool if isinstance(tool, str) else None,
            call_id=call_id if isinstance(call_id, str) else None, t=t,
            text=f"permission denied: {message}" if message else "permission denied"))

    def assistant(self, t: float, item: dict[str, Any]) -> None:
        message = item.get("message") or {}
        main = item.get("parent_tool_use_id") is None
        if main and message.get("id") is not None:
            self.replies.add(str(message["id"]))
        served = message.get("model")
        if main and isinstance(served, str) and served and served != SYNTHETIC:
            self.run.served_model = served
        if isinstance(item.get("error"), str) and item["error"]:
            self.run.api_error = item["error"]
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                self.run.events.append(Event(kind="message", text=block.get("text"), t=t))
            elif block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                call_id = block.get("id")
                name = str(block.get("name"))
                if isinstance(call_id, str):
                    self.calls[call_id] = name
                self.run.events.append(Event(kind="tool_call", name=name, call_id=call_id,
                                             arguments=block.get("input"), t=t))

    def user(self, t: float, item: dict[str, Any]) -> None:
        content = (item.get("message") or {}).get("content")
        structured = item.get("tool_use_result")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = block.get("tool_use_id")
            name = self.calls.get(call_id) if isinstance(call_id, str) else None
            result = _result_of(block.get("content"), structured)
            is_error = bool(block.get("is_error"))
            self.run.events.append(Event(kind="tool_result", name=name, call_id=call_id,
                                         result=result, is_error=is_error, t=t))
            if (name == "Skill" and not is_error and isinstance(structured, dict)
                    and structured.get("success") and structured.get("commandName")):
                self.run.events.append(Event(kind="skill", name=str(structured["commandName"]),
                                             call_id=call_id, t=t))

    def result(self, t: float, item: dict[str, Any]) -> None:
        run = self.run
        run.has_result = True
        for denial in item.get("permission_denials") or []:
            if isinstance(denial, dict):
                self.deny(t, denial.get("tool_name"), denial.get("tool_use_id"), None)
        subtype = str(item.get("subtype") or "")
        errors = [str(e) for e in item.get("errors") or []]
        if "result" in item:
            run.output = item["result"]
        if subtype in LIMITS:
            run.status, run.settled = "timeout", False
            run.error = "; ".join(errors) or f"{LIMITS[subtype]} reached"
        elif item.get("is_error") or subtype != "success":
            run.status, run.settled = "error", False
            run.error = "; ".join(errors) or (str(item.get("result")) if item.get("result")
                                              else subtype or "error")
        else:
            run.status, run.settled = "ok", True
            refuse(run, run.output)
        run.usage = _totals(item)


def _totals(result: dict[str, Any]) -> Usage:
    """The result line's totals; what it leaves out stays unreported, never 0."""
    cost = result.get("total_cost_usd")
    usd = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    usage = result.get("usage")
    if not isinstance(usage, dict) or not any(
            isinstance(usage.get(k), int) for k in ("input_tokens", "output_tokens")):
        return Usage(cost_usd=usd)
    return Usage(
        input_tokens=sum(_int(usage.get(k)) for k in (
            "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")),
        output_tokens=_int(usage.get("output_tokens")), cost_usd=usd)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _result_of(content: Any, structured: Any) -> Any:
    """An MCP tool's structured content when the host passed it on, else the text."""
    if isinstance(structured, dict) and "structuredContent" in structured:
        return structured["structuredContent"]
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(t for t in texts if isinstance(t, str)) if texts else content
    return content


def read_stream(lines: list[tuple[float, str]]) -> ClaudeRun:
    """The facts of one ``claude -p --output-format stream-json --verbose`` run."""
    reader = _Reader()
    for t, raw in lines:
        reader.line(t, raw)
    run = reader.run
    run.steps = len(reader.replies)
    return run

"""Codex's ``exec --json`` stream, and its session record, read into the facts of a trace.

The stream (checked against Codex 0.163): ``thread.started`` (its
``thread_id``, what ``exec resume`` takes, the same in a resumed run),
``turn.started``, ``item.started`` / ``item.completed`` per item —
``agent_message``, ``command_execution`` (``command``, ``aggregated_output``,
``exit_code``, ``status``), ``mcp_tool_call`` (``server``, ``tool``,
``arguments``, ``result``, ``error``), ``file_change``, ``web_search``,
``error`` — then ``turn.completed`` with the usage of the whole run (of
the whole thread, in a resumed run), or ``turn.failed``. It names tools as
the host ran them, whether the model called them directly or from a
code-mode script, so the trace names them the same way: ``shell``
(``{command}``), ``mcp__SERVER__TOOL``, ``apply_patch``, ``web_search``.
The last ``agent_message`` is the output; when it is the JSON object
``{"status": "refused", "reason": …}`` a completed turn is ``refused``
(SPEC §4, ``events.refuse``).

What the stream does not say, and where it is found instead:

- a call the sandbox or the approval policy refused is *missing* from the
  stream; Codex's own session record keeps it (``codex_session.py``);
- the number of model calls (one usage record per response in the session
  record), and the model that answered;
- cost: Codex reports none; assay's price table gives an inferred one;
- skills: Codex loads a skill by reading its ``SKILL.md`` with a command, and
  says nothing else; a skill is inferred from such a command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...model import Event, Status, Usage
from .events import json_event, refuse

#: The model-facing names of Codex's shell tools.
SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "local_shell"})

SHELLS = frozenset({"bash", "sh", "zsh", "dash"})

_SKILL = re.compile(r"([A-Za-z0-9_.-]+)/SKILL\.md\b")


@dataclass
class CodexRun:
    """The facts read from one ``codex exec --json`` stream."""

    events: list[Event] = field(default_factory=list)
    output: Any = None
    status: Status = "ok"
    error: str | None = None
    settled: bool = False
    finished: bool = False
    usage: Usage = field(default_factory=Usage)
    unreadable: int = 0
    #: The thread the run belongs to (``thread.started``): what ``exec resume`` takes.
    session_id: str | None = None


def inner_command(command: str) -> str:
    """``/bin/bash -lc 'cat x'`` → ``cat x``: the command as the model gave it."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[1] in ("-c", "-lc", "-ic") and Path(words[0]).name in SHELLS:
        return words[2]
    return command


class _Reader:
    def __init__(self) -> None:
        self.run = CodexRun()
        self.open: dict[str, int] = {}

    def line(self, t: float, raw: str) -> None:
        item = json_event(raw)
        if item is None:
            self.run.unreadable += 1
            return
        kind = item.get("type")
        run = self.run
        if kind in ("item.started", "item.completed") and isinstance(item.get("item"), dict):
            self.item(t, item["item"], done=kind == "item.completed")
        elif kind == "thread.started":
            thread = item.get("thread_id")
            if isinstance(thread, str) and thread:
                run.session_id = thread
        elif kind == "turn.completed":
            usage = item.get("usage")
            if isinstance(usage, dict) and any(
                    isinstance(usage.get(k), int) for k in ("input_tokens", "output_tokens")):
                # A turn that gives no counts leaves the trial's tokens unreported, not 0.
                run.usage = run.usage.add(Usage(input_tokens=_int(usage.get("input_tokens")),
                                                output_tokens=_int(usage.get("output_tokens"))))
            run.finished = True
            if run.status == "ok":
                run.settled = True
                refuse(run, run.output)
        elif kind == "turn.failed":
            message = (item.get("error") or {}).get("message")
            run.finished, run.settled, run.status = True, False, "error"
            run.error = str(message or "the turn failed")
        elif kind == "error":
            run.events.append(Event(kind="error", text=str(item.get("message")), t=t))

    def item(self, t: float, item: dict[str, Any], *, done: bool) -> None:
        kind = item.get("type")
        key = str(item.get("id"))
        if kind == "agent_message":
            if done:
                self.run.events.append(Event(kind="message", text=item.get("text"), t=t))
                self.run.output = item.get("text")
            return
        if kind == "error":
            if done:
                self.run.events.append(Event(kind="error", text=str(item.get("message")), t=t))
            return
        call = _call_of(item)
        if call is None:
            return  # reasoning, todo lists: not tool calls
        name, arguments = call
        if key not in self.open:
            self.open[key] = len(self.run.events)
            self.run.events.append(Event(kind="tool_call", name=name, arguments=arguments,
                                         call_id=key, t=t))
        if done:
            self.result(t, item, name, key)

    def result(self, t: float, item: dict[str, Any], name: str, key: str) -> None:
        kind, status = item.get("type"), item.get("status")
        events = self.run.events
        if kind == "command_execution":
            code = item.get("exit_code")
            events.append(Event(kind="tool_result", name=name, call_id=key, t=t,
                                result={"output": item.get("aggregated_output"),
                                        "exit_code": code},
                                is_error=status in ("failed", "declined") or code not in (0, None)))
            for skill in skills_read(str(item.get("command"))):
                events.append(Event(kind="skill", name=skill, call_id=key, t=t))
        elif kind == "mcp_tool_call":
            error = item.get("error")
            if isinstance(error, dict) and error.get("message"):
                events.append(Event(kind="tool_result", name=name, call_id=key, t=t,
                                    result=error.get("message"), is_error=True))
                events.append(Event(kind="error", name=name, call_id=key, t=t,
                                    text=str(error["message"])))
            else:
                events.append(Event(kind="tool_result", name=name, call_id=key, t=t,
                                    result=_mcp_result(item.get("result")),
                                    is_error=status == "failed"))
        else:
            events.append(Event(kind="tool_result", name=name, call_id=key, t=t,
                                result={"status": status}, is_error=status == "failed"))


def skills_read(command: str) -> list[str]:
    """The skills whose ``SKILL.md`` a command reads (how Codex loads a skill)."""
    return list(dict.fromkeys(_SKILL.findall(command)))


def _call_of(item: dict[str, Any]) -> tuple[str, Any] | None:
    kind = item.get("type")
    if kind == "command_execution":
        return "shell", {"command": inner_command(str(item.get("command") or ""))}
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments")
    if kind == "file_change":
        return "apply_patch", {"changes": item.get("changes")}
    if kind == "web_search":
        return "web_search", {"query": item.get("query")}
    return None


def _mcp_result(result: Any) -> Any:
    """Structured content when the server gave it, else the text of its content."""
    if not isinstance(result, dict):
        return result
    if result.get("structured_content") is not None:
        return result["structured_content"]
    texts = [b.get("text") for b in result.get("content") or []
             if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def read_stream(lines: list[tuple[float, str]]) -> CodexRun:
    """The facts of one ``codex exec --json`` run."""
    reader = _Reader()
    for t, raw in lines:
        reader.line(t, raw)
    return reader.run

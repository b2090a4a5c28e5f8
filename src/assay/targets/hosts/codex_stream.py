"""Codex's ``exec --json`` stream, and its session record, read into the facts of a trace.

The stream (checked against Codex 0.163): ``thread.started``,
``turn.started``, ``item.started`` / ``item.completed`` per item —
``agent_message``, ``command_execution`` (``command``, ``aggregated_output``,
``exit_code``, ``status``), ``mcp_tool_call`` (``server``, ``tool``,
``arguments``, ``result``, ``error``), ``file_change``, ``web_search``,
``error`` — then ``turn.completed`` with the usage of the whole run, or
``turn.failed``. It names tools as the host ran them, whether the model
called them directly or from a code-mode script, so the trace names them the
same way: ``shell`` (``{command}``), ``mcp__SERVER__TOOL``, ``apply_patch``,
``web_search``.

What the stream does not say, and where it is found instead:

- a command the sandbox refused is *missing* from the stream. Codex's own
  session record (``$CODEX_HOME/sessions/…/rollout-*.jsonl``, in the trial's
  throwaway home) keeps every function call the model made, so a shell call
  found there and not in the stream is added to the trace, marked as such.
  A call made from a code-mode script is not in the record either: a trace
  with one has tool-call evidence ``inferred``;
- the number of model calls (one usage record per response in the session
  record), and the model that answered;
- cost: Codex reports none; assay's price table gives an inferred one;
- skills: Codex loads a skill by reading its ``SKILL.md`` with a command, and
  says nothing else; a skill is inferred from such a command.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...model import Event, Status, Usage
from .events import json_event

#: The model-facing names of Codex's shell tools.
SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "local_shell"})

SHELLS = frozenset({"bash", "sh", "zsh", "dash"})

_SKILL = re.compile(r"([A-Za-z0-9_.-]+)/SKILL\.md\b")
_EXIT = re.compile(r"(?:exited with code|\"exit_code\":)\s*(-?\d+)")


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


@dataclass
class Session:
    """What Codex's own session record adds: model calls, the model, every shell call."""

    model: str | None = None
    responses: int = 0
    shell_calls: list[tuple[str, Any, str | None]] = field(default_factory=list)
    code_mode: bool = False


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
            for skill in dict.fromkeys(_SKILL.findall(str(item.get("command")))):
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


def read_session(codex_home: Path) -> Session | None:
    """Codex's session record of the run, if it left exactly one."""
    records = sorted((codex_home / "sessions").glob("**/rollout-*.jsonl"))
    if len(records) != 1:
        return None
    session = Session()
    responses: set[str] = set()
    outputs: dict[str, str] = {}
    calls: list[tuple[str, Any]] = []
    try:
        text = records[0].read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        found = line.get("payload")
        payload: dict[str, Any] = found if isinstance(found, dict) else {}
        kind = line.get("type")
        if kind == "turn_context" and payload.get("model"):
            session.model = str(payload["model"])
        elif kind == "token_usage_record" and payload.get("response_id"):
            responses.add(str(payload["response_id"]))
        elif kind == "response_item":
            item_kind = payload.get("type")
            if item_kind == "function_call" and payload.get("name") in SHELL_TOOLS:
                calls.append((str(payload.get("call_id")), payload.get("arguments")))
            elif item_kind == "custom_tool_call" and payload.get("name") == "exec":
                session.code_mode = True
            elif item_kind == "function_call_output":
                outputs[str(payload.get("call_id"))] = _output_text(payload.get("output"))
    session.responses = len(responses)
    for call_id, arguments in calls:
        session.shell_calls.append((call_id, _shell_command(arguments), outputs.get(call_id)))
    return session


def _output_text(output: Any) -> str:
    if isinstance(output, list):
        return "\n".join(str(b.get("text")) for b in output if isinstance(b, dict))
    return str(output)


def _shell_command(arguments: Any) -> str:
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return str(arguments)
    if isinstance(parsed, dict):
        command = parsed.get("cmd", parsed.get("command"))
        if isinstance(command, list):
            return inner_command(shlex.join(str(c) for c in command))
        if command is not None:
            return str(command)
    return str(arguments)


def complete_from_session(run: CodexRun, session: Session) -> int:
    """Add the shell calls the session record has and the stream left out; how many."""
    events = run.events
    streamed = [i for i, e in enumerate(events) if e.kind == "tool_call" and e.name == "shell"]
    used: set[int] = set()
    anchor = -1
    added = 0
    for call_id, command, output in session.shell_calls:
        match = next((i for i in streamed if i not in used
                      and (events[i].arguments or {}).get("command") == command), None)
        if match is not None:
            used.add(match)
            anchor = max(anchor, _result_index(events, match))
            continue
        code = _EXIT.search(output or "")
        missing = [
            Event(kind="tool_call", name="shell", arguments={"command": command},
                  call_id=call_id),
            Event(kind="tool_result", name="shell", call_id=call_id,
                  result={"output": output, "exit_code": int(code[1]) if code else None},
                  is_error=code is None or code[1] != "0"),
            Event(kind="error", name="shell", call_id=call_id,
                  text="a shell call missing from codex's event stream (the sandbox may "
                       "have refused it); found in its session record"),
        ]
        events[anchor + 1:anchor + 1] = missing
        streamed = [i + len(missing) if i > anchor else i for i in streamed]
        used = {i + len(missing) if i > anchor else i for i in used}
        anchor += len(missing)
        added += 1
    return added


def _result_index(events: list[Event], call_index: int) -> int:
    call_id = events[call_index].call_id
    for i in range(call_index + 1, len(events)):
        if events[i].kind == "tool_result" and events[i].call_id == call_id:
            return i
    return call_index

"""Codex's session record (``rollout-*.jsonl``): the calls its ``--json`` stream leaves out.

Codex writes every item of the conversation to its session record, in the
trial's throwaway ``CODEX_HOME`` (``sessions/…/rollout-*.jsonl``). Its event
stream does not: a call the sandbox or the approval policy refused before it
ran has no item at all (checked with 0.163: a refused shell command, a
refused ``apply_patch``), and tools the stream has no item type for
(``view_image``, ``write_stdin``, ``request_user_input`` …) never show.

So the record's calls — ``function_call`` (shell tools, MCP tools in their
``mcp__SERVER`` namespace, any other function), ``custom_tool_call``
(freeform tools: ``apply_patch``), ``local_shell_call`` and
``web_search_call`` — are named and shaped as the stream names them
(``shell {command}``, ``mcp__SERVER__TOOL``, ``apply_patch {changes}``,
``web_search {query}``, else the tool's own name and arguments), matched
against the stream's calls, and each one the stream lacks is put into the
trace where it happened, with its result and an ``error`` event saying so.
The trial's tool-call evidence is then ``inferred``: the record, not the
stream, is the only witness.

The record also gives the number of model responses and the model that
answered. A code-mode script (a ``custom_tool_call`` to ``exec``) is in the
record only as the script: the calls inside it are in the stream alone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...model import Event
from ..base import parsed_json
from .codex_stream import SHELL_TOOLS, CodexRun, inner_command, skills_read

#: An exit code in a tool's output text (shell tools; ``apply_patch`` run as a command).
_EXIT = re.compile(r"(?:exited with code|Exit code:|\"exit_code\":)\s*(-?\d+)")
#: The file headers of an ``apply_patch`` patch, and the stream's word for each.
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", re.MULTILINE)
_PATCH_KIND = {"Add": "add", "Update": "update", "Delete": "delete"}
#: The path of the skill file in the text Codex puts in for a mentioned skill.
_SKILL_PATH = re.compile(r"<path>([^<\n]*)</path>")


@dataclass(frozen=True)
class RecordedCall:
    """One call in the record, named and shaped as the stream would name it."""

    call_id: str
    name: str
    arguments: Any
    output: str | None = None
    #: What a structured output said of success, when it said anything.
    success: bool | None = None


@dataclass
class Session:
    """What Codex's own session record adds: model calls, the model, every call."""

    model: str | None = None
    responses: int = 0
    calls: list[RecordedCall] = field(default_factory=list)
    code_mode: bool = False
    #: The skills Codex put into the conversation itself (a ``$NAME`` mention), by folder name.
    skills_given: list[str] = field(default_factory=list)


def _record(codex_home: Path) -> Path | None:
    """The session record in ``codex_home``, if there is exactly one."""
    records = sorted((codex_home / "sessions").glob("**/rollout-*.jsonl"))
    return records[0] if len(records) == 1 else None


def record_size(codex_home: Path) -> int:
    """How many bytes the session record holds now (0: none yet).

    A resumed session appends to the record it resumes: what one run of a
    conversation added is what lies past the size before it (SPEC §16).
    """
    record = _record(codex_home)
    try:
        return record.stat().st_size if record is not None else 0
    except OSError:
        return 0


def read_session(codex_home: Path, workdir: Path | None = None,
                 since: int = 0) -> Session | None:
    """Codex's session record of the run, if it left exactly one.

    ``workdir`` is the CLI's working folder, against which a patch's relative
    paths resolve (the stream names changed files by absolute path). ``since``
    is where the run began in the record (``record_size`` before it): a turn
    of a conversation reads only what it added.
    """
    record = _record(codex_home)
    if record is None:
        return None
    try:
        with record.open("rb") as file:
            file.seek(since)
            text = file.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    session = Session()
    responses: set[str] = set()
    outputs: dict[str, tuple[str, bool | None]] = {}
    calls: list[tuple[str, str, Any]] = []
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
            if item_kind in ("function_call_output", "custom_tool_call_output"):
                outputs[str(payload.get("call_id"))] = _output(payload.get("output"))
            elif item_kind == "custom_tool_call" and payload.get("name") == "exec":
                session.code_mode = True
            elif item_kind == "message":
                session.skills_given += _skills_given(payload)
            elif (call := _call_of(payload, workdir)) is not None:
                calls.append(call)
    session.responses = len(responses)
    for call_id, name, arguments in calls:
        output, success = outputs.get(call_id, (None, None))
        session.calls.append(RecordedCall(call_id, name, arguments, output, success))
    return session


def _skills_given(item: dict[str, Any]) -> list[str]:
    """The skills a user-side message of Codex's own carries: the ``SKILL.md`` it puts in
    when a prompt mentions a skill (``<skill><name>…</name><path>…/NAME/SKILL.md</path>``,
    marked ``skills.selected_skill_instructions``; checked with 0.163)."""
    meta = item.get("internal_chat_message_metadata_passthrough")
    kinds = meta.get("content_item_kinds") if isinstance(meta, dict) else None
    if item.get("role") != "user" or not isinstance(kinds, list) or \
            "skills.selected_skill_instructions" not in kinds:
        return []
    content = item.get("content")
    found: list[str] = []
    for block in content if isinstance(content, list) else []:
        text = block.get("text") if isinstance(block, dict) else None
        path = _SKILL_PATH.search(text) if isinstance(text, str) else None
        if path is not None:
            found += skills_read(path[1])
    return found


def _call_of(item: dict[str, Any], workdir: Path | None) -> tuple[str, str, Any] | None:
    """(call id, trace name, arguments) of a call item of the record; None for other items."""
    kind, name = item.get("type"), str(item.get("name") or "")
    call_id = str(item.get("call_id") or item.get("id"))
    if kind == "function_call":
        arguments = parsed_json(item.get("arguments"))
        namespace = str(item.get("namespace") or "")
        if name in SHELL_TOOLS:
            return call_id, "shell", {"command": _shell_command(arguments)}
        if name == "apply_patch":
            patch = arguments.get("input") if isinstance(arguments, dict) else arguments
            return call_id, "apply_patch", {"changes": _patch_changes(str(patch), workdir)}
        if namespace.startswith("mcp__"):
            return call_id, f"{namespace}__{name}", arguments
        return call_id, name, arguments
    if kind == "custom_tool_call":
        text = str(item.get("input") or "")
        if name == "apply_patch":
            return call_id, "apply_patch", {"changes": _patch_changes(text, workdir)}
        return call_id, name, {"input": text}
    if kind == "local_shell_call":
        action = item.get("action") or {}
        return call_id, "shell", {"command": _shell_command(action)}
    if kind == "web_search_call":
        action = item.get("action") or {}
        return call_id, "web_search", {"query": action.get("query")}
    return None


def _output(output: Any) -> tuple[str, bool | None]:
    """A call's output as text, and its ``success`` when the output is structured."""
    if isinstance(output, dict):
        success = output.get("success")
        text, _ = _output(output.get("content", ""))
        return text, success if isinstance(success, bool) else None
    if isinstance(output, list):
        return "\n".join(str(b.get("text")) for b in output if isinstance(b, dict)), None
    return str(output), None


def _shell_command(arguments: Any) -> str:
    if isinstance(arguments, dict):
        command = arguments.get("cmd", arguments.get("command"))
        if isinstance(command, list):
            return inner_command(shlex.join(str(c) for c in command))
        if command is not None:
            return str(command)
    return str(arguments)


def _patch_changes(patch: str, workdir: Path | None) -> list[dict[str, str]]:
    """The files a patch touches, as the stream's ``file_change`` lists them."""
    changes = []
    for verb, path in _PATCH_FILE.findall(patch):
        where = Path(path)
        if workdir is not None and not where.is_absolute():
            where = workdir / where
        changes.append({"path": os.path.normpath(where), "kind": _PATCH_KIND[verb]})
    return changes


def _key(name: str | None, arguments: Any) -> tuple[str, str]:
    """What makes a recorded call the same call as a streamed one."""
    if name == "shell" and isinstance(arguments, dict):
        return "shell", str(arguments.get("command"))
    if name == "apply_patch" and isinstance(arguments, dict):
        changes = arguments.get("changes")
        files = sorted((os.path.normpath(str(c.get("path"))), str(c.get("kind")))
                       for c in changes or [] if isinstance(c, dict))
        return "apply_patch", json.dumps(files)
    return str(name), json.dumps(arguments, sort_keys=True, default=str)


def complete_from_session(run: CodexRun, session: Session) -> int:
    """Add the calls the session record has and the stream left out; how many were added."""
    events = run.events
    streamed = {i: _key(e.name, e.arguments) for i, e in enumerate(events)
                if e.kind == "tool_call"}
    used: set[int] = set()
    anchor = -1
    added = 0
    for call in session.calls:
        key = _key(call.name, call.arguments)
        match = next((i for i in sorted(streamed) if i not in used and streamed[i] == key),
                     None)
        if match is not None:
            used.add(match)
            anchor = max(anchor, _result_index(events, match))
            continue
        missing = _events_of(call)
        events[anchor + 1:anchor + 1] = missing
        shift = len(missing)
        streamed = {i + shift if i > anchor else i: k for i, k in streamed.items()}
        used = {i + shift if i > anchor else i for i in used}
        anchor += shift
        added += 1
    return added


def _events_of(call: RecordedCall) -> list[Event]:
    """A call found only in the record: the call, its result, and a note saying so."""
    output = call.output
    code = _EXIT.search(output or "")
    if call.success is not None:
        failed = not call.success
    elif code is not None:
        failed = code[1] != "0"
    elif call.name == "shell" or output is None:
        failed = True  # a command with no exit code did not run
    else:
        failed = call.name == "apply_patch" and not output.lstrip().startswith("Success")
    result: Any = {"output": output}
    if call.name == "shell":
        result["exit_code"] = int(code[1]) if code else None
    events = [
        Event(kind="tool_call", name=call.name, arguments=call.arguments, call_id=call.call_id),
        Event(kind="tool_result", name=call.name, call_id=call.call_id, result=result,
              is_error=failed),
        Event(kind="error", name=call.name, call_id=call.call_id,
              text=f"a {call.name} call missing from codex's event stream (the sandbox or "
                   "the approval policy may have refused it); found in its session record"),
    ]
    if call.name == "shell":
        events += [Event(kind="skill", name=skill, call_id=call.call_id)
                   for skill in skills_read(str(call.arguments.get("command")))]
    return events


def _result_index(events: list[Event], call_index: int) -> int:
    call_id = events[call_index].call_id
    for i in range(call_index + 1, len(events)):
        if events[i].kind == "tool_result" and events[i].call_id == call_id:
            return i
    return call_index

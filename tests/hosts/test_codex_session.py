"""Codex's session record read into calls, for item shapes the scripted CLI runs cannot make.

The real CLI's records (refused patches and commands, MCP calls, code mode) are
read in ``test_codex.py``; here, records written by hand in the same format
cover the older and server-side item kinds: a ``local_shell_call``, a hosted
``web_search_call``, an MCP call named without a namespace, a structured
output with ``success``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assay.model import Event
from assay.targets.hosts.codex_session import complete_from_session, read_session
from assay.targets.hosts.codex_stream import read_stream


def write_record(home: Path, *items: dict[str, Any]) -> None:
    folder = home / "sessions" / "2026" / "01" / "01"
    folder.mkdir(parents=True)
    lines = [{"type": "turn_context", "payload": {"model": "gpt-x"}}]
    lines += [{"type": "response_item", "payload": item} for item in items]
    (folder / "rollout-1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def stream(*items: dict[str, Any]) -> list[tuple[float, str]]:
    events = [{"type": "item.completed", "item": item} for item in items]
    events.append({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
    return [(0.0, json.dumps(e)) for e in events]


def test_every_kind_of_recorded_call_is_named_as_the_stream_names_it(tmp_path: Path) -> None:
    write_record(
        tmp_path,
        {"type": "local_shell_call", "call_id": "c1",
         "action": {"type": "exec", "command": ["bash", "-lc", "rm -rf build"]}},
        {"type": "function_call_output", "call_id": "c1", "output": "exited with code 1"},
        {"type": "web_search_call", "id": "ws1", "action": {"type": "search", "query": "q"}},
        {"type": "function_call", "call_id": "c2", "name": "mcp__orders__refund",
         "arguments": json.dumps({"order": "A-1"})},
        {"type": "function_call_output", "call_id": "c2",
         "output": {"content": "refunded", "success": True}},
        {"type": "function_call", "call_id": "c3", "name": "apply_patch",
         "arguments": json.dumps({"input": "*** Begin Patch\n*** Delete File: a.txt\n"
                                           "*** Update File: /abs/b.txt\n*** End Patch"})},
        {"type": "custom_tool_call", "call_id": "c4", "name": "notes", "input": "free text"},
    )
    session = read_session(tmp_path, Path("/work"))
    assert session is not None and session.model == "gpt-x"
    assert [(c.name, c.arguments) for c in session.calls] == [
        ("shell", {"command": "rm -rf build"}),
        ("web_search", {"query": "q"}),
        ("mcp__orders__refund", {"order": "A-1"}),
        ("apply_patch", {"changes": [{"path": "/work/a.txt", "kind": "delete"},
                                     {"path": "/abs/b.txt", "kind": "update"}]}),
        ("notes", {"input": "free text"}),
    ]
    assert session.calls[2].success is True and session.calls[2].output == "refunded"


def test_only_the_calls_the_stream_lacks_are_added_in_place_and_counted(
        tmp_path: Path) -> None:
    write_record(
        tmp_path,
        {"type": "function_call", "call_id": "c1", "name": "exec_command",
         "arguments": json.dumps({"cmd": "ls"})},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch",
         "input": "*** Begin Patch\n*** Add File: new.txt\n+x\n*** End Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "patch rejected"},
        {"type": "function_call", "call_id": "c3", "namespace": "mcp__crm", "name": "lookup",
         "arguments": json.dumps({"customer": "C-1"})},
    )
    run = read_stream(stream(
        {"id": "i1", "type": "command_execution", "command": "/bin/bash -lc ls",
         "aggregated_output": "a\n", "exit_code": 0, "status": "completed"},
        {"id": "i2", "type": "mcp_tool_call", "server": "crm", "tool": "lookup",
         "arguments": {"customer": "C-1"}, "result": {"content": []}, "status": "completed"},
    ))
    session = read_session(tmp_path, tmp_path / "work")
    assert session is not None
    assert complete_from_session(run, session) == 1
    shape = [(e.kind, e.name) for e in run.events]
    assert shape == [
        ("tool_call", "shell"), ("tool_result", "shell"),
        ("tool_call", "apply_patch"), ("tool_result", "apply_patch"), ("error", "apply_patch"),
        ("tool_call", "mcp__crm__lookup"), ("tool_result", "mcp__crm__lookup")]
    patch: Event = run.events[2]
    assert patch.arguments == {"changes": [{"path": str(tmp_path / "work" / "new.txt"),
                                            "kind": "add"}]}
    assert run.events[3].is_error and run.events[3].result == {"output": "patch rejected"}


def test_a_run_with_several_records_or_none_has_no_session(tmp_path: Path) -> None:
    assert read_session(tmp_path) is None
    write_record(tmp_path)
    (tmp_path / "sessions" / "rollout-2.jsonl").write_text("")
    assert read_session(tmp_path) is None


def test_a_skill_codex_put_in_is_read_by_its_folder_and_nothing_else_is(tmp_path: Path) -> None:
    """Only Codex's own skill message counts: a user's or the model's text that looks like
    one, or a malformed one, gives no skill (and never an error)."""
    marked = {"internal_chat_message_metadata_passthrough": {
        "content_item_kinds": ["skills.selected_skill_instructions"]}}
    skill_text = "<skill>\n<name>greet</name>\n<path>/w/.agents/skills/greet/SKILL.md</path>\n"
    write_record(
        tmp_path,
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": skill_text}]},
        {"type": "message", "role": "assistant", **marked,
         "content": [{"type": "output_text", "text": skill_text}]},
        {"type": "message", "role": "user", **marked, "content": "not a list"},
        {"type": "message", "role": "user", **marked, "content": [None, {"text": 7}]},
        {"type": "message", "role": "user",
         "internal_chat_message_metadata_passthrough": "not a mapping", "content": []},
        {"type": "message", "role": "user", **marked,
         "content": [{"type": "input_text", "text": skill_text}]},
    )
    session = read_session(tmp_path, Path("/w"))
    assert session is not None and session.skills_given == ["greet"]

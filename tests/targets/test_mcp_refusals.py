"""Refusals from a real MCP server (SPEC §4): a tool result with ``isError`` that says
``{"status": "refused", "reason": …}``, structured or as JSON text, through the
``mcp+stdio:`` target and through ``assay run``."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from assay.model import Case, Trace
from assay.targets import TargetOptions, TrialRequest, make_target
from assay.targets.refusal import REASON_CHARS

from ..fuzz_corpus import HOSTILE, MARKUP

pytestmark = pytest.mark.real

PYTHON = shlex.quote(sys.executable)

# One tool, ``decide``, answering as its ``kind`` says.
SERVER = '''
import json, sys
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

HOSTILE = json.loads(sys.argv[1])
server = MCPServer("refuser", version="0.1")


def text(value):
    return [TextContent(type="text", text=value)]


@server.tool()
def decide(kind: str) -> CallToolResult:
    refusal = {"status": "refused", "reason": "no refunds on weekends"}
    if kind == "structured":
        return CallToolResult(is_error=True, structured_content=refusal,
                              content=text("no refunds on weekends"))
    if kind == "text":
        return CallToolResult(is_error=True, content=text(json.dumps(refusal)))
    if kind == "plain_error":
        return CallToolResult(is_error=True, content=text("the ledger is locked"))
    if kind == "other_status":
        return CallToolResult(is_error=True, content=text(json.dumps(
            {"status": "failed", "reason": "the ledger is locked"})))
    if kind == "odd_reason":
        return CallToolResult(is_error=True, content=text("refused"), structured_content={
            "status": "refused", "reason": {"code": 7, "why": ["policy", "line\\nbreak"]}})
    if kind == "no_reason":
        return CallToolResult(is_error=True, content=text('{"status": "refused"}'))
    if kind == "not_an_error":
        return CallToolResult(structured_content=refusal, content=text(json.dumps(refusal)))
    if kind == "hostile":  # as JSON text with \\u escapes: the SDK cannot send a lone surrogate
        return CallToolResult(is_error=True, content=text(json.dumps(
            {"status": "refused", "reason": HOSTILE + "x" * 100_000})))
    if kind == "raises":
        raise ValueError("it broke")
    return CallToolResult(content=text(json.dumps({"done": kind})))


if __name__ == "__main__":
    server.run()
'''


def server_uri(tmp_path: Path) -> str:
    """Write the server; its ``mcp+stdio:`` URI, the hostile text as its argument."""
    (tmp_path / "refuser.py").write_text(textwrap.dedent(SERVER), encoding="utf-8")
    hostile = json.dumps(HOSTILE)  # ASCII: a NUL or a surrogate as a \u escape
    return f"mcp+stdio:{PYTHON} refuser.py {shlex.quote(hostile)}"


def traces(tmp_path: Path, *kinds: str) -> dict[str, Trace]:
    """One trial per kind through the real target, by kind."""
    target = make_target(server_uri(tmp_path), TargetOptions(base_dir=tmp_path))

    async def run() -> list[Trace]:
        await target.start()
        try:
            return [await asyncio.wait_for(target.run(TrialRequest(
                case=Case(id=kind, input={"kind": kind}), n=1, timeout_s=60.0,
                call={"tool": "decide"})), 60.0) for kind in kinds]
        finally:
            await target.close()

    return dict(zip(kinds, asyncio.run(run()), strict=True))


def test_an_error_result_saying_refused_is_a_refusal_structured_or_as_json_text(
        tmp_path: Path) -> None:
    got = traces(tmp_path, "structured", "text", "plain_error", "other_status", "raises",
                 "not_an_error", "no_reason", "ordinary")
    for kind in ("structured", "text"):
        trace = got[kind]
        assert (trace.status, trace.error) == ("refused", "no refunds on weekends"), kind
        assert trace.output == {"status": "refused", "reason": "no refunds on weekends"}
        assert trace.settled is True  # the tool's last word, as an answer is
        assert trace.events[-1].kind == "tool_result" and trace.events[-1].is_error
    # An error that does not say so stays an error, with its text.
    assert (got["plain_error"].status, got["plain_error"].error) == (
        "error", "the ledger is locked")
    assert got["plain_error"].settled is False
    assert got["other_status"].status == "error"
    assert got["raises"].status == "error"  # the SDK's own error result for a raise
    # Only an error result refuses: the same object as an ordinary result is an answer.
    assert (got["not_an_error"].status, got["not_an_error"].error) == ("ok", None)
    assert got["not_an_error"].output["status"] == "refused"
    # A refusal without a reason is a refusal with none.
    assert (got["no_reason"].status, got["no_reason"].error) == ("refused", None)
    assert got["ordinary"].status == "ok"


def test_a_reason_that_is_not_text_is_kept_as_one_line_of_json(tmp_path: Path) -> None:
    (trace,) = traces(tmp_path, "odd_reason").values()
    assert trace.status == "refused"
    assert trace.error == '{"code":7,"why":["policy","line\\nbreak"]}'
    assert trace.output["reason"] == {"code": 7, "why": ["policy", "line\nbreak"]}


def test_a_hostile_reason_is_cut_and_stored_as_text(tmp_path: Path) -> None:
    (trace,) = traces(tmp_path, "hostile").values()
    assert trace.status == "refused" and trace.error is not None
    assert len(trace.error) == REASON_CHARS and trace.error.endswith("…")
    assert trace.error.startswith(MARKUP["inst"])  # kept as text, not read as markup
    assert "lone\ufffdhigh" in trace.error  # a lone surrogate is made storable
    assert "a\x00b" in trace.error  # a NUL is kept: the trace is stored as JSON
    assert len(trace.output["reason"]) > 100_000  # the output keeps all of it
    # It goes through the store's JSON and back.
    assert Trace.model_validate_json(trace.model_dump_json()).error == trace.error


SUITE = """\
suite: refusals/mcp@1
target: {uri}
call: {{tool: decide}}
cases:
  - {{id: refuses-structured, input: {{kind: structured}}, expect: [status: refused]}}
  - {{id: refuses-text, input: {{kind: text}}, expect: [status: refused]}}
  - {{id: refuses-odd, input: {{kind: odd_reason}}, expect: [status: refused]}}
  - {{id: refused-not-ok, input: {{kind: structured}}, expect: [status: ok]}}
  - {{id: error-not-refused, input: {{kind: plain_error}}, expect: [status: refused]}}
  - {{id: answer, input: {{kind: ordinary}}, expect: [status: ok]}}
"""


def test_status_refused_passes_and_status_ok_fails_through_assay_run(tmp_path: Path) -> None:
    (tmp_path / "r.suite.yaml").write_text(SUITE.format(uri=json.dumps(server_uri(tmp_path))),
                                           encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", "r.suite.yaml", "--no-store", "--json", "r.json",
         "--concurrency", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"})
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    report: dict[str, Any] = json.loads((tmp_path / "r.json").read_text())
    outcomes = {case["id"]: case["outcome"] for case in report["cases"]}
    assert outcomes == {"refuses-structured": "pass", "refuses-text": "pass",
                        "refuses-odd": "pass", "refused-not-ok": "fail",
                        "error-not-refused": "fail", "answer": "pass"}
    failed = next(c for c in report["cases"] if c["id"] == "refused-not-ok")
    assert "status is refused, expected ok" in json.dumps(failed)

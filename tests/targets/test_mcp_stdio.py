"""``mcp+stdio:`` against real MCP servers: the in-repo example, ``mcp-server-time``, and
small servers written in tmp_path (crashing, counting their starts, chattering)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from assay.engine import Battery, BatteryOptions
from assay.errors import HarnessFailure
from assay.model import Case, CaseResult, Evidence, Report, Trace
from assay.suites import load_suite_file
from assay.targets import Target, TargetOptions, TrialBroken, TrialRequest, make_target

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
TABLE_SERVER = ROOT / "examples" / "mcp_table" / "table_server.py"
FIXTURES = ROOT / "examples" / "extraction" / "fixtures"
PYTHON = shlex.quote(sys.executable)
TIME_URI = f"mcp+stdio:{PYTHON} -m mcp_server_time --local-timezone UTC"

# A server that counts its starts (one pid per line in starts.txt), crashes on
# demand, naps, answers in plain text, and chatters on stderr and stdout.
TINY = '''
import asyncio, os, sys
from pathlib import Path
from mcp import MCPError
from mcp.server.mcpserver import MCPServer

with Path(__file__).with_name("starts.txt").open("a") as counter:
    counter.write(f"{os.getpid()}\\n")
server = MCPServer("tiny", version="0.1")

@server.tool()
def work(n: int, crash: bool = False) -> dict:
    if crash:
        os._exit(1)
    return {"n": n, "pid": os.getpid()}

@server.tool()
async def nap(seconds: float) -> dict:
    await asyncio.sleep(seconds)
    return {"pid": os.getpid()}

@server.tool()
def plain(word: str):
    return word

@server.tool()
def strict(n: int) -> dict:
    raise MCPError(-32602, "n must be even")

@server.tool()
def chatter(secret: str) -> dict:
    print(f"stderr {secret}", file=sys.stderr, flush=True)
    sys.stdout.write(f"not json {secret}\\n")
    sys.stdout.flush()
    return {"ok": True}

if __name__ == "__main__":
    server.run()
'''


def request(case_input: Any, tool: str | None, n: int = 1, **call: Any) -> TrialRequest:
    """A trial of a case with this input, calling ``tool`` (None: no ``call.tool``)."""
    if tool is not None:
        call["tool"] = tool
    return TrialRequest(case=Case(id=f"c{n}", input=case_input), n=n, timeout_s=20.0,
                        call=call)


def target(uri: str, base_dir: Path, concurrency: int = 4) -> Target:
    """The real target for ``uri``."""
    return make_target(uri, TargetOptions(base_dir=base_dir, concurrency=concurrency))


async def session(tgt: Target, *requests: TrialRequest) -> list[Trace]:
    """Start, run the requests one after another, close."""
    await tgt.start()
    try:
        return [await tgt.run(r) for r in requests]
    finally:
        await tgt.close()


def tiny(tmp_path: Path) -> str:
    """Write the tiny server; its ``mcp+stdio:`` URI (relative: it resolves in tmp_path)."""
    (tmp_path / "tiny.py").write_text(textwrap.dedent(TINY), encoding="utf-8")
    return f"mcp+stdio:{PYTHON} tiny.py"


def starts(tmp_path: Path) -> list[int]:
    """The pids of the tiny servers started so far."""
    path = tmp_path / "starts.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def gone(pid: int, within_s: float = 5.0) -> bool:
    """True once no process ``pid`` exists (reaped, not a zombie)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


# --------------------------------------------------------------------------- the example


def test_the_table_server_answers_with_structured_content_and_the_call_is_recorded() -> None:
    uri = f"mcp+stdio:{PYTHON} table_server.py"
    case_input = {"document": "invoice.csv", "fixture_dir": str(FIXTURES)}
    tgt = target(uri, TABLE_SERVER.parent)
    (trace,) = asyncio.run(session(tgt, request(case_input, "extract_table")))
    assert trace.status == "ok" and trace.error is None
    assert trace.output["columns"] == ["item", "qty", "total"]
    assert trace.output["rows"][2] == {"item": "Gizmo", "qty": "3", "total": "42.00"}
    call, result = trace.events
    assert (call.kind, call.name, call.arguments) == ("tool_call", "extract_table", case_input)
    assert (result.kind, result.name, result.is_error) == ("tool_result", "extract_table", False)
    assert result.result == trace.output and result.call_id == call.call_id
    assert (trace.steps, trace.settled) == (1, True)
    assert trace.evidence_for("output") == Evidence.OBSERVED
    assert trace.evidence_for("tool_calls") == Evidence.OBSERVED
    for fact in ("cost", "asks", "skills", "steps", "exit_code"):
        assert trace.evidence_for(fact) == Evidence.UNAVAILABLE
    assert trace.facets["harness"] == "mcp+stdio"
    assert trace.facets["server"] == "table-extraction/1.0.0"
    assert tgt.facets == trace.facets
    assert tgt.digest().startswith("sha256:")


def test_a_tool_error_is_status_error_with_its_text() -> None:
    uri = f"mcp+stdio:{PYTHON} table_server.py"
    tgt = target(uri, TABLE_SERVER.parent)
    (trace,) = asyncio.run(session(tgt, request({"document": "nope.csv"}, "extract_table")))
    assert trace.status == "error"
    assert trace.error is not None and "no such document: nope.csv" in trace.error
    assert trace.events[-1].kind == "tool_result" and trace.events[-1].is_error
    assert trace.settled is False


# --------------------------------------------------------------------------- mcp-server-time


def test_mcp_server_time_from_pypi(tmp_path: Path) -> None:
    tgt = target(TIME_URI, tmp_path)
    now, bad_zone = asyncio.run(session(
        tgt,
        request({"timezone": "UTC"}, "get_current_time"),
        request({"timezone": "Mars/Olympus_Mons"}, "get_current_time", n=2),
    ))
    assert now.status == "ok"
    assert now.output["timezone"] == "UTC" and now.output["datetime"].endswith("+00:00")
    assert now.facets["server"].startswith("mcp-time/")
    # The tool's own failure: isError.
    assert bad_zone.status == "error" and "Invalid timezone" in (bad_zone.error or "")
    assert bad_zone.events[-1].kind == "tool_result"
    # A tool the server does not have is never called: the suite is wrong, not the agent.
    with pytest.raises(HarnessFailure) as caught:
        asyncio.run(session(tgt, request({"timezone": "UTC"}, "get_the_weather", n=3)))
    assert "call.tool 'get_the_weather' is not a tool of this MCP server" in str(caught.value)
    assert "it offers: convert_time, get_current_time" in str(caught.value)


def test_a_json_rpc_error_is_a_protocol_error_recorded_apart(tmp_path: Path) -> None:
    tgt = target(tiny(tmp_path), tmp_path)
    (refused,) = asyncio.run(session(tgt, request({"n": 1}, "strict")))
    assert refused.status == "error"
    assert refused.error == "protocol error: n must be even (JSON-RPC -32602)"
    assert [e.kind for e in refused.events] == ["tool_call", "error"]
    assert refused.output is None and refused.settled is False


# --------------------------------------------------------------------------- outputs


def test_text_content_is_decoded_when_it_is_json_and_kept_as_text_otherwise(
        tmp_path: Path) -> None:
    tgt = target(tiny(tmp_path), tmp_path)
    word, number, obj = asyncio.run(session(
        tgt,
        request({"word": "hello"}, "plain"),
        request({"word": "42"}, "plain", n=2),
        request({"word": '{"a": [1, null]}'}, "plain", n=3),
    ))
    assert word.output == "hello"
    assert number.output == 42
    assert obj.output == {"a": [1, None]}


def test_an_input_that_is_not_a_mapping_breaks_the_trial(tmp_path: Path) -> None:
    tgt = target(tiny(tmp_path), tmp_path)
    with pytest.raises(TrialBroken, match="the case input is a list; an MCP tool takes"):
        asyncio.run(session(tgt, request([1, 2], "work")))


def test_a_suite_without_call_tool_is_a_harness_failure(tmp_path: Path) -> None:
    tgt = target(tiny(tmp_path), tmp_path)
    with pytest.raises(HarnessFailure, match=r"names no tool.*call: \{tool: NAME\}"):
        asyncio.run(session(tgt, request({"n": 1}, None)))
    with pytest.raises(HarnessFailure, match="'fersh'; did you mean 'fresh'"):
        asyncio.run(session(tgt, request({"n": 1}, "work", fersh=True)))
    # Keys other targets read are left alone: one suite may run against several.
    (trace,) = asyncio.run(session(tgt, request({"n": 1}, "work", max_steps=5)))
    assert trace.output["n"] == 1


# --------------------------------------------------------------------------- starting


def test_a_command_that_does_not_exist_is_a_harness_failure(tmp_path: Path) -> None:
    for uri, said in [("mcp+stdio:no-such-mcp-server --flag", "'no-such-mcp-server' not found"),
                      ("mcp+stdio:./missing/server.sh", "is not an executable file")]:
        with pytest.raises(HarnessFailure, match=said):
            asyncio.run(target(uri, tmp_path).start())


def test_a_server_that_exits_at_start_is_a_harness_failure_with_its_stderr(
        tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import sys\nsys.exit('cannot read my config')\n")
    tgt = target(f"mcp+stdio:{PYTHON} broken.py", tmp_path)
    with pytest.raises(HarnessFailure) as caught:
        asyncio.run(tgt.start())
    assert "did not start" in str(caught.value)
    assert "cannot read my config" in str(caught.value)
    assert caught.value.exit_code == 3


def test_a_server_that_never_answers_the_handshake_is_stopped_and_a_harness_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("assay.targets.mcp.START_TIMEOUT_S", 1.0)
    (tmp_path / "silent.py").write_text(
        "import os, pathlib, time\n"
        "pathlib.Path('starts.txt').write_text(str(os.getpid()))\n"
        "time.sleep(60)\n")
    tgt = target(f"mcp+stdio:{PYTHON} silent.py", tmp_path)
    with pytest.raises(HarnessFailure, match="no answer to the MCP handshake within 1s"):
        asyncio.run(tgt.start())
    (pid,) = starts(tmp_path)
    assert gone(pid)


# --------------------------------------------------------------------------- lifetimes


def battery_report(tmp_path: Path, uri: str, cases: str, concurrency: int = 1,
                   call: str = "{tool: work}",
                   traces: dict[tuple[str, int], Any] | None = None) -> Report:
    """A real battery of a suite with these cases against ``uri``."""
    suite = tmp_path / "s.suite.yaml"
    suite.write_text(f"suite: t/mcp@1\ncall: {call}\ncases:\n{textwrap.indent(cases, '  ')}")
    tgt = target(uri, tmp_path, concurrency)
    made = Battery(load_suite_file(suite), tgt, BatteryOptions(concurrency=concurrency))
    if traces is not None:  # the report keeps no trace; the battery hands each one on
        made.on_result = lambda case, result: traces.__setitem__((case.id, result.n),
                                                                 result.trace)
    return asyncio.run(made.run())


CASES = "".join(
    f"- id: c{i}\n  input: {{n: {i}{', crash: true' if i == 3 else ''}}}\n"
    f"  expect: [status: ok, {{path: $.n, equals: {i}}}]\n"
    for i in range(1, 7)
)


def test_a_server_that_dies_mid_battery_breaks_that_trial_and_is_restarted(
        tmp_path: Path) -> None:
    report = battery_report(tmp_path, tiny(tmp_path), CASES)
    outcomes = {case.id: case.outcome for case in report.cases}
    assert outcomes == {"c1": "pass", "c2": "pass", "c3": "broken",
                        "c4": "pass", "c5": "pass", "c6": "pass"}
    crashed = next(case for case in report.cases if case.id == "c3").trials[0]
    assert crashed.reason is not None and "MCP server connection lost" in crashed.reason
    assert "restarted" in crashed.reason
    pids = starts(tmp_path)
    assert len(pids) == 2  # the first server, and the one after the crash
    assert all(gone(pid) for pid in pids)


def test_shared_by_default_and_fresh_per_trial_on_request(tmp_path: Path) -> None:
    cases = "".join(f"- id: c{i}\n  input: {{n: {i}}}\n  expect: [status: ok]\n"
                    for i in range(1, 5))
    uri = tiny(tmp_path)
    assert battery_report(tmp_path, uri, cases, concurrency=2).scores.passed
    assert len(starts(tmp_path)) == 1
    (tmp_path / "starts.txt").unlink()
    report = battery_report(tmp_path, uri, cases, concurrency=2,
                            call="{tool: work, fresh: true}")
    assert report.scores.passed
    pids = starts(tmp_path)
    assert len(pids) == 1 + 4  # the one start() checks, then one per trial
    assert all(gone(pid) for pid in pids)


def test_a_tool_that_hangs_keeps_its_call_and_leaves_the_shared_server_serving(
        tmp_path: Path) -> None:
    cases = ("- {id: slow, input: {seconds: 30}, timeout_s: 1, expect: [status: ok]}\n"
             "- {id: quick, input: {seconds: 0}, expect: [status: ok]}\n")
    traces: dict[tuple[str, int], Any] = {}
    report = battery_report(tmp_path, tiny(tmp_path), cases, call="{tool: nap}", traces=traces)
    slow, quick = report.cases
    assert isinstance(slow, CaseResult)
    # The call was made before the hang: the trial ran, timed out, and is graded.
    (trial,) = slow.trials
    assert slow.outcome == "fail" and trial.outcome == "fail"
    trace = traces["slow", 1]
    assert trace is not None and trace.partial
    assert trace.status == "timeout" and trace.error == "timed out after 1s"
    assert [(e.kind, e.name, e.arguments) for e in trace.events] == [
        ("tool_call", "nap", {"seconds": 30})]
    assert trial.verdicts[0].outcome == "fail" and "timeout" in trial.verdicts[0].note
    assert quick.outcome == "pass"
    assert len(starts(tmp_path)) == 1


def test_one_shared_server_carries_concurrent_calls(tmp_path: Path) -> None:
    tgt = target(tiny(tmp_path), tmp_path)

    async def go() -> tuple[list[Trace], float]:
        await tgt.start()
        try:
            began = time.perf_counter()
            traces = await asyncio.gather(*(tgt.run(request({"seconds": 0.5}, "nap", n=i))
                                            for i in range(1, 5)))
            return list(traces), time.perf_counter() - began
        finally:
            await tgt.close()

    traces, took = asyncio.run(go())
    assert {t.status for t in traces} == {"ok"}
    assert len({t.output["pid"] for t in traces}) == 1
    assert took < 1.5  # four naps of 0.5 s side by side, not one after another


def test_close_leaves_no_server_process_behind(tmp_path: Path) -> None:
    tgt = target(tiny(tmp_path), tmp_path)

    async def go() -> None:
        await tgt.start()
        try:
            # A call still in flight when the battery stops must not keep the server alive.
            stuck = asyncio.ensure_future(tgt.run(request({"seconds": 30}, "nap")))
            await asyncio.sleep(0.3)
            stuck.cancel()
        finally:
            await tgt.close()

    began = time.perf_counter()
    asyncio.run(go())
    assert time.perf_counter() - began < 10
    (pid,) = starts(tmp_path)
    assert gone(pid)
    children = [p for p in Path("/proc").glob("[0-9]*")
                if _parent(p) == os.getpid() and "tiny.py" in _cmdline(p)]
    assert children == []


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- leaks


def test_what_the_server_writes_to_stderr_stays_out_of_assays_output(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    canary = "CANARY-7f3a-hidden-input"
    tgt = target(tiny(tmp_path), tmp_path)
    (trace,) = asyncio.run(session(tgt, request({"secret": canary}, "chatter")))
    assert trace.status == "ok"
    out, err = capfd.readouterr()
    assert canary not in out and canary not in err


# A server written without any SDK, in the handshake era (2025-11-25): it
# answers server/discover with "method not found" (the client falls back to
# initialize) and writes a line that is not JSON-RPC before each answer.
RAW = '''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "0.0.1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "say", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        print("not JSON-RPC: " + json.dumps(msg["params"].get("arguments")), flush=True)
        result = {"content": [{"type": "text", "text": "plain words"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": mid,
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
'''


def test_a_handshake_era_server_without_sdk_and_with_junk_on_stdout(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # The SDK logs an unparsable line with its content; assay keeps that log
    # out of its own stderr, since the line may quote a hidden case.
    canary = "CANARY-91c2-hidden-input"
    (tmp_path / "raw.py").write_text(textwrap.dedent(RAW), encoding="utf-8")
    tgt = target(f"mcp+stdio:{PYTHON} raw.py", tmp_path)
    (trace,) = asyncio.run(session(tgt, request({"secret": canary}, "say")))
    assert (trace.status, trace.output) == ("ok", "plain words")
    assert trace.facets["server"] == "raw/0.0.1"
    assert trace.facets["mcp_protocol"] == "2025-11-25"
    out, err = capfd.readouterr()
    assert canary not in out and canary not in err


# --------------------------------------------------------------------------- end to end

LEAKY = '''
import os, sys
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("leaky", version="1.0")

@server.tool()
def echo(text: str) -> dict:
    print("server saw", text, file=sys.stderr, flush=True)
    if "fail" in text:
        raise ToolError("cannot handle " + text)
    if "crash" in text:
        os._exit(1)
    return {"echo": text}

if __name__ == "__main__":
    server.run()
'''


def test_a_hidden_case_through_an_mcp_server_leaks_nowhere(tmp_path: Path) -> None:
    canary = "CANARY-5d1e"
    (tmp_path / "leaky.py").write_text(textwrap.dedent(LEAKY), encoding="utf-8")
    (tmp_path / "hidden").mkdir()
    (tmp_path / "leak.suite.yaml").write_text(textwrap.dedent(f"""
        suite: leak/mcp@1
        target: mcp+stdio:{PYTHON} leaky.py
        call: {{tool: echo}}
        hidden: hidden/
        cases:
          - {{id: public-one, input: {{text: PUBLIC}}, expect: [{{path: $.echo, equals: PUBLIC}}]}}
    """), encoding="utf-8")
    (tmp_path / "hidden" / "cases.yaml").write_text(textwrap.dedent(f"""
        - {{id: {canary}-a, input: {{text: {canary}-pass}}, expect: [status: ok]}}
        - {{id: {canary}-b, input: {{text: {canary}-fail}}, expect: [status: ok]}}
        - {{id: {canary}-c, input: {{text: {canary}-crash}}, expect: [status: ok]}}
    """), encoding="utf-8")
    # One trial at a time: a crash breaks every trial in flight on the shared server.
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", ".", "--json", "r.json", "--concurrency", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"})
    report_text = (tmp_path / "r.json").read_text()
    for surface in (done.stdout, done.stderr, report_text):
        assert canary not in surface
    assert done.returncode == 1
    counts = json.loads(report_text)["counts"]["hidden"]
    assert (counts["total"], counts["passed"], counts["failed"], counts["broken"]) == (3, 1, 1, 1)


@pytest.mark.parametrize(("server", "call", "offered"), [
    (f"{PYTHON} {shlex.quote(str(TABLE_SERVER))}", "{tool: extract_tabel}", "extract_table"),
    (f"{PYTHON} -m mcp_server_time --local-timezone UTC",
     "{tool: get_the_weather, fresh: true}", "convert_time, get_current_time"),
])
def test_a_call_tool_the_server_does_not_offer_stops_the_run_with_exit_3(
        tmp_path: Path, server: str, call: str, offered: str) -> None:
    """Called, a misspelt tool is an error answer, and `status: error` would pass on it."""
    (tmp_path / "typo.suite.yaml").write_text(textwrap.dedent(f"""\
        suite: typo/mcp@1
        target: mcp+stdio:{server}
        call: {call}
        cases:
          - {{id: missing-document, input: {{document: nothing.csv}}, expect: [status: error]}}
    """), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", ".", "--no-store", "--json", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "300"})
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 3, said
    tool = call.split(",")[0].removeprefix("{tool: ").rstrip("}")
    assert f"call.tool '{tool}' is not a tool of this MCP server" in said
    assert f"it offers: {offered}" in said
    assert "PASSED" not in said


def test_start_refuses_a_call_tool_the_server_does_not_offer(tmp_path: Path) -> None:
    """Given the suite's call, the target refuses at start, before any trial."""
    uri = tiny(tmp_path)
    options = TargetOptions(base_dir=tmp_path, call={"tool": "wrok"})


    async def refused() -> None:
        with pytest.raises(HarnessFailure, match=r"call.tool 'wrok' .*did you mean 'work'.*"
                                                 r"it offers: chatter, nap, plain, strict, work"):
            await make_target(uri, options).start()
        (pid,) = starts(tmp_path)
        assert gone(pid)  # the failed start stopped its server (nobody calls close())

    asyncio.run(refused())
    good = make_target(uri, TargetOptions(base_dir=tmp_path, call={"tool": "work"}))
    (trace,) = asyncio.run(session(good, request({"n": 2}, "work")))
    assert trace.output["n"] == 2


@pytest.mark.parametrize("fresh", [False, True])
def test_a_pin_is_recorded_as_not_honoured_by_an_mcp_server(tmp_path: Path,
                                                            fresh: bool) -> None:
    case = Case(id="p", input={"n": 1}, model="gpt-x", invocation="explicit")
    pinned = TrialRequest(case=case, n=1, timeout_s=20.0, call={"tool": "work", "fresh": fresh})
    (trace,) = asyncio.run(session(target(tiny(tmp_path), tmp_path), pinned))
    assert trace.facets["model_pin"] == (
        "gpt-x (not honoured: an MCP server picks its own model and effort)")
    assert trace.facets["invocation"] == "explicit"
    assert trace.facets["harness"] == "mcp+stdio"

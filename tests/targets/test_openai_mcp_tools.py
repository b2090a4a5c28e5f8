"""``openai:MODEL`` with a tool fixture that names an MCP server (``mcp:``).

Real parts only: the loopback stub model of examples/support/stub_model.py, and
a small ``MCPServer`` written to tmp_path and started over stdio by assay.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shlex
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assay.errors import HarnessFailure, SuiteError
from assay.model import Case, Trace
from assay.suites import load_suite_file
from assay.suites.fixtures import load_tool_fixture
from assay.targets import Target, TargetOptions, TrialBroken, TrialRequest, make_target

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
PYTHON = shlex.quote(sys.executable)

# Counts its starts (one pid per line in starts.txt): the server is shared across trials.
SERVER = '''
import os
from pathlib import Path
from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

with Path(__file__).with_name("starts.txt").open("a") as counter:
    counter.write(f"{os.getpid()}\\n")
server = MCPServer("crm", version="0.1")

@server.tool(description="Look a customer up")
def lookup(customer: str) -> dict:
    if customer == "C-404":
        raise ToolError(f"no customer {customer}")
    if customer == "C-rpc":
        raise MCPError(-32602, "customer ids are C-digits")
    if customer == "C-crash":
        os._exit(1)
    return {"customer": customer, "tier": "gold"}

if __name__ == "__main__":
    server.run()
'''


def _load_stub() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "assay_example_stub_model_mcp", ROOT / "examples" / "support" / "stub_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stub_model = _load_stub()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASSAY_OPENAI_BASE_URL", "ASSAY_PRICES", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model() -> Iterator[Any]:
    """The stub model, scripted: a lookup of the customer named in the prompt, then an answer."""

    def script(body: dict[str, Any]) -> dict[str, Any]:
        customer = stub_model.first_user_text(body)
        if stub_model.model_calls_so_far(body) == 0:
            return {"tool_calls": [{"name": "lookup", "arguments": {"customer": customer},
                                    "id": "call_1"}]}
        return {"content": "done"}

    server = stub_model.StubServer(script)
    yield server
    server.close()


def fixture_file(folder: Path, text: str) -> Path:
    (folder / "server.py").write_text(SERVER, encoding="utf-8")
    path = folder / "tools.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


FIXTURE = f"""\
mcp: ["mcp+stdio:{PYTHON} server.py"]
tools:
  - name: erp.refund
    parameters: {{type: object, properties: {{order: {{type: string}}}}}}
    result: {{ok: true}}
"""


def trial(path: Path, customer: str, n: int = 1) -> TrialRequest:
    return TrialRequest(case=Case(id="c1", input=customer), n=n, timeout_s=20.0,
                        fixture=path, tools=load_tool_fixture(path))


def run(target: Target, *requests: TrialRequest) -> list[Trace | str]:
    """Each trial's trace, or the reason it broke."""

    async def go() -> list[Trace | str]:
        await target.start()
        done: list[Trace | str] = []
        try:
            for request in requests:
                try:
                    done.append(await target.run(request))
                except TrialBroken as exc:
                    done.append(str(exc))
        finally:
            await target.close()
        return done

    return asyncio.run(go())


def openai_target(model: Any, folder: Path) -> Target:
    return make_target("openai:test-model", TargetOptions(base_dir=folder, base_url=model.url))


def tool_message(body: dict[str, Any]) -> dict[str, Any]:
    [message] = [m for m in body["messages"] if m["role"] == "tool"]
    return message


def test_an_mcp_tool_is_offered_called_recorded_and_its_result_goes_to_the_model(
        model: Any, tmp_path: Path) -> None:
    path = fixture_file(tmp_path, FIXTURE)
    first, second = run(openai_target(model, tmp_path), trial(path, "C-1"), trial(path, "C-2", 2))
    assert isinstance(first, Trace) and isinstance(second, Trace)
    assert (first.status, first.output, first.steps) == ("ok", "done", 2)
    call, result, _ = first.events
    assert (call.kind, call.name, call.arguments, call.call_id) == (
        "tool_call", "lookup", {"customer": "C-1"}, "call_1")
    assert (result.kind, result.result, result.is_error) == (
        "tool_result", {"customer": "C-1", "tier": "gold"}, False)
    assert second.events[1].result == {"customer": "C-2", "tier": "gold"}
    declared = {t["function"]["name"]: t["function"] for t in model.seen[0]["tools"]}
    assert set(declared) == {"erp.refund", "lookup"}
    assert declared["lookup"]["description"] == "Look a customer up"
    assert declared["lookup"]["parameters"]["required"] == ["customer"]
    told = tool_message(model.seen[1])
    assert told["tool_call_id"] == "call_1"
    assert json.loads(told["content"]) == {"customer": "C-1", "tier": "gold"}
    # One server for both trials, stopped with the target.
    assert len((tmp_path / "starts.txt").read_text().split()) == 1


def test_a_tool_error_or_a_protocol_error_goes_back_to_the_model_as_an_error_result(
        model: Any, tmp_path: Path) -> None:
    path = fixture_file(tmp_path, FIXTURE)
    tool_error, protocol_error = run(openai_target(model, tmp_path), trial(path, "C-404"),
                                     trial(path, "C-rpc", 2))
    assert isinstance(tool_error, Trace) and isinstance(protocol_error, Trace)
    assert (tool_error.status, protocol_error.status) == ("ok", "ok")  # the model went on
    result = tool_error.events[1]
    assert result.is_error and "no customer C-404" in json.dumps(result.result)
    result = protocol_error.events[1]
    assert result.is_error and result.result == (
        "protocol error: customer ids are C-digits (JSON-RPC -32602)")
    told = [tool_message(body)["content"] for body in model.seen if len(body["messages"]) > 1]
    assert told[0].startswith("error: ") and "no customer C-404" in told[0]
    assert told[1] == "error: protocol error: customer ids are C-digits (JSON-RPC -32602)"


def test_a_server_that_dies_breaks_the_trial_and_the_next_one_reconnects(
        model: Any, tmp_path: Path) -> None:
    path = fixture_file(tmp_path, FIXTURE)
    broken, after = run(openai_target(model, tmp_path), trial(path, "C-crash"),
                        trial(path, "C-3", 2))
    assert isinstance(broken, str) and "connection lost" in broken
    assert isinstance(after, Trace) and after.events[1].result["customer"] == "C-3"
    assert len((tmp_path / "starts.txt").read_text().split()) == 2


@pytest.mark.parametrize(("change", "said"), [
    (("erp.refund", "lookup"), "and so does a tool of its `tools:`"),
    (("server.py\"]", "server.py\", \"mcp+stdio:{PYTHON} ./server.py\"]"),
     "and so does the MCP server mcp+stdio:"),
])
def test_a_name_given_twice_is_a_harness_failure(
        model: Any, tmp_path: Path, change: tuple[str, str], said: str) -> None:
    old, new = change
    path = fixture_file(tmp_path, FIXTURE.replace(old, new.format(PYTHON=PYTHON)))
    with pytest.raises(HarnessFailure, match="lists a tool 'lookup'") as caught:
        run(openai_target(model, tmp_path), trial(path, "C-1"))
    assert said in str(caught.value) and str(path) in str(caught.value)


def test_a_server_that_cannot_start_is_a_harness_failure(model: Any, tmp_path: Path) -> None:
    path = fixture_file(tmp_path, FIXTURE.replace(f"{PYTHON} server.py", "no-such-server-q7"))
    with pytest.raises(HarnessFailure, match="MCP server mcp\\+stdio:no-such-server-q7: "
                                             "command 'no-such-server-q7' not found on PATH"):
        run(openai_target(model, tmp_path), trial(path, "C-1"))


def test_a_bad_mcp_entry_is_refused_when_the_suite_loads(tmp_path: Path) -> None:
    path = fixture_file(tmp_path, 'tools: []\nmcp:\n  - "mcp+stdio:python server.py"\n'
                                  '  - "stdio:python server.py"\n')
    suite = tmp_path / "t.suite.yaml"
    suite.write_text("suite: ns/t@1\ncases: [{id: a, input: x, fixture: tools.yaml}]\n",
                     encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        load_suite_file(suite)
    assert (caught.value.file, caught.value.line) == (str(path.resolve()), 4)
    assert caught.value.message.startswith("mcp.1: an MCP server is mcp+stdio:…"), (
        caught.value.message)

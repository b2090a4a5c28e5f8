"""``assay proxy`` between the SDK's own client and real MCP servers (``mcp-server-time``,
the in-repo table server), each a real subprocess: what comes back, what is sampled,
graded and queued, what a full buffer drops, and what a bad upstream is told."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import Project

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
PYTHON = shlex.quote(sys.executable)
TIME = f"mcp+stdio:{PYTHON} -m mcp_server_time --local-timezone UTC"
TABLE_SERVER = ROOT / "examples" / "mcp_table" / "table_server.py"
TABLE = f"mcp+stdio:{PYTHON} {shlex.quote(str(TABLE_SERVER))}"
SUMMARY = re.compile(
    r"proxy: (?P<calls>\d+) call\(s\), (?P<sampled>\d+) sampled \((?P<percent>[\d.]+)%, "
    r"seed (?P<seed>\d+)\), (?P<graded>\d+) graded, (?P<failed>\d+) failed, "
    r"(?P<inconclusive>\d+) inconclusive, (?P<queued>\d+) queued, (?P<dropped>\d+) dropped"
    r"(?:, (?P<abandoned>\d+) abandoned at exit)?")

TIME_SUITE = """\
suite: demo/time.proxy@1
call: {tool: get_current_time}
cases:
  - id: utc
    input: {timezone: UTC}
    expect:
      - status: ok
      - never_calls: [convert_time]
      - {path: $.timezone, equals: UTC}
"""

# A grader that holds the worker until the test creates ``release`` beside it.
SLOW_GRADER = """\
import time
from pathlib import Path

RELEASE = Path(__file__).with_name("release")


def wait(trace):
    while not RELEASE.exists():
        time.sleep(0.01)
    return "pass"
"""

SLOW_SUITE = """\
suite: demo/time.slow@1
cases:
  - id: any
    input: {timezone: UTC}
    expect:
      - grader: slow_grader:wait
"""


@dataclass
class Ended:
    """What the proxy said on stderr once its host had gone."""

    stderr: str

    def summary(self) -> dict[str, int]:
        found = SUMMARY.search(self.stderr)
        assert found is not None, self.stderr
        return {k: int(float(v)) for k, v in found.groupdict().items() if v is not None}


@asynccontextmanager
async def host(project: Project, upstream: str, *flags: str,
               ended: list[Ended]) -> AsyncIterator[Any]:
    """The SDK's client launching ``assay proxy`` as its server, as a host would.

    When the block ends the client closes the proxy's input; what the proxy
    wrote to stderr is appended to ``ended``.
    """
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "assay", "proxy", "--upstream", upstream, *flags],
        env={**os.environ, "COLUMNS": "200"}, cwd=project.root)
    log_path = project.root / "proxy-stderr.txt"
    with open(log_path, "w", encoding="utf-8") as log:
        async with Client(stdio_client(params, errlog=log), cache=None) as client:
            yield client
    ended.append(Ended(log_path.read_text(encoding="utf-8")))


@asynccontextmanager
async def direct(upstream: str) -> AsyncIterator[Any]:
    """The same server without the proxy, for comparison."""
    from mcp import Client, StdioServerParameters

    argv = shlex.split(upstream.removeprefix("mcp+stdio:"))
    async with Client(StdioServerParameters(command=argv[0], args=argv[1:]),
                      cache=None) as client:
        yield client


async def outcome(call: Callable[[], Awaitable[Any]]) -> tuple[str, Any]:
    """A call's result, or its JSON-RPC error, in a form two servers' answers compare in."""
    from mcp import MCPError

    try:
        result = await call()
    except MCPError as error:
        return "error", (error.code, error.message, error.data)
    return "result", result.model_dump(mode="json")


def test_calls_come_back_unchanged_and_a_forbidden_call_is_queued(project: Project) -> None:
    project.write("time.suite.yaml", TIME_SUITE)
    ended: list[Ended] = []

    async def both() -> tuple[list[Any], list[Any]]:
        asks: list[Callable[[Any], Awaitable[Any]]] = [
            lambda c: c.list_tools(),
            lambda c: c.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                   "target_timezone": "Asia/Tokyo"}),
            lambda c: c.call_tool("get_current_time", {"timezone": "No/Such_Zone"}),
            lambda c: c.call_tool("no_such_tool", {}),
        ]
        async with host(project, TIME, "--sample", "100", "--seed", "7", "--suite",
                        "time.suite.yaml", ended=ended) as proxied:
            via = [await outcome(lambda ask=ask: ask(proxied)) for ask in asks]
            now = await proxied.call_tool("get_current_time", {"timezone": "UTC"})
            assert now.structured_content["timezone"] == "UTC"
        async with direct(TIME) as upstream:
            straight = [await outcome(lambda ask=ask: ask(upstream)) for ask in asks]
        return via, straight

    via, straight = asyncio.run(both())
    assert via == straight  # tools, a result, a tool error and a JSON-RPC error alike
    assert via[2][1]["is_error"] is True and via[3][0] == "error"

    # convert_time is forbidden; the bad zone is a tool error (status: ok fails); the
    # unknown tool is not the suite's tool, so only never_calls grades it (and passes).
    counts = ended[0].summary()
    assert counts == {"calls": 4, "sampled": 4, "percent": 100, "seed": 7, "graded": 4,
                      "failed": 2, "inconclusive": 0, "queued": 2, "dropped": 0}
    assert "Traceback" not in ended[0].stderr

    listed = project.assay("review", "--list")
    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    assert len(lines) == 2
    assert "proxy" in lines[0] and "convert_time (call 1)" in lines[0]
    assert "never_calls: called convert_time" in lines[0]
    assert "get_current_time (call 2)" in lines[1] and "status" in lines[1]

    # The queued trace is the call as it happened: arguments and the upstream's result.
    from assay.store.database import open_store
    from assay.store.reviews.items import item_evidence, list_items

    store = open_store(f"sqlite:///{project.root / '.assay' / 'assay.db'}")
    try:
        first = list_items(store)[0]
        trace = json.loads(item_evidence(store, first).trace or b"null")
    finally:
        store.close()
    assert first.source == "proxy" and first.suite_id == "demo/time.proxy@1"
    call, result = trace["events"]
    assert call["name"] == "convert_time" and call["arguments"]["target_timezone"] == "Asia/Tokyo"
    assert result["result"] == via[1][1]["structured_content"]
    assert trace["facets"]["sample_seed"] == "7" and trace["facets"]["server"].startswith(
        "mcp-time/")


def test_sample_zero_forwards_and_records_nothing(project: Project) -> None:
    ended: list[Ended] = []
    inline = {"text": "sku;price\nA-1;3,5\n"}
    missing = {"document": "no-such-file.csv"}

    async def both() -> tuple[list[Any], list[Any]]:
        async with host(project, TABLE, "--sample", "0", ended=ended) as proxied:
            via = [await outcome(proxied.list_tools),
                   await outcome(lambda: proxied.call_tool("extract_table", inline)),
                   await outcome(lambda: proxied.call_tool("extract_table", missing))]
        async with direct(TABLE) as upstream:
            straight = [await outcome(upstream.list_tools),
                        await outcome(lambda: upstream.call_tool("extract_table", inline)),
                        await outcome(lambda: upstream.call_tool("extract_table", missing))]
        return via, straight

    via, straight = asyncio.run(both())
    assert via == straight
    assert via[1][1]["structured_content"]["rows"] == [{"sku": "A-1", "price": "3.50"}]
    assert via[2][1]["is_error"] is True
    counts = ended[0].summary()
    assert (counts["calls"], counts["sampled"], counts["graded"], counts["queued"]) == (2, 0, 0, 0)
    assert not (project.root / ".assay").exists()  # no store was even opened


def test_a_full_buffer_drops_and_counts_while_calls_return(project: Project) -> None:
    project.write("slow.suite.yaml", SLOW_SUITE)
    project.write("slow_grader.py", SLOW_GRADER)
    ended: list[Ended] = []

    async def calls() -> None:
        async with host(project, TIME, "--sample", "100", "--seed", "1", "--buffer", "1",
                        "--suite", "slow.suite.yaml", ended=ended) as proxied:
            for _ in range(5):
                answer = await proxied.call_tool("get_current_time", {"timezone": "UTC"})
                assert answer.is_error is False
            # Every call has come back while the grader is still held: grading is off
            # the call's path. Only now is it let go.
            assert not (project.root / "release").exists()
            (project.root / "release").touch()

    asyncio.run(calls())
    counts = ended[0].summary()
    # One sample in the grader and one in the buffer at most: of five, three or more
    # were dropped; the rest were graded before the proxy left.
    assert counts["calls"] == counts["sampled"] == 5
    assert counts["dropped"] >= 3
    assert counts["graded"] + counts["dropped"] == 5
    assert "abandoned" not in counts and "stopped" not in ended[0].stderr


def test_a_host_that_stops_the_proxy_gets_its_summary_with_the_rest_abandoned(
        project: Project) -> None:
    # The grader is never let go. The host closes the proxy's input, waits its grace
    # period, then sends SIGTERM (the SDK's client does, as the MCP spec says): the proxy
    # stops grading and still says what happened.
    project.write("slow.suite.yaml", SLOW_SUITE)
    project.write("slow_grader.py", SLOW_GRADER)
    ended: list[Ended] = []

    async def calls() -> None:
        async with host(project, TIME, "--sample", "100", "--suite", "slow.suite.yaml",
                        ended=ended) as proxied:
            await proxied.call_tool("get_current_time", {"timezone": "UTC"})

    asyncio.run(calls())
    counts = ended[0].summary()
    assert (counts["sampled"], counts["graded"], counts.get("abandoned")) == (1, 0, 1)
    assert "stopped: signal SIGTERM" in ended[0].stderr


def test_hidden_cases_are_never_read_and_hostile_names_are_shown_inert(
        project: Project) -> None:
    # The hidden case forbids the very tool the host calls; only public checks apply,
    # so that call passes and nothing of the hidden case shows anywhere.
    project.write("time.suite.yaml", """\
        suite: demo/time.hostile@1
        hidden: hidden/
        cases:
          - id: ok
            input: {timezone: UTC}
            expect:
              - status: ok
        """)
    project.write("hidden/secret.yaml", """\
        id: HIDDEN-CANARY-case
        input: {timezone: HIDDEN-CANARY-input}
        expect:
          - never_calls: [get_current_time]
          - not_contains: HIDDEN-CANARY-text
        """)
    hostile = "\x1b[2J[bold red]evil[/]"
    ended: list[Ended] = []

    async def calls() -> None:
        async with host(project, TIME, "--sample", "100", "--suite", "time.suite.yaml",
                        ended=ended) as proxied:
            await proxied.call_tool("get_current_time", {"timezone": "UTC"})
            await outcome(lambda: proxied.call_tool(hostile, {"x": hostile}))

    asyncio.run(calls())
    counts = ended[0].summary()
    assert (counts["graded"], counts["failed"], counts["queued"]) == (2, 1, 1)
    listed = project.assay("review", "--list")
    exported = project.assay("review", "--export", "-")
    assert listed.code == exported.code == 0
    assert "\x1b" not in listed.out and "␛[2J[bold red]evil[/] (call 2)" in listed.out
    assert json.loads(exported.out)["case"] == f"{hostile} (call 2)"  # data, as it was
    for text in (ended[0].stderr, listed.out, listed.err, exported.out):
        assert "HIDDEN-CANARY" not in text


@pytest.mark.parametrize(("upstream", "code", "says"), [
    ("mcp+http://127.0.0.1:9/mcp", 2, "give mcp+stdio:COMMAND"),
    ("stdio:python server.py", 2, "an MCP server is"),
    ("mcp+stdio:", 2, "give the command that starts the server"),
    ("mcp+stdio:assay-no-such-server --flag", 3, "'assay-no-such-server' not found on PATH"),
    (f"mcp+stdio:{PYTHON} -c \"import sys; print('boot failed', file=sys.stderr); sys.exit(4)\"",
     3, "the MCP server did not start"),
])
def test_a_bad_upstream_is_refused_with_the_reason(project: Project, upstream: str, code: int,
                                                   says: str) -> None:
    done = project.assay("proxy", "--upstream", upstream, "--sample", "0")
    assert done.code == code, done.err
    assert says in done.err and "Traceback" not in done.err
    assert done.out == ""  # stdout is the MCP channel: nothing else goes there
    if code == 3 and "boot failed" in upstream:
        assert "boot failed" in done.err  # the server's own last words, before any call


@pytest.mark.parametrize(("flags", "says"), [
    (["--sample", "5"], "give --suite PATH"),
    (["--sample", "5", "--suite", "only.suite.yaml"], "check only equals, contains"),
    (["--sample", "101"], "0<=x<=100"),
    (["--sample", "5", "--suite", "time.suite.yaml", "--buffer", "0"], "x>=1"),
])
def test_flags_that_would_do_nothing_useful_are_refused(project: Project, flags: list[str],
                                                       says: str) -> None:
    project.write("time.suite.yaml", TIME_SUITE)
    project.write("only.suite.yaml", """\
        suite: demo/only.references@1
        cases:
          - id: a
            input: x
            expect:
              - equals: 1
              - contains: y
        """)
    done = project.assay("proxy", "--upstream", TIME, *flags)
    assert done.code == 2, done.err
    assert says in done.err and "Traceback" not in done.err


DYING = """\
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("dying", version="0.1")


@server.tool()
def work(n: int) -> dict:
    return {"n": n}


@server.tool()
def die() -> dict:
    os._exit(1)


if __name__ == "__main__":
    server.run()
"""


def test_an_upstream_that_dies_ends_the_proxy_with_the_reason(project: Project) -> None:
    from mcp import MCPError

    server = project.write("dying.py", DYING)
    project.write("work.suite.yaml", """\
        suite: demo/dying@1
        cases:
          - id: a
            input: {n: 1}
            expect:
              - status: ok
        """)
    ended: list[Ended] = []

    async def calls() -> None:
        async with host(project, f"mcp+stdio:{PYTHON} {shlex.quote(str(server))}", "--sample",
                        "100", "--suite", "work.suite.yaml", ended=ended) as proxied:
            worked = await proxied.call_tool("work", {"n": 2})
            assert json.loads(worked.content[0].text) == {"n": 2}
            with pytest.raises(MCPError, match="the upstream server is gone"):
                await proxied.call_tool("die", {})

    asyncio.run(calls())
    counts = ended[0].summary()
    assert counts["calls"] == 2
    assert "stopped: the upstream server went away" in ended[0].stderr

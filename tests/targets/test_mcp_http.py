"""``mcp+http://`` against the in-repo example server, served over streamable HTTP on loopback."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assay.errors import HarnessFailure
from assay.model import Case, Evidence, Trace
from assay.targets import Target, TargetOptions, TrialBroken, TrialRequest, make_target

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
TABLE_SERVER = ROOT / "examples" / "mcp_table" / "table_server.py"
FIXTURES = ROOT / "examples" / "extraction" / "fixtures"


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    """The example server as a subprocess serving streamable HTTP at ``url``."""

    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The ``mcp+http://`` URI of its endpoint."""
        return f"mcp+http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        """Start it and wait until the port takes connections (polled, no fixed sleep)."""
        self.process = subprocess.Popen(
            [sys.executable, str(TABLE_SERVER), "--http", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("the server did not listen within 20 s")

    def stop(self) -> None:
        """Stop it and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One example server for the module's tests."""
    running = Server(free_port())
    running.start()
    try:
        yield running
    finally:
        running.stop()


def request(case_input: Any, n: int = 1, **call: Any) -> TrialRequest:
    """A trial of ``extract_table`` with this input."""
    return TrialRequest(case=Case(id=f"c{n}", input=case_input), n=n, timeout_s=20.0,
                        call={"tool": "extract_table", **call})


def target(uri: str) -> Target:
    """The real target for ``uri``."""
    return make_target(uri, TargetOptions(base_dir=ROOT, concurrency=4))


INVOICE = {"document": "invoice.csv", "fixture_dir": str(FIXTURES)}


def test_a_tool_over_streamable_http(server: Server) -> None:
    tgt = target(server.url)

    async def go() -> list[Trace]:
        await tgt.start()
        try:
            return list(await asyncio.gather(
                tgt.run(request(INVOICE)),
                tgt.run(request({"text": "a,total\nx,3\n"}, n=2)),
                tgt.run(request({"document": "nope.csv"}, n=3)),
            ))
        finally:
            await tgt.close()

    invoice, inline, missing = asyncio.run(go())
    assert invoice.status == "ok"
    assert invoice.output["rows"][2]["total"] == "42.00"
    assert [e.kind for e in invoice.events] == ["tool_call", "tool_result"]
    assert invoice.events[0].arguments == INVOICE
    assert invoice.evidence_for("tool_calls") == Evidence.OBSERVED
    assert invoice.facets["harness"] == "mcp+http"
    assert invoice.facets["server"] == "table-extraction/1.0.0"
    assert inline.output == {"columns": ["a", "total"], "rows": [{"a": "x", "total": "3.00"}]}
    assert missing.status == "error" and "no such document" in (missing.error or "")


def test_fresh_sessions_over_http(server: Server) -> None:
    tgt = target(server.url)

    async def go() -> list[Trace]:
        await tgt.start()
        try:
            return [await tgt.run(request(INVOICE, n=n, fresh=True)) for n in (1, 2)]
        finally:
            await tgt.close()

    assert [t.status for t in asyncio.run(go())] == ["ok", "ok"]


def test_a_server_that_does_not_answer_is_a_harness_failure() -> None:
    port = free_port()
    with pytest.raises(HarnessFailure, match=f"cannot be reached at http://127.0.0.1:{port}/mcp"):
        asyncio.run(target(f"mcp+http://127.0.0.1:{port}/mcp").start())


def test_a_server_that_goes_away_breaks_the_trial_and_the_next_one_reconnects() -> None:
    running = Server(free_port())
    running.start()
    tgt = target(running.url)

    async def go() -> tuple[Trace, str, Trace]:
        await tgt.start()
        try:
            before = await tgt.run(request(INVOICE))
            running.stop()
            with pytest.raises(TrialBroken) as caught:
                await tgt.run(request(INVOICE, n=2))
            running.start()  # the same port again
            after = await tgt.run(request(INVOICE, n=3))
            return before, str(caught.value), after
        finally:
            await tgt.close()

    try:
        before, reason, after = asyncio.run(go())
    finally:
        running.stop()
    assert before.status == "ok"
    assert "MCP server connection lost" in reason or "could not be reached again" in reason
    assert after.status == "ok"

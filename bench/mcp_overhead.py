"""MCP round-trip overhead: assay's time per trial beyond the server's own.

    .venv/bin/python bench/mcp_overhead.py [--calls 500] [--fresh-calls 20] [--repeat 3]

The server is an ``MCPServer`` (stdio) whose tool ``ping`` returns at once,
so the server's own work is nil and what is left is the round trip. Each
figure is measured twice, with the same server and the same calls:

- **bare**: the SDK alone, a ``mcp.Client`` loop calling ``ping`` (for a
  per-trial server: start the server, connect, call, close, per call);
- **assay**: a real ``Battery`` (suite loaded from YAML, one trial per case,
  ``status`` and ``equals`` graded, cases folded into a report) against the
  ``mcp+stdio:`` target, with ``call: {tool: ping}`` (shared server) or
  ``call: {tool: ping, fresh: true}`` (one server per trial).

Overhead per trial = (assay wall − bare wall) / calls, both sequential
(concurrency 1). Server start-up and shutdown are left out on both sides
(assay's ``start()``/``close()`` and the bare client's connect and exit are
timed apart); with a server per trial, each trial's own start and stop is in
both figures (the server ``start()`` checks before the first trial is not).
Each figure is the median of ``--repeat`` runs. A concurrent run (C = 8) is
shown beside it for the shared server: one session carries the calls side by
side.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("ping", version="1.0")


@server.tool()
def ping(n: int) -> dict:
    return {"n": n}


if __name__ == "__main__":
    server.run()
'''


class Timed:
    """A target wrapper that times ``start`` and ``close`` apart from the trials."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.uri = target.uri
        self.evidence = target.evidence
        self.facets = target.facets
        self.start_s = 0.0
        self.close_s = 0.0

    async def start(self) -> None:
        began = time.perf_counter()
        await self.target.start()
        self.start_s = time.perf_counter() - began

    async def run(self, request: Any) -> Any:
        return await self.target.run(request)

    async def close(self) -> None:
        began = time.perf_counter()
        await self.target.close()
        self.close_s = time.perf_counter() - began

    def digest(self) -> str:
        return str(self.target.digest())


def write_suite(folder: Path, calls: int, fresh: bool) -> Path:
    call = "{tool: ping, fresh: true}" if fresh else "{tool: ping}"
    lines = [f"suite: bench/mcp.ping@1\ncall: {call}\ntimeout_s: 60\ncases:"]
    lines += [f"  - {{id: c{i}, input: {{n: {i}}}, expect: [status: ok, "
              f"{{path: $.n, equals: {i}}}]}}" for i in range(calls)]
    path = folder / ("fresh" if fresh else "shared") / "ping.suite.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def assay_run(suite: Path, server: Path, concurrency: int) -> tuple[float, float]:
    """(battery wall without start-up and shutdown, start-up) for one battery.

    Every case must pass, or the figure means nothing.
    """
    from assay.engine import Battery, BatteryOptions
    from assay.suites import load_suite_file
    from assay.targets import TargetOptions, make_target

    loaded = load_suite_file(suite)
    uri = f"mcp+stdio:{sys.executable} {server}"
    target = Timed(make_target(uri, TargetOptions(base_dir=suite.parent,
                                                  concurrency=concurrency)))
    battery = Battery(loaded, target, BatteryOptions(concurrency=concurrency))
    began = time.perf_counter()
    report = await battery.run()
    wall = time.perf_counter() - began
    passed = report.counts["public"].passed
    if passed != len(loaded.suite.cases):
        raise SystemExit(f"assay: only {passed} of {len(loaded.suite.cases)} cases passed")
    return wall - target.start_s - target.close_s, target.start_s


async def bare_shared(server: Path, calls: int, concurrency: int) -> tuple[float, float]:
    """(wall of the calls, connect time) for one SDK client calling ``ping``."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=[str(server)])
    began = time.perf_counter()
    async with Client(params) as client:
        connected = time.perf_counter()
        queue = iter(range(calls))

        async def worker() -> None:
            for n in queue:
                result = await client.call_tool("ping", {"n": n})
                assert not result.is_error
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        done = time.perf_counter()
    return done - connected, connected - began


async def bare_fresh(server: Path, calls: int) -> float:
    """Wall of ``calls`` × (start the server, connect, call, close) with the SDK alone."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=[str(server)])
    began = time.perf_counter()
    for n in range(calls):
        async with Client(params) as client:
            result = await client.call_tool("ping", {"n": n})
            assert not result.is_error
    return time.perf_counter() - began


def median(values: list[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="trials, shared server")
    parser.add_argument("--fresh-calls", type=int, default=20, help="trials, server per trial")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, nf = args.calls, args.fresh_calls

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        server = folder / "ping_server.py"
        server.write_text(textwrap.dedent(SERVER), encoding="utf-8")
        shared_suite, fresh_suite = write_suite(folder, n, False), write_suite(folder, nf, True)
        rows: dict[str, list[float]] = {}

        def add(name: str, value: float) -> None:
            rows.setdefault(name, []).append(value)

        asyncio.run(bare_shared(server, 5, 1))  # warm-up: bytecode caches, imports
        for _ in range(args.repeat):
            wall, connect = asyncio.run(bare_shared(server, n, 1))
            add("bare shared C=1", wall / n)
            add("bare connect", connect)
            wall, start = asyncio.run(assay_run(shared_suite, server, 1))
            add("assay shared C=1", wall / n)
            add("assay start", start)
            wall, _ = asyncio.run(bare_shared(server, n, 8))
            add("bare shared C=8", wall / n)
            wall, _ = asyncio.run(assay_run(shared_suite, server, 8))
            add("assay shared C=8", wall / n)
            add("bare fresh", asyncio.run(bare_fresh(server, nf)) / nf)
            wall, _ = asyncio.run(assay_run(fresh_suite, server, 1))
            add("assay fresh", wall / nf)

    med = {name: median(values) for name, values in rows.items()}
    today = dt.datetime.now(dt.UTC).date()
    print(f"MCP round trip, {today} · {platform.machine()} · nproc {os.cpu_count()} · "
          f"Python {platform.python_version()} · median of {args.repeat}")
    print(f"server start + handshake: bare {ms(med['bare connect'])}, "
          f"assay start() {ms(med['assay start'])}")
    print(f"{'':26}{'bare SDK':>12}{'assay':>12}{'overhead':>12}   per trial")
    for label, bare, ours in [
        (f"shared server, C=1, N={n}", "bare shared C=1", "assay shared C=1"),
        (f"shared server, C=8, N={n}", "bare shared C=8", "assay shared C=8"),
        (f"server per trial, N={nf}", "bare fresh", "assay fresh"),
    ]:
        print(f"{label:26}{ms(med[bare]):>12}{ms(med[ours]):>12}"
              f"{ms(med[ours] - med[bare]):>12}")


if __name__ == "__main__":
    main()

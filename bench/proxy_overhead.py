"""What ``assay proxy`` adds to a tool call: the host's wait, with and without sampling.

    .venv/bin/python bench/proxy_overhead.py [--calls 500] [--repeat 3]

The server is an ``MCPServer`` (stdio) whose tool ``ping`` returns at once,
so what is measured is the round trip. The host is the SDK's ``mcp.Client``
calling ``ping`` sequentially, three ways, with the same calls:

- **bare**: the client talks to the server directly;
- **proxy, --sample 0**: through ``assay proxy``, forwarding only;
- **proxy, --sample 100**: every call recorded and handed to the grader
  (``status`` and ``never_calls``; failures would be queued in a throwaway
  store), which runs in the proxy's background thread.

Overhead per call = (proxied wall − bare wall) / calls. Connecting and
closing are left out on every side (the loop of calls alone is timed). Each
figure is the median of ``--repeat`` runs; the proxy's summary line of the
last run with sampling says how many samples were graded and dropped.
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
import time
from pathlib import Path

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("ping", version="1.0")


@server.tool()
def ping(n: int) -> dict:
    return {"n": n}


if __name__ == "__main__":
    server.run()
'''

SUITE = """\
suite: bench/proxy.ping@1
call: {tool: ping}
cases:
  - id: one
    input: {n: 1}
    expect:
      - status: ok
      - never_calls: [delete_*]
"""


async def _loop(command: str, args: list[str], cwd: Path, calls: int,
                errlog: Path | None = None) -> float:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command, args=args, env=dict(os.environ), cwd=cwd)
    log = open(errlog or os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        async with Client(stdio_client(params, errlog=log), cache=None) as client:
            started = time.perf_counter()
            for n in range(calls):
                await client.call_tool("ping", {"n": n})
            return time.perf_counter() - started
    finally:
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "ping_server.py").write_text(SERVER, encoding="utf-8")
        (root / "ping.suite.yaml").write_text(SUITE, encoding="utf-8")
        server = [str(root / "ping_server.py")]
        upstream = f"mcp+stdio:{sys.executable} {root / 'ping_server.py'}"
        proxy = ["-m", "assay", "proxy", "--upstream", upstream,
                 "--db", f"sqlite:///{root / 'bench.db'}"]
        ways = {
            "bare": server,
            "proxy, --sample 0": [*proxy, "--sample", "0"],
            "proxy, --sample 100": [*proxy, "--sample", "100", "--seed", "1",
                                    "--suite", str(root / "ping.suite.yaml")],
        }
        walls: dict[str, list[float]] = {name: [] for name in ways}
        errlog = root / "proxy-stderr.txt"
        for _ in range(args.repeat):
            for name, argv in ways.items():
                walls[name].append(asyncio.run(_loop(sys.executable, argv, root, args.calls,
                                                     errlog if "100" in name else None)))
        summary = next((line for line in errlog.read_text().splitlines()
                        if line.startswith("proxy:")), "(no summary)")
    print(f"# assay proxy overhead — {dt.datetime.now(dt.UTC):%Y-%m-%d} — {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{args.calls} sequential calls, median of {args.repeat}")
    bare = statistics.median(walls["bare"])
    for name, runs in walls.items():
        wall = statistics.median(runs)
        extra = "" if name == "bare" else \
            f"   +{(wall - bare) / args.calls * 1e3:.3f} ms/call over bare"
        print(f"{name:<22} {wall:7.3f} s   {wall / args.calls * 1e3:.3f} ms/call{extra}")
    print(f"last sampled run: {summary}")


if __name__ == "__main__":
    main()

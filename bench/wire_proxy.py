"""What the recording proxy adds to an exec: agent's model calls (issue 30, SPEC §15).

    .venv/bin/python bench/wire_proxy.py [--calls 4000] [--concurrency 64] [--think-ms 0]

The model is ``tests/wire_server.py`` (aiohttp, a process of its own). The
client, in a third process as an ``exec:`` agent is, is httpx's
``AsyncClient``, as an agent's SDK would be, making
``--calls`` chat completions with ``--concurrency`` at once (each a trial with
its own route, as a battery of 64 trials has). The calls alternate, one by
one, between the model directly and the model through a ``RecordingProxy``
(in this process, on its own thread, as a battery runs it), so load falls on
both alike. Printed: the median and p99 of a call's wall each way and their
difference (the goal: the proxy adds ≤ 1 ms at p99 at 64 at once), and, for
streamed answers, the time to the first byte each way (the goal: the first
byte through within 5 ms of its arrival). Every proxied exchange is checked
to be recorded on its own route.

``--think-ms N``: the model waits N ms before each answer, as a real one
does; with 0 it answers at once, and 64 clients calling it in a closed loop
keep every core busy. So each measurement also prints the CPU the three
processes used (the bench with the proxy, the client, the model) over its
wall, against the cores there are: near 100% the p99 is the queue for a
core, not anything the proxy does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from assay.targets.wire.proxy import RecordingProxy, Upstream  # noqa: E402


def start_model() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "wire_server.py")],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    base = process.stdout.readline().strip()
    if not base.startswith("http"):
        process.kill()
        raise SystemExit(f"the model server did not start: {base!r}")
    return process, base.rstrip("/")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


LOAD = """
import asyncio, json, sys, time
import httpx

async def main(spec):
    urls, direct, calls, stream = spec["routes"], spec["direct"], spec["calls"], spec["stream"]
    body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": spec["say"]}]}
    found = {"direct": [], "proxied": [], "direct_first": [], "proxied_first": []}
    limits = httpx.Limits(max_connections=2 * len(urls), max_keepalive_connections=2 * len(urls))
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        async def one(url, way):
            started = time.perf_counter()
            first = None
            async with client.stream("POST", url, json=body) as answer:
                async for _ in answer.aiter_raw():
                    if first is None:
                        first = time.perf_counter()
            end = time.perf_counter()
            found[way].append(end - started)
            found[way + "_first"].append((first or end) - started)

        async def worker(index):
            for n in range(index, calls, len(urls)):
                if n % 2:
                    await one(urls[index] + "/chat/completions", "proxied")
                else:
                    await one(direct + "/v1/chat/completions", "direct")

        await asyncio.gather(*(worker(i) for i in range(len(urls))))
    print(json.dumps(found))

asyncio.run(main(json.loads(sys.argv[1])))
"""


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(base: str, proxy: RecordingProxy, calls: int, concurrency: int,
            stream: bool, think_ms: int, model_pid: int) -> dict[str, Any]:
    """The calls made by a process of their own (an agent is one), through the proxy of
    this process (as assay runs it) and straight, taking turns; and the CPU all used."""
    import json

    routes = [proxy.open_route() for _ in range(concurrency)]
    spec = {"routes": [r.environment()["OPENAI_BASE_URL"] for r in routes], "direct": base,
            "calls": calls, "stream": stream,
            "say": f"bench THINK:{think_ms}" if think_ms else "bench"}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine, model, wall = time.process_time(), cpu_of(model_pid), time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LOAD, json.dumps(spec)], capture_output=True,
                          text=True, timeout=900)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = {"proxy": time.process_time() - mine, "model": cpu_of(model_pid) - model,
            "client": (after.ru_utime + after.ru_stime) - (children.ru_utime
                                                           + children.ru_stime)}
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    found: dict[str, Any] = json.loads(done.stdout)
    recorded = sum(len(route.close()) for route in routes)
    assert recorded == len(found["proxied"]), (recorded, len(found["proxied"]))
    found["cpu"] = used
    found["busy"] = sum(used.values()) / (wall * len(os.sched_getaffinity(0)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--think-ms", type=int, default=0,
                        help="the model waits this long before each answer")
    args = parser.parse_args(argv)
    model, base = start_model()
    proxy = RecordingProxy({"openai": Upstream("openai", base + "/v1", "sk-bench")})
    proxy.start()
    try:
        print(f"# {dt.datetime.now(dt.UTC).date()} · {platform.node()} · "
              f"Python {platform.python_version()} · {args.calls} calls, "
              f"{args.concurrency} at once · model thinks {args.think_ms} ms · "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"{'answer':<8} {'way':<8} {'median':>9} {'p99':>9} {'first byte':>11} "
              f"{'first p99':>10}")
        for stream in (False, True):
            measure(base, proxy, min(400, args.calls), args.concurrency, stream,  # warm-up
                    args.think_ms, model.pid)
            found = measure(base, proxy, args.calls, args.concurrency, stream, args.think_ms,
                            model.pid)
            direct, proxied = found["direct"], found["proxied"]
            d_first, p_first = found["direct_first"], found["proxied_first"]
            kind = "stream" if stream else "json"
            for way, walls, firsts in (("direct", direct, d_first),
                                       ("proxied", proxied, p_first)):
                print(f"{kind:<8} {way:<8} {statistics.median(walls) * 1e3:>8.2f}ms "
                      f"{p99(walls) * 1e3:>8.2f}ms {statistics.median(firsts) * 1e3:>10.2f}ms "
                      f"{p99(firsts) * 1e3:>9.2f}ms")
            print(f"{kind:<8} {'added':<8} "
                  f"{(statistics.median(proxied) - statistics.median(direct)) * 1e3:>8.2f}ms "
                  f"{(p99(proxied) - p99(direct)) * 1e3:>8.2f}ms "
                  f"{(statistics.median(p_first) - statistics.median(d_first)) * 1e3:>10.2f}ms "
                  f"{(p99(p_first) - p99(d_first)) * 1e3:>9.2f}ms")
            cpu = found["cpu"]
            print(f"{kind:<8} cpu      proxy {cpu['proxy']:.2f} s, client {cpu['client']:.2f} s, "
                  f"model {cpu['model']:.2f} s: {100 * found['busy']:.0f}% of "
                  f"{len(os.sched_getaffinity(0))} cores; {1e3 * cpu['proxy'] / len(proxied):.2f}"
                  f" ms of proxy CPU a proxied call · load {os.getloadavg()[0]:.2f}")
    finally:
        proxy.close()
        model.kill()
        model.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

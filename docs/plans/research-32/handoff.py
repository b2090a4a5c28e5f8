"""Sync agent hand-over: today's per-call loop round trip vs a thread-side pipeline.

PYTHONPATH=/work/main/src nice -n 5 /work/main/.venv/bin/python handoff.py
Each variant runs M calls of a trivial agent (str.replace) with C = 8 "workers",
plus a fixed piece of per-trial Python work W (a stand-in for trace+grade+fold,
~ a few us) so that GIL contention is realistic. Reports wall and process CPU per trial.
"""
from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time

from assay.targets.threads import AgentThreads

M = 30000
C = 8


def agent(x: str) -> str:
    return x.replace("case", "answer")


def work(x: str) -> tuple:
    # stand-in for the per-trial pure work (kept equal across variants)
    return tuple(x for _ in range(20))


def report(label: str, wall: float, cpu: float) -> None:
    print(f"{label:58s} wall {wall / M * 1e6:6.2f} us/trial  cpu {cpu / M * 1e6:6.2f} us/trial")


async def today() -> None:
    threads = AgentThreads(C)
    items = iter([f"case-{i}" for i in range(M)])

    async def worker() -> None:
        for x in items:
            async with asyncio.timeout(60):
                context = contextvars.copy_context()
                out = await threads.run(lambda: context.run(agent, x))
            work(out)
    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(C)))
    report("today: AgentThreads.run per call + timeout + context",
           time.perf_counter() - w0, time.process_time() - c0)
    threads.close()


async def inline_lower_bound() -> None:
    items = iter([f"case-{i}" for i in range(M)])

    async def worker() -> None:
        for x in items:
            work(agent(x))
    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(C)))
    report("lower bound: agent inline on the loop (no hang cut)",
           time.perf_counter() - w0, time.process_time() - c0)


async def pipeline(timeout_s: float = 60.0) -> None:
    """C daemon threads take trials from a queue, run agent + pure work, post results in
    batches; a watchdog thread cuts a job at its deadline (here none hang)."""
    loop = asyncio.get_running_loop()
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    done = asyncio.Event()
    results: list = []
    lock = threading.Lock()
    pending: list = []
    inflight: dict[int, float] = {}  # thread id -> deadline (what a watchdog reads)
    count = [0]

    def deliver() -> None:
        with lock:
            batch, pending[:] = list(pending), []
        results.extend(batch)
        count[0] += len(batch)
        if count[0] >= M:
            done.set()

    def post(item) -> None:
        with lock:
            pending.append(item)
            if len(pending) > 1:
                return
        loop.call_soon_threadsafe(deliver)

    def run() -> None:
        me = threading.get_ident()
        while (x := jobs.get()) is not None:
            inflight[me] = time.monotonic() + timeout_s
            ctx = contextvars.copy_context()
            out = ctx.run(agent, x)
            inflight.pop(me, None)
            post(work(out))

    for i in range(M):
        jobs.put(f"case-{i}")
    w0, c0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=run, daemon=True) for _ in range(C)]
    for t in threads:
        t.start()
    await done.wait()
    report("pipeline: threads pull trials, post results in batches",
           time.perf_counter() - w0, time.process_time() - c0)
    for _ in threads:
        jobs.put(None)


async def one_thread_batches() -> None:
    """One agent thread runs calls back to back while they are quick (lazy wake-up idea)."""
    threads = AgentThreads(1)
    xs = [f"case-{i}" for i in range(M)]
    B = 64

    def chunk(part):
        return [work(agent(x)) for x in part]
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, M, B):
        await threads.run(lambda p=xs[i:i + B]: chunk(p))
    report(f"one round trip per {B} calls (AgentThreads, 1 thread)",
           time.perf_counter() - w0, time.process_time() - c0)
    threads.close()


async def main() -> None:
    for _ in range(2):
        await inline_lower_bound()
        await today()
        await pipeline()
        await one_thread_batches()


asyncio.run(main())

"""Per-step cost of one no-latency trial, each step timed in a loop on real objects.

PYTHONPATH=/work/main/src:/work/main/bench nice -n 5 /work/main/.venv/bin/python steps.py
Run from /tmp/hotpath-research (the suite is written under ./suite).
"""
from __future__ import annotations

import asyncio
import gc
import os
import pickle
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/main/bench")
from throughput import write_suite  # noqa: E402

HERE = Path(__file__).resolve().parent
SUITE = HERE / "suite"
N = int(os.environ.get("N", "10000"))
M = int(os.environ.get("M", "3000"))  # trials timed per step

if not (SUITE / "bench.suite.yaml").exists():
    write_suite(SUITE, suite_id="bench/steps@1", target="python:bench_agent:echo", n=N)
sys.path.insert(0, str(SUITE))

from assay.checks import grade_trace  # noqa: E402
from assay.engine.spool import CaseSpool, case_json  # noqa: E402
from assay.grading import fold_case, fold_trial  # noqa: E402
from assay.grading.tally import Tally  # noqa: E402
from assay.store.runs.trials import trial_record  # noqa: E402
from assay.suites import load_suite_file  # noqa: E402
from assay.targets.base import TargetOptions, TrialRequest  # noqa: E402
from assay.targets.python import PythonTarget  # noqa: E402

loaded = load_suite_file(SUITE / "bench.suite.yaml")
cases = list(loaded.suite.cases[:M])


def per(label: str, total: float, count: int) -> None:
    print(f"{label:44s} {total / count * 1e6:8.2f} us")


async def main() -> None:
    gc.disable()
    target = PythonTarget("python:bench_agent:echo", TargetOptions(base_dir=SUITE, concurrency=8))
    await target.start()
    reqs = [TrialRequest(case=c, n=1, timeout_s=60.0) for c in cases]
    # warm
    for r in reqs[:200]:
        await target.run(r)
    # 1. target.run, one at a time (thread round trip per call)
    t0 = time.perf_counter()
    traces = []
    for r in reqs:
        traces.append(await target.run(r))
    per("target.run (sync agent, serial)", time.perf_counter() - t0, M)
    # 1b. 8 concurrent workers like the battery
    it = iter(reqs)

    async def worker() -> None:
        for r in it:
            await target.run(r)
    t0 = time.perf_counter()
    c0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(8)))
    per("target.run (8 workers), wall", time.perf_counter() - t0, M)
    per("target.run (8 workers), process CPU", time.process_time() - c0, M)
    # 1c. with timeout context like battery
    it = iter(reqs)

    async def worker_t() -> None:
        for r in it:
            async with asyncio.timeout(60.0):
                await target.run(r)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker_t() for _ in range(8)))
    per("target.run (8 workers, asyncio.timeout)", time.perf_counter() - t0, M)
    # pieces of target.run
    from assay.targets.agent_tools import Tools
    from assay.targets.python import Recorder
    import io
    t0 = time.perf_counter()
    for r in reqs:
        Tools(r.tools, r.fixture, r.workspace)
    per("  Tools(...)", time.perf_counter() - t0, M)
    t0 = time.perf_counter()
    for r in reqs:
        tools = Tools(None, None, None)
        target._trace(r, tools, [], "answer", "ok", None, 0.0, io.StringIO(), 1,
                      Recorder(0.0))
    per("  Tools + _trace (Trace model, no event)", time.perf_counter() - t0, M)
    from assay.model import Event
    t0 = time.perf_counter()
    for r in reqs:
        Event(kind="message", text="answer-1")
    per("  Event(kind=message)", time.perf_counter() - t0, M)
    # direct call of the function through the thread pool vs inline
    th = target._threads
    f = target._func
    t0 = time.perf_counter()
    for r in reqs:
        await th.run(lambda: f(r.case.input))
    per("  AgentThreads.run(echo), serial", time.perf_counter() - t0, M)
    t0 = time.perf_counter()
    for r in reqs:
        await asyncio.to_thread(f, r.case.input)
    per("  asyncio.to_thread(echo), serial", time.perf_counter() - t0, M)
    t0 = time.perf_counter()
    for r in reqs:
        f(r.case.input)
    per("  echo inline", time.perf_counter() - t0, M)

    # 2. grade
    t0 = time.perf_counter()
    verdicts = [grade_trace(c.expect, tr) for c, tr in zip(cases, traces)]
    per("grade_trace (one equals)", time.perf_counter() - t0, M)
    # 3. fold trial
    t0 = time.perf_counter()
    results = [fold_trial(1, v, duration_s=tr.duration_s, usage=tr.usage, trace=tr)
               for v, tr in zip(verdicts, traces)]
    per("fold_trial", time.perf_counter() - t0, M)
    # 4. record
    t0 = time.perf_counter()
    records = [trial_record(c.id, c.split, res) for c, res in zip(cases, results)]
    per("trial_record (trace JSON + tuples)", time.perf_counter() - t0, M)
    t0 = time.perf_counter()
    for res in results:
        res.trace.model_dump_json(fallback=repr).encode()
    per("  of which trace.model_dump_json", time.perf_counter() - t0, M)
    # 5. hand-over: pickle a batch of 1000 records (what Connection.send does)
    t0 = time.perf_counter()
    for i in range(0, M, 1000):
        pickle.dumps(("write", "run", records[i:i + 1000]), protocol=pickle.HIGHEST_PROTOCOL)
    per("pickle batch (per trial)", time.perf_counter() - t0, M)
    import multiprocessing as mp
    a, b = mp.Pipe()
    pid = os.fork()
    if pid == 0:
        try:
            while True:
                m = b.recv()
                if m is None:
                    break
        finally:
            os._exit(0)
    t0 = time.perf_counter()
    for i in range(0, M, 1000):
        a.send(("write", "run", records[i:i + 1000]))
    a.send(None)
    per("Pipe.send batch to a child (per trial)", time.perf_counter() - t0, M)
    os.waitpid(pid, 0)
    # 6. fold case
    t0 = time.perf_counter()
    folded = [fold_case(c, [res], facets={}) for c, res in zip(cases, results)]
    per("fold_case", time.perf_counter() - t0, M)
    # 7. spool + tally
    spool = CaseSpool(M)
    tally = Tally(M)
    t0 = time.perf_counter()
    for i, fc in enumerate(folded):
        case_json(fc)
    per("case_json (spool's serialisation)", time.perf_counter() - t0, M)
    t0 = time.perf_counter()
    for i, fc in enumerate(folded):
        spool.put(i, fc)
    per("spool.put (incl. case_json)", time.perf_counter() - t0, M)
    t0 = time.perf_counter()
    for i, fc in enumerate(folded):
        tally.add(i, fc)
    per("tally.add", time.perf_counter() - t0, M)
    # case read from packed
    pc = loaded.suite.cases
    t0 = time.perf_counter()
    for i in range(M):
        pc[i + 5000 if i + 5000 < len(pc) else i]
    per("PackedCases[i] (cold read)", time.perf_counter() - t0, M)
    await target.close()
    print("trace bytes example:", records[0].trace)


asyncio.run(main())

"""Batteries on the job queue: trials/s against the ideal, and what a chunk costs.

    .venv/bin/python bench/job_queue.py                 # both parts, about 3 minutes
    .venv/bin/python bench/job_queue.py --part chunks   # only part 1
    .venv/bin/python bench/job_queue.py --part workers --n 6400 --repeat 3

A throwaway PostgreSQL on loopback (Debian's binaries, started as the tests
start theirs: fsync off), fresh database per measurement, real ``assay
worker`` processes started before the clock starts (idle and connected),
real ``assay run --executor queue --detach`` to enqueue. The clock runs
from the enqueue command's start until the store says the run is sealed
(read every 20 ms): enqueue, claims, trials, fenced writes, the seal.

1. **chunks**: an agent that answers at once (a Python function), N
   trials, one worker at --concurrency 64; chunk sizes 1, 10, 100. What is
   measured is the queue's and the store's cost: jobs/s and trials/s.
2. **workers**: an agent that takes L = 50 ms (``asyncio.sleep``), N
   trials, C = 64 per worker, chunk 50, with 1, 2 and 4 workers. The ideal
   wall is N·L/(C·workers); the figure is wall / ideal.

Prints one line per measurement and a summary; the machine is named.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _postgres import Postgres

ROOT = Path(__file__).resolve().parent.parent

AGENT = '''
import asyncio

DELAY = {delay}


async def agent(input):
    if DELAY:
        await asyncio.sleep(DELAY)
    return {{"echo": input}}
'''


def write_suite(folder: Path, n: int, delay: float) -> None:
    (folder / "evals").mkdir(parents=True, exist_ok=True)
    (folder / "evals" / "b_agent.py").write_text(AGENT.format(delay=delay))
    lines = ["suite: bench/queue@1", "target: python:b_agent:agent", "cases:"]
    lines += [f"  - {{id: c{i}, input: i{i}, expect: [{{path: $.echo, equals: i{i}}}]}}"
              for i in range(n)]
    (folder / "evals" / "b.suite.yaml").write_text("\n".join(lines) + "\n")


def assay(*args: str) -> list[str]:
    return [sys.executable, "-m", "assay", *args]


SPY: str | None = None


def measure(pg: Postgres, folder: Path, *, workers: int, concurrency: int,
            chunk: int) -> tuple[float, float, int]:
    """Seconds from the enqueue command's start to the seal, and from its end; trials."""
    import sqlalchemy as sa

    url = pg.database()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # The store and the queue's tables first, so that idle workers wait on them.
    from assay.queue.app import ensure_schema
    from assay.store.database import open_store

    store = open_store(url)
    ensure_schema(store)
    spy = ["py-spy", "record", "-r", "200", "-f", "raw", "-o", SPY, "--"] if SPY else []
    # Enough chunks held to keep C trials busy at this chunk size (the default holds
    # two 50-trial chunks' worth).
    jobs = str(max(2, -(-2 * concurrency // chunk)))
    started = [subprocess.Popen([*(spy if i == 0 else []),
                                 *assay("worker", "--db", url, "--concurrency", str(concurrency),
                                        "--jobs", jobs)],
                                cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, text=True)
               for i in range(workers)]
    try:
        # Idle and listening: each worker has registered itself in the queue.
        deadline = time.monotonic() + 60
        with store.engine.connect() as connection:
            while connection.scalar(sa.text("SELECT count(*) FROM procrastinate_workers")) \
                    < workers:
                if time.monotonic() > deadline:
                    raise SystemExit("the workers did not start")
                time.sleep(0.05)
                connection.rollback()
        began = time.perf_counter()
        done = subprocess.run(assay("run", "evals", "--db", url, "--executor", "queue",
                                    "--detach", "--chunk", str(chunk)),
                              cwd=folder, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"enqueue failed: {done.stderr[-2000:]}")
        run_id = done.stdout.split()[0]
        enqueued = time.perf_counter()
        with store.engine.connect() as connection:
            while True:
                status = connection.scalar(sa.text("SELECT status FROM runs WHERE run_id = :r"),
                                           {"r": run_id})
                connection.rollback()
                if status == "sealed":
                    break
                time.sleep(0.02)
        wall = time.perf_counter() - began
        after = time.perf_counter() - enqueued
        with store.engine.connect() as connection:
            trials = int(connection.scalar(sa.text(
                "SELECT count(*) FROM trials WHERE run_id = :r"), {"r": run_id}) or 0)
        return wall, after, trials
    finally:
        for process in started:
            process.send_signal(2) if SPY else process.kill()
            process.wait()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["chunks", "workers", "both"], default="both")
    parser.add_argument("--n", type=int, default=6400, help="trials of part 2 (default 6400)")
    parser.add_argument("--n-chunks", type=int, default=2000,
                        help="trials of part 1 (default 2000)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunk-sizes", default="1,10,100")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--py-spy", metavar="FILE", help="profile the first worker (raw)")
    args = parser.parse_args()
    global SPY
    SPY = args.py_spy
    sys.path.insert(0, str(ROOT / "src"))
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    pg = Postgres()
    try:
        if args.part in ("chunks", "both"):
            folder = Path(tempfile.mkdtemp(prefix="assay-bench-q1-"))
            write_suite(folder, args.n_chunks, 0.0)
            print(f"\n1. chunks: {args.n_chunks} instant trials, 1 worker, C = 64")
            for chunk in (int(c) for c in args.chunk_sizes.split(",")):
                walls, afters = [], []
                for _ in range(args.repeat):
                    wall, after, trials = measure(pg, folder, workers=1, concurrency=64,
                                                  chunk=chunk)
                    assert trials == args.n_chunks, trials
                    walls.append(wall)
                    afters.append(after)
                wall, after = statistics.median(walls), statistics.median(afters)
                jobs = -(-args.n_chunks // chunk)
                print(f"   chunk {chunk:>3}: {wall:6.2f} s in all, {after:6.2f} s after the "
                      f"enqueue: {jobs / after:6.0f} jobs/s, {args.n_chunks / after:6.0f} "
                      f"trials/s  (runs: {', '.join(f'{w:.2f}' for w in walls)})")
            shutil.rmtree(folder, ignore_errors=True)
        if args.part in ("workers", "both"):
            folder = Path(tempfile.mkdtemp(prefix="assay-bench-q2-"))
            write_suite(folder, args.n, 0.05)
            print(f"\n2. workers: {args.n} trials of L = 50 ms, C = 64 per worker, chunk 50")
            for workers in (int(w) for w in args.workers.split(",")):
                ideal = args.n * 0.05 / (64 * workers)
                walls, afters = [], []
                for _ in range(args.repeat):
                    wall, after, trials = measure(pg, folder, workers=workers, concurrency=64,
                                                  chunk=50)
                    assert trials == args.n, trials
                    walls.append(wall)
                    afters.append(after)
                wall, after = statistics.median(walls), statistics.median(afters)
                print(f"   {workers} worker(s): {wall:6.2f} s in all ({wall / ideal:5.2f}x "
                      f"ideal {ideal:5.2f} s), {after:6.2f} s after the enqueue "
                      f"({after / ideal:5.2f}x), {args.n / after:6.0f} trials/s  (runs: "
                      f"{', '.join(f'{w:.2f}' for w in walls)})")
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        pg.stop()


if __name__ == "__main__":
    main()

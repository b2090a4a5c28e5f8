"""Peak RSS and wall of `assay run` at 10,000 and 100,000 cases, local and queue.

    .venv/bin/python bench/memory.py                  # 10k and 100k, both executors
    .venv/bin/python bench/memory.py --quick          # 2,000 and 20,000
    .venv/bin/python bench/memory.py --sizes 10000 --executors local --repeat

Issue 13, item 5: memory that does not grow with the battery. The goal is a
peak RSS at 100,000 cases within 2x of the figure at 10,000, on both
executors. The commands run are this tree's (``python -m assay`` with
PYTHONPATH=<repo>/src), whatever is checked out.

The suite: N trivial cases (id cN, input iN, one check ``$.echo`` equals iN),
one trial each, against a Python function that echoes its input. It is
generated once per size and copied into a fresh scratch folder for each
measurement, so every measured run loads it with a cold suite cache
(.assay/cache/suites) and starts with no store; ``--repeat`` adds a second
run in the same folder, warm cache and a store that already holds the first
run. Every figure is a whole fresh process, from fork to exit; peak RSS is
the process's own (wait4's ru_maxrss, see bench/_measure.py): the largest of
the command and its reaped children (the local executor's store writer), not
their sum. Before the
measurements, a small suite runs once on each executor, unmeasured, so that
imports are byte-compiled and in the page cache.

1. **local**: ``assay run evals --concurrency 64 --json out.json`` (the default
   SQLite store under the folder's .assay). Wall, peak RSS, trials/s and the
   size of the JSON report.
2. **queue**: a throwaway PostgreSQL on loopback (bench/_postgres.py), a fresh
   database per measurement; two ``assay worker --concurrency 64`` processes
   started first and idle (registered in the queue), then the submitter
   ``assay run evals --db URL --executor queue --concurrency 64 --json out.json``,
   which enqueues, follows the run to its seal and writes the report. Once it
   has exited the workers get SIGTERM (they finish the chunks in hand: none).
   Wall and peak RSS of the submitter, each worker's peak RSS, trials stored.

Each run is checked: exit 0 and a report that counts all N cases passed; on
the queue, N trials stored. Prints the machine, one line per measurement
and a summary: peak(largest N) / peak(smallest N) per executor and process
role, against the goal of 2x.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _measure import ProcessRun, run_process  # noqa: E402
from _postgres import Postgres  # noqa: E402

if TYPE_CHECKING:
    from assay.store.database import Store

CONCURRENCY = 64
WORKERS = 2
#: Seconds any one process may take before it is killed and the bench fails.
TIMEOUT_S = 1800.0
WARM_UP_N = 200

AGENT = '''\
"""The echo agent of bench/memory.py (generated)."""


async def agent(input):
    return {"echo": input}
'''


class BenchError(RuntimeError):
    pass


@dataclass
class Measure:
    """One measured battery: its processes' figures by role."""

    executor: str
    n: int
    cache: str  # "cold" (first run in a fresh folder) or "warm" (the second)
    wall_s: float
    peaks: dict[str, float]  # role -> peak RSS (MiB): local | submitter | worker 1 | ...
    report_bytes: int
    trials: int | None = None
    notes: list[str] = field(default_factory=list)

    def role_peak(self, role: str) -> float:
        if role == "worker max":
            return max(v for k, v in self.peaks.items() if k.startswith("worker "))
        return self.peaks[role]


# --------------------------------------------------------------------------
# Suites and commands
# --------------------------------------------------------------------------


def suite_text(n: int) -> str:
    lines = ["suite: bench/memory@1", "title: assay memory bench (generated)",
             "target: python:m_agent:agent", "trials: 1", "cases:"]
    lines += [f"  - {{id: c{i}, input: i{i}, expect: [{{path: $.echo, equals: i{i}}}]}}"
              for i in range(n)]
    return "\n".join(lines) + "\n"


def write_template(root: Path, n: int) -> Path:
    """The suite of n cases and its agent in root/n/evals, once per bench run."""
    evals = root / str(n) / "evals"
    evals.mkdir(parents=True)
    (evals / "m_agent.py").write_text(AGENT)
    (evals / "m.suite.yaml").write_text(suite_text(n))
    return evals


def fresh_folder(template: Path, scratch: Path, label: str) -> Path:
    """A new working folder holding a copy of the template's evals/ and nothing else."""
    folder = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=scratch))
    shutil.copytree(template, folder / "evals")
    return folder


def assay(*args: str) -> list[str]:
    return [sys.executable, "-m", "assay", *args]


def child_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for name in ("ASSAY_DB", "ASSAY_CACHE_DIR", "ASSAY_HIDDEN_DIR"):
        env.pop(name, None)  # the store and the caches go in the scratch folder
    return env


def check_report(path: Path, n: int) -> tuple[int, str | None]:
    """The report's size in bytes and its run id; BenchError unless it counts n passed."""
    try:
        size = path.stat().st_size
        with path.open() as handle:
            report = json.loads(handle.readline())
    except (OSError, json.JSONDecodeError) as error:
        raise BenchError(f"no readable JSON report at {path}: {error}") from None
    counts = report.get("counts", {})
    splits = [counts.get(name) or {} for name in ("public", "hidden")]
    total = sum(int(split.get("total", 0)) for split in splits)
    passed = sum(int(split.get("passed", 0)) for split in splits)
    if total != n or passed != n:
        raise BenchError(f"the report counts {passed} passed of {total}; expected {n} of {n}")
    return size, report.get("run_id")


def checked(run: ProcessRun, what: str) -> ProcessRun:
    if run.returncode != 0:
        raise BenchError(f"{what} exited {run.returncode}:\n{run.tail(30)}")
    return run


# --------------------------------------------------------------------------
# Local
# --------------------------------------------------------------------------


def measure_local(template: Path, scratch: Path, n: int, repeat: bool) -> list[Measure]:
    folder = fresh_folder(template, scratch, f"local-{n}")
    out: list[Measure] = []
    try:
        for cache in ("cold", "warm") if repeat else ("cold",):
            report = folder / "out.json"
            report.unlink(missing_ok=True)
            argv = assay("run", "evals", "--concurrency", str(CONCURRENCY), "--json",
                         str(report))
            run = checked(run_process(argv, cwd=folder, env=child_env(), timeout_s=TIMEOUT_S),
                          f"assay run (local, {n} cases)")
            size, _ = check_report(report, n)
            out.append(Measure("local", n, cache, run.wall_s, {"local": run.peak_rss_mib},
                               size))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


# --------------------------------------------------------------------------
# Queue
# --------------------------------------------------------------------------


class Worker:
    """One ``assay worker`` measured by run_process on a thread of its own."""

    def __init__(self, url: str, folder: Path, index: int) -> None:
        self.index = index
        self.launcher: int | None = None
        self.started = threading.Event()
        self.run: ProcessRun | None = None
        self.error: BaseException | None = None
        argv = assay("worker", "--db", url, "--concurrency", str(CONCURRENCY),
                     "--name", f"bench-{index}")
        self.thread = threading.Thread(target=self._main, args=(argv, folder), daemon=True)
        self.thread.start()
        self.started.wait()

    def _main(self, argv: list[str], folder: Path) -> None:
        def began(pid: int) -> None:
            self.launcher = pid
            self.started.set()

        try:
            self.run = run_process(argv, cwd=folder, env=child_env(), timeout_s=TIMEOUT_S,
                                   on_start=began)
        except BaseException as error:  # noqa: BLE001 - reported by the bench's thread
            self.error = error
        finally:
            self.started.set()

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, grace_s: float = 60.0) -> ProcessRun:
        """SIGTERM (passed on by the launcher), then wait; SIGKILL after grace_s."""
        if self.launcher is not None and self.alive:
            try:
                os.kill(self.launcher, signal.SIGTERM)
            except ProcessLookupError:
                pass
        self.thread.join(grace_s)
        if self.alive and self.launcher is not None:
            try:
                os.killpg(self.launcher, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.thread.join()
        if self.error is not None:
            raise BenchError(f"worker {self.index}: {self.error!r}")
        assert self.run is not None
        return self.run


def measure_queue(pg: Postgres, template: Path, scratch: Path, n: int,
                  repeat: bool) -> list[Measure]:
    from assay.queue.app import ensure_schema
    from assay.store.database import open_store

    folder = fresh_folder(template, scratch, f"queue-{n}")
    out: list[Measure] = []
    try:
        for cache in ("cold", "warm") if repeat else ("cold",):
            url = pg.database()
            # The store's and the queue's tables first, so that idle workers wait on them.
            store = open_store(url)
            try:
                ensure_schema(store)
                out.append(_queue_once(store, url, folder, n, cache))
            finally:
                store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _queue_once(store: Store, url: str, folder: Path, n: int, cache: str) -> Measure:
    import sqlalchemy as sa

    workers = [Worker(url, folder, i + 1) for i in range(WORKERS)]
    stopped: list[ProcessRun] = []
    try:
        # Idle and listening: each worker has registered itself in the queue.
        deadline = time.monotonic() + 120
        with store.engine.connect() as connection:
            while connection.scalar(sa.text("SELECT count(*) FROM procrastinate_workers")) \
                    < WORKERS:
                connection.rollback()
                dead = [w for w in workers if not w.alive]
                if dead:
                    tail = dead[0].run.tail(30) if dead[0].run else repr(dead[0].error)
                    raise BenchError(f"worker {dead[0].index} ended before any work:\n{tail}")
                if time.monotonic() > deadline:
                    raise BenchError("the workers did not register in 120 s")
                time.sleep(0.05)
        report = folder / "out.json"
        report.unlink(missing_ok=True)
        argv = assay("run", "evals", "--db", url, "--executor", "queue", "--concurrency",
                     str(CONCURRENCY), "--json", str(report))
        submitter = run_process(argv, cwd=folder, env=child_env(), timeout_s=TIMEOUT_S)
    finally:
        # The run is sealed (or the bench failed): stop the workers, which finish what
        # they hold (nothing) and exit, so that their launchers report their peaks.
        for worker in workers:
            stopped.append(worker.stop())
    checked(submitter, f"assay run --executor queue ({n} cases)")
    size, run_id = check_report(report, n)
    with store.engine.connect() as connection:
        trials = int(connection.scalar(sa.text(
            "SELECT count(*) FROM trials WHERE run_id = :r"), {"r": run_id}) or 0)
    if trials != n:
        raise BenchError(f"{trials} trials stored for run {run_id}; expected {n}")
    peaks = {"submitter": submitter.peak_rss_mib}
    notes = []
    for worker, run in zip(workers, stopped, strict=True):
        peaks[f"worker {worker.index}"] = run.peak_rss_mib
        if run.returncode != 0:
            notes.append(f"worker {worker.index} exited {run.returncode} after SIGTERM")
    return Measure("queue", n, cache, submitter.wall_s, peaks, size, trials, notes)


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def line(m: Measure) -> str:
    rate = m.n / m.wall_s if m.wall_s > 0 else float("nan")
    head = (f"{m.executor:<5} {m.n:>7,} cases, {m.cache} cache: wall {m.wall_s:7.2f} s, "
            f"{rate:7,.0f} trials/s, report {m.report_bytes / 1e6:6.1f} MB")
    if m.executor == "local":
        text = f"{head}, peak RSS {m.peaks['local']:7.1f} MiB"
    else:
        workers = ", ".join(f"{v:.1f}" for k, v in m.peaks.items() if k.startswith("worker "))
        text = (f"{head}, peak RSS submitter {m.peaks['submitter']:7.1f} MiB, workers "
                f"{workers} MiB (max {m.role_peak('worker max'):.1f}), "
                f"{m.trials:,} trials stored")
    return text + "".join(f"  [{note}]" for note in m.notes)


def summary(measures: list[Measure]) -> list[str]:
    lines = []
    roles = {"local": ["local"], "queue": ["submitter", "worker max"]}
    for executor, names in roles.items():
        for cache in ("cold", "warm"):
            found = {m.n: m for m in measures if m.executor == executor and m.cache == cache}
            if len(found) < 2:
                continue
            small, large = min(found), max(found)
            for role in names:
                a, b = found[small].role_peak(role), found[large].role_peak(role)
                ratio = b / a
                label = executor if role == executor else f"{executor} {role}"
                lines.append(
                    f"{label:<17} ({cache}): peak {b:7.1f} MiB at {large:,} / {a:7.1f} MiB at "
                    f"{small:,} = {ratio:5.2f}x  {'within' if ratio <= 2 else 'NOT within'} 2x"
                    f"  (wall {found[large].wall_s / found[small].wall_s:5.2f}x for "
                    f"{large / small:.3g}x the cases)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="case counts, comma-separated (default 10000,100000)")
    parser.add_argument("--quick", action="store_true", help="sizes 2000,20000")
    parser.add_argument("--executors", default="local,queue",
                        help="local, queue or both (default local,queue)")
    parser.add_argument("--repeat", action="store_true",
                        help="also a second run in the same folder (warm suite cache)")
    args = parser.parse_args()
    sizes = [2_000, 20_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    if not sizes or any(n < 1 for n in sizes):
        parser.error("--sizes: positive case counts")
    if not executors or set(executors) - {"local", "queue"}:
        parser.error("--executors: local, queue or both")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.path.insert(0, str(ROOT / "src"))

    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
          f", load average {os.getloadavg()[0]:.2f}")
    print(f"code: {ROOT / 'src'}; C = {CONCURRENCY}; queue: {WORKERS} workers, default chunk; "
          "each run the first in a fresh folder (cold suite cache)"
          + ("; warm = the second run there" if args.repeat else ""), flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="assay-bench-mem-"))
    measures: list[Measure] = []
    pg = None
    try:
        templates = {n: write_template(scratch / "suites", n) for n in sorted(set(sizes))}
        warm = write_template(scratch / "suites", WARM_UP_N)
        if "queue" in executors:
            pg = Postgres()
        # Unmeasured: byte-compile and page in what each executor imports.
        measure_local(warm, scratch, WARM_UP_N, repeat=False)
        if pg is not None:
            measure_queue(pg, warm, scratch, WARM_UP_N, repeat=False)
        for executor in executors:
            for n in sizes:
                if executor == "local":
                    got = measure_local(templates[n], scratch, n, args.repeat)
                else:
                    assert pg is not None
                    got = measure_queue(pg, templates[n], scratch, n, args.repeat)
                for m in got:
                    print(line(m), flush=True)
                measures += got
    except BenchError as error:
        raise SystemExit(f"bench failed: {error}") from None
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    lines = summary(measures)
    if lines:
        print("\nsummary: peak RSS at the largest N over the smallest (goal: within 2x)")
        for text in lines:
            print("  " + text)


if __name__ == "__main__":
    main()

"""The floors under issue 32's goals: what a run costs before the record is counted.

    bench/.venv/bin/python bench/floors.py [--repeat 3] [--sleep]

bench/user_run.py measures the goals. This script measures the parts that
set a lower bound on each goal, so that a missed goal can be read as "the
record is too slow" or "the rest of the run leaves no room". Each figure comes
from fresh processes, as in user_run.py:

1. the interpreter alone (`python -c pass`) and the run's imports: the
   modules one `assay run` imports in its own process, imported in a fresh
   interpreter (wall, less the interpreter's start);
2. a first load of the bench suite's YAML (10,000 and 12,800 cases, CPU),
   in three parts: libyaml's events alone (the least any PyYAML-based load
   can cost), the events read into case data (`marks.SuiteStream`), and
   the whole load (validated, packed, digested) with no `.assay/` (no cache
   written), then with one (both caches written), then warm;
3. whole runs of 10,000 cases in fresh folders: `--no-store` and store on,
   each with its battery's process CPU per trial (bench/_phases.py);
4. with `--sleep`: Python alone calling a 50 ms `time.sleep` 12,800 times on
   64 threads, the floor of the battery's own part of the 50 ms goal.

It then prints, per goal, the bound those figures set. Medians of
`--repeat`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import run_process  # noqa: E402
from throughput import BenchError, default_assay_cmd, machine_info  # noqa: E402
from user_run import FULL, SLEEP_L, _interpreter, fresh, import_code, write_suite  # noqa: E402

#: libyaml's events for a suite file, read and dropped: seconds of CPU.
_EVENTS = """
import sys, time, yaml
text = open(sys.argv[1], encoding="utf-8").read()
loader = yaml.CSafeLoader(text)
t = time.process_time()
while loader.check_event():
    loader.get_event()
print(time.process_time() - t)
"""

#: The events read into each case's data, as a first load reads them: seconds of CPU.
_STREAM = """
import sys, time
from pathlib import Path
from assay.suites.marks import SuiteStream
t = time.process_time()
count = sum(1 for _ in SuiteStream(Path(sys.argv[1])))
print(time.process_time() - t)
"""

#: One whole load of the suite, in the folder given (with or without .assay/): CPU.
_LOAD = """
import os, sys, time
from pathlib import Path
os.chdir(sys.argv[2])
from assay.suites import load_suite_file
t = time.process_time()
load_suite_file(Path(sys.argv[1]))
first = time.process_time() - t
t = time.process_time()
load_suite_file(Path(sys.argv[1]))
print(first, time.process_time() - t)
"""

#: Python alone: n calls of time.sleep(l) on c threads, wall seconds.
_SLEEP = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
n, l, c = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
with ThreadPoolExecutor(c) as pool:
    list(pool.map(lambda _: time.sleep(l), range(n)))
print(time.perf_counter() - t)
"""


def _seconds(py: str, code: str, *args: str, env: dict[str, str]) -> list[float]:
    run = run_process([py, "-c", code, *args], env=env, timeout_s=600)
    if run.returncode != 0:
        raise BenchError(f"a measurement failed:\n{run.tail(20)}")
    return [float(x) for x in run.stdout.split()]


def _phased(py: str, suite: Path, root: Path, extra: list[str],
            env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """One `assay run` of ``suite`` under bench/_phases.py in a fresh folder: wall, phases."""
    work = fresh(root, "floor")
    out = work / "phases.json"
    run = run_process([py, str(HERE / "_phases.py"), str(out), "run", str(suite.parent),
                       "--json", str(work / "report.json"), *extra],
                      cwd=work, env=env, timeout_s=1800)
    if run.returncode != 0:
        raise BenchError(f"assay run exited {run.returncode}:\n{run.tail(30)}")
    return run.wall_s, json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median; default 3)")
    ap.add_argument("--sleep", action="store_true",
                    help="also time Python alone sleeping 12,800 x 50 ms on 64 threads (10 s)")
    ap.add_argument("--assay", help="command that runs assay (default: repo .venv's assay)")
    ap.add_argument("--json", dest="json_out", help="also write the figures here")
    args = ap.parse_args(argv)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python writes bytecode
    assay = args.assay.split() if args.assay else default_assay_cmd()
    py = _interpreter(assay)
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"}
    info = machine_info(assay, py)
    info.pop("peer python", None)  # no peer runs here
    print("the floors under issue 32's goals")
    for key, said in info.items():
        print(f"  {key:14} {said}")
    figures: dict[str, float] = {}
    n, n_sleep = FULL.big, FULL.sleep_n
    with tempfile.TemporaryDirectory(prefix="assay-floors-") as tmp:
        root = Path(tmp)
        suite = write_suite(root / "suite", n, "echo")
        sleepy = write_suite(root / "suite-sleepy", n_sleep, "sleepy")

        walls: dict[str, list[float]] = {"off": [], "on": []}
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        modules: list[str] = []
        for _ in range(args.repeat):
            for label, extra in (("off", ["--no-store"]), ("on", [])):
                wall, phases = _phased(py, suite, root, extra, env)
                walls[label].append(wall)
                cpu[label].append(phases["cpu"].get("battery", 0.0) / n * 1e6)
                modules = phases.get("modules", modules)
        figures["run --no-store, wall s"] = median(walls["off"])
        figures["run, store on, wall s"] = median(walls["on"])
        figures["battery CPU per trial, --no-store, µs"] = median(cpu["off"])
        figures["battery CPU per trial, store on, µs"] = median(cpu["on"])

        bare = median([run_process([py, "-c", "pass"], env=env).wall_s
                        for _ in range(max(args.repeat, 5))])
        imported = median([run_process([py, "-c", import_code(modules)], env=env).wall_s
                            for _ in range(args.repeat)])
        figures["python -c pass, wall s"] = bare
        figures["the run's imports, wall s"] = imported - bare

        for size, path in ((n, suite), (n_sleep, sleepy)):
            file = str(path)
            figures[f"{size:,} cases: libyaml events, CPU s"] = median(
                [_seconds(py, _EVENTS, file, env=env)[0] for _ in range(args.repeat)])
            figures[f"{size:,} cases: read into case data, CPU s"] = median(
                [_seconds(py, _STREAM, file, env=env)[0] for _ in range(args.repeat)])
            bare_loads, kept, warm = [], [], []
            for _ in range(args.repeat):
                bare_loads.append(_seconds(py, _LOAD, file, str(fresh(root, "load")),
                                           env=env)[0])
                folder = fresh(root, "load")
                (folder / ".assay").mkdir()
                first, again = _seconds(py, _LOAD, file, str(folder), env=env)
                kept.append(first)
                warm.append(again)
            figures[f"{size:,} cases: first load, no .assay/, CPU s"] = median(bare_loads)
            figures[f"{size:,} cases: first load, caches written, CPU s"] = median(kept)
            figures[f"{size:,} cases: warm load, CPU s"] = median(warm)

        if args.sleep:
            figures["python alone: 12,800 x 50 ms on 64 threads, wall s"] = median(
                [_seconds(py, _SLEEP, str(n_sleep), str(SLEEP_L), str(FULL.sleep_c),
                          env=env)[0] for _ in range(args.repeat)])

    print()
    for name, value in figures.items():
        print(f"  {name:58} {value:8.3f}")
    off, on = figures["run --no-store, wall s"], figures["run, store on, wall s"]
    start = figures["python -c pass, wall s"] + figures["the run's imports, wall s"]
    load_sleep = figures[f"{n_sleep:,} cases: first load, caches written, CPU s"]
    ideal = n_sleep * SLEEP_L / FULL.sleep_c
    print("\nwhat these figures bound")
    print(f"  DeepEval >= 10x on a first run: even a record that cost nothing leaves "
          f"assay at the --no-store wall, {off:.2f} s: DeepEval must take >= {10 * off:.1f} s")
    print(f"  record's share <= 15%: the store-on run may cost {off / 0.85 - off:.2f} s over "
          f"--no-store; it costs {on - off:.2f} s ({1 - off / on:.1%})")
    print(f"  harness CPU per trial <= 20 µs: --no-store alone is "
          f"{figures['battery CPU per trial, --no-store, µs']:.1f} µs")
    sleeping = figures.get("python alone: 12,800 x 50 ms on 64 threads, wall s", ideal)
    floor = sleeping + start + load_sleep
    print(f"  50 ms agent <= 1.1 x {ideal:.1f} s = {1.1 * ideal:.2f} s: start-up and imports "
          f"{start:.2f} s + a first load {load_sleep:.2f} s + sleeping "
          f"{sleeping:.2f} s{'' if args.sleep else ' (the ideal; --sleep measures it)'} = "
          f"{floor:.2f} s before registering, sealing or reporting")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"machine": info, "repeat": args.repeat,
                                                   "figures": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, RuntimeError) as exc:
        print(f"\nbench failed: {exc}", file=sys.stderr)
        sys.exit(3)

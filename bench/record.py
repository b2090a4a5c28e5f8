"""What recording a run costs: `assay run` with the store and ledger on vs `--no-store`.

    bench/.venv/bin/python bench/record.py [--n 10000] [--repeat 5] [--concurrency 8]
    (any Python with the repo installed will do; no peers are needed)

On the no-latency echo suite of bench/throughput.py (N cases, one trial
each), it alternates fresh processes of `assay run DIR --json r.json` with the
record off (`--no-store`) and on (the default store, `.assay/assay.db`, in a
fresh working folder, created and migrated beforehand; a third series lets
the run create it), and prints the median
whole-process wall, trials/s and peak RSS of each, and the cost of the record
as a share of throughput: 1 - (trials/s on) / (trials/s off). The goal (issue
4) is under 15 %. It also prints the same share inside the battery, from the
report's start and finish times (registration to the last trial: start-up,
suite loading and the seal excluded). Each "on" run is checked: exit 0, all N passed, the report
sealed, and `assay ledger verify` holds with N + 2 entries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import ProcessRun  # noqa: E402
from throughput import assay_env, default_assay_cmd, run_assay_suite, write_suite  # noqa: E402

AGENT = "python:bench_agent:echo"


def one(assay: list[str], work: Path, n: int, concurrency: int, store: bool,
        fresh: bool = False) -> ProcessRun:
    """One fresh process in a fresh working folder (so the store starts empty)."""
    folder = Path(tempfile.mkdtemp(dir=work))
    suite = folder / "suite"
    write_suite(suite, suite_id="bench/record@1", target=AGENT, n=n)
    if store and not fresh:
        # An existing, migrated store (the steady state); the first run in a
        # fresh folder also creates and migrates it, measured apart.
        subprocess.run([*assay, "ledger", "verify"], cwd=folder, capture_output=True,
                       env=assay_env(suite), timeout=600, check=True)
    run = run_assay_suite(assay, suite, n, concurrency, 1800.0, store=store)
    if store:
        seal = run.extra.get("run_id")
        checked = subprocess.run([*assay, "ledger", "verify"], cwd=folder, capture_output=True,
                                 text=True, env=assay_env(suite), timeout=600)
        if checked.returncode != 0 or not checked.stdout.startswith(f"ledger: {n + 2} entries"):
            raise SystemExit(f"run {seal}: the ledger does not verify as expected:\n"
                             f"{checked.stdout}{checked.stderr}")
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--assay", help="command that runs assay (default: repo .venv's assay)")
    ap.add_argument("--sleepy", action="store_true",
                    help="an agent that sleeps 50 ms a trial (bench/throughput.py's), "
                         "instead of the no-latency echo")
    args = ap.parse_args(argv)
    global AGENT
    if args.sleepy:
        AGENT = "python:bench_agent:sleepy"
    assay = args.assay.split() if args.assay else default_assay_cmd()
    walls: dict[bool, list[float]] = {False: [], True: []}
    inner: dict[bool, list[float]] = {False: [], True: []}
    rss: dict[bool, float] = {False: 0.0, True: 0.0}
    with tempfile.TemporaryDirectory(prefix="assay-record-bench-") as tmp:
        work = Path(tmp)
        one(assay, work, min(args.n, 100), args.concurrency, True)  # warm the file cache
        firsts: list[float] = []
        for _ in range(args.repeat):
            for store in (False, True):
                run = one(assay, work, args.n, args.concurrency, store)
                walls[store].append(run.wall_s)
                inner[store].append(float(run.extra["in_run_s"] or 0.0))
                rss[store] = max(rss[store], run.peak_rss_mib)
            firsts.append(one(assay, work, args.n, args.concurrency, True, fresh=True).wall_s)
    off, on = statistics.median(walls[False]), statistics.median(walls[True])
    rate_off, rate_on = args.n / off, args.n / on
    cost = 1 - rate_on / rate_off
    print(f"# assay record cost, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{platform.python_version()}, {platform.machine()}, "
          f"N={args.n}, concurrency {args.concurrency}, {args.repeat} runs each, agent {AGENT}")
    for label, store, wall, rate in (("record off (--no-store)", False, off, rate_off),
                                     ("record on (default store)", True, on, rate_on)):
        spread = ", ".join(f"{w:.2f}" for w in walls[store])
        print(f"{label:28s} median wall {wall:6.2f} s  {rate:8.0f} trials/s  "
              f"peak RSS {rss[store]:5.0f} MiB  (walls: {spread})")
    in_off, in_on = statistics.median(inner[False]), statistics.median(inner[True])
    print(f"{'in the battery (report times)':28s} off {args.n / in_off:8.0f} trials/s, "
          f"on {args.n / in_on:8.0f} trials/s: {1 - in_off / in_on:.1%} "
          "(registration to the last trial; excludes start-up and the seal)")
    first = statistics.median(firsts)
    print(f"{'record on, new store':28s} median wall {first:6.2f} s  {args.n / first:8.0f} "
          f"trials/s  (the first run in a folder also creates and migrates the store)")
    verdict = "met" if cost < 0.15 else "MISSED"
    print(f"record cost: {cost:.1%} of throughput (goal < 15%: {verdict})")
    print(json.dumps({"n": args.n, "off_s": off, "on_s": on, "first_s": first, "cost": cost,
                      "battery_off_s": in_off, "battery_on_s": in_on}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

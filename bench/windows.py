"""Three `assay run --window 24h` racing for one window: one battery, decided by the store.

    .venv/bin/python bench/windows.py [--n 1000] [--repeat 3]

Three fresh processes of the same windowed command start together against one
fresh SQLite store (N no-latency echo cases). The store's unique index lets
exactly one register its battery; the other two print that run's id and exit
0 without running. Printed per repeat: the wall until all three exited, the
winner's wall, each loser's wall (start-up, loading the suite, starting the
agent, the refused insert), against one lone windowed run — the ideal is the
lone run's wall, since the losers run nothing. Checked each time: one row in
`runs`, N trial rows, every exit 0, the losers naming the winner's id, and
`assay ledger verify`. No sleeps anywhere: the race is whatever the scheduler
makes of three processes started in one loop.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from throughput import assay_env, default_assay_cmd, write_suite  # noqa: E402


def race(assay: list[str], n: int, racers: int) -> tuple[float, list[float], str]:
    folder = Path(tempfile.mkdtemp(prefix="assay-windows-"))
    suite = folder / "suite"
    write_suite(suite, suite_id="bench/windows@1", target="python:bench_agent:echo", n=n)
    env = assay_env(suite)
    subprocess.run([*assay, "ledger", "verify"], cwd=folder, env=env, capture_output=True,
                   check=True, timeout=600)  # the store exists before the race
    command = [*assay, "run", str(suite), "--window", "24h", "--concurrency", "8"]
    start = time.perf_counter()
    procs = [subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(racers)]
    walls: list[float] = [0.0] * racers
    outs: list[str] = [""] * racers
    pending = dict(enumerate(procs))
    while pending:  # reap in whichever order they end, each with its own wall
        for i, proc in list(pending.items()):
            try:
                out, err = proc.communicate(timeout=0.01)
            except subprocess.TimeoutExpired:
                continue
            walls[i] = time.perf_counter() - start
            outs[i] = out
            if proc.returncode != 0:
                raise SystemExit(f"racer {i} exit {proc.returncode}:\n{err[-2000:]}")
            del pending[i]
    total = time.perf_counter() - start
    with sqlite3.connect(folder / ".assay" / "assay.db") as db:
        runs = db.execute("select run_id from runs").fetchall()
        trials = db.execute("select count(*) from trials").fetchone()[0]
    assert len(runs) == 1 and trials == n, (runs, trials)
    winner = runs[0][0]
    losers = [o for o in outs if "is the existing battery" in o]
    assert len(losers) == racers - 1 and all(o.startswith(winner) for o in losers), outs
    verify = subprocess.run([*assay, "ledger", "verify"], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=600)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    return total, walls, winner


def lone(assay: list[str], n: int) -> float:
    folder = Path(tempfile.mkdtemp(prefix="assay-windows-"))
    suite = folder / "suite"
    write_suite(suite, suite_id="bench/windows@1", target="python:bench_agent:echo", n=n)
    env = assay_env(suite)
    subprocess.run([*assay, "ledger", "verify"], cwd=folder, env=env, capture_output=True,
                   check=True, timeout=600)
    start = time.perf_counter()
    subprocess.run([*assay, "run", str(suite), "--window", "24h", "--concurrency", "8"],
                   cwd=folder, env=env, capture_output=True, check=True, timeout=1800)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--racers", type=int, default=3)
    args = parser.parse_args(argv)
    assay = default_assay_cmd()
    alone = [lone(assay, args.n) for _ in range(args.repeat)]
    print(f"# {args.racers} racers, {args.n} cases, one SQLite store; lone windowed run "
          f"median {statistics.median(alone):.2f}s")
    print(f"{'repeat':<7} {'all done':>9} {'winner':>8} {'losers':>16}  battery")
    for i in range(args.repeat):
        total, walls, winner = race(assay, args.n, args.racers)
        ordered = sorted(walls)
        print(f"{i + 1:<7} {total:>8.2f}s {ordered[-1]:>7.2f}s "
              f"{', '.join(f'{w:.2f}s' for w in ordered[:-1]):>16}  {winner}")
    print(json.dumps({"lone_s": alone}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What deciding costs: `assay compare` of two stored N-case runs, and `assay gate` on one.

    .venv/bin/python bench/decide.py [--n 10000] [--repeat 5]

Two runs of the no-latency echo suite of bench/throughput.py (N cases, one
trial each) go into a fresh store: the honest echo agent, and a candidate
that answers every tenth case wrongly. Then fresh processes of

    assay compare BASE CAND --json c.json
    assay compare --agent bench previous current --json ca.json   (the two versions by name)
    assay gate CAND --min-score 0.95 --json g1.json            (a gate on one run)
    assay gate CAND --baseline BASE --min-score 0.5 --json g.json

are timed (whole process: start-up, reading the reports, aligning, the
ledger entry for the gate), with their peak RSS. The goal (issue 9) is under
1 s for the comparison and for a gate on one run, at N = 10,000. Each
result is checked: compare says `worse` with N/10 regressed rows; both
gates block and the ledger still verifies. The same
work in-process (load + decide, no start-up) is printed too, to show where
the whole-process time goes.
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import run_process  # noqa: E402
from throughput import assay_env, default_assay_cmd, write_suite  # noqa: E402

CANDIDATE = '''
def echo(input):
    n = int(input.rsplit("-", 1)[1])
    return "wrong" if n % 10 == 0 else input.replace("case", "answer")
'''


def stored_run(assay: list[str], folder: Path, suite: Path, target: str) -> str:
    done = subprocess.run([*assay, "run", str(suite), "--target", target, "--json", "r.json",
                           "--concurrency", "8"], cwd=folder, capture_output=True, text=True,
                          env=assay_env(suite), timeout=1800)
    if done.returncode not in (0, 1):
        raise SystemExit(f"assay run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return str(json.loads((folder / "r.json").read_text())["run_id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    assay = default_assay_cmd()

    folder = Path(tempfile.mkdtemp(prefix="assay-decide-"))
    suite = folder / "suite"
    write_suite(suite, suite_id="bench/decide@1", target="python:bench_agent:echo", n=args.n)
    (suite / "candidate_agent.py").write_text(CANDIDATE)
    start = time.perf_counter()
    base = stored_run(assay, folder, suite, "python:bench_agent:echo")
    cand = stored_run(assay, folder, suite, "python:candidate_agent:echo")
    print(f"# two stored runs of {args.n} cases in {time.perf_counter() - start:.1f} s "
          f"({folder})")
    for target in ("python:bench_agent:echo", "python:candidate_agent:echo"):
        published = subprocess.run([*assay, "agent", "publish", target, "--dir", str(suite),
                                    "--name", "bench"], cwd=folder, capture_output=True,
                                   text=True, env=assay_env(suite), timeout=600)
        assert published.returncode == 0, published.stderr

    commands = {
        "compare": [*assay, "compare", base, cand, "--json", "c.json"],
        "by agent": [*assay, "compare", "--agent", "bench", "previous", "current",
                     "--json", "ca.json"],
        "gate": [*assay, "gate", cand, "--min-score", "0.95", "--json", "g1.json"],
        "gate+base": [*assay, "gate", cand, "--baseline", base, "--min-score", "0.5",
                      "--json", "g.json"],
    }
    walls: dict[str, list[float]] = {name: [] for name in commands}
    rss: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, command in commands.items():
            done = run_process(command, cwd=folder, env=assay_env(suite))
            if done.returncode != 1:
                raise SystemExit(f"{name}: exit {done.returncode}, expected 1\n{done.tail()}")
            walls[name].append(done.wall_s)
            rss[name].append(done.peak_rss_mib)
    compared = json.loads((folder / "c.json").read_text())
    regressed = sum(1 for r in compared["rows"] if r["change"] == "regressed")
    assert compared["verdict"] == "worse" and regressed == (args.n + 9) // 10, regressed
    by_agent = json.loads((folder / "ca.json").read_text())
    assert by_agent["rows"] == compared["rows"] and by_agent["agent"]["name"] == "bench"
    for name in ("g.json", "g1.json"):
        gated = json.loads((folder / name).read_text())
        assert gated["decision"] == "blocked", gated
    verify = subprocess.run([*assay, "ledger", "verify"], cwd=folder, capture_output=True,
                            text=True, env=assay_env(suite), timeout=600)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # In-process: the same loads and decisions without interpreter start-up.
    inproc = subprocess.run([sys.executable, "-c", IN_PROCESS, base, cand], cwd=folder,
                            capture_output=True, text=True, env=assay_env(suite), timeout=600)
    if inproc.returncode != 0:
        raise SystemExit(inproc.stderr)
    help_walls = [run_process([*assay, "--help"], cwd=folder).wall_s for _ in range(5)]

    today = dt.datetime.now(dt.UTC).date()
    print(f"# {today} · {platform.node()} · {platform.processor() or platform.machine()}"
          f" · Python {platform.python_version()} · {args.n} cases · median of {args.repeat}")
    print(f"{'command':<10} {'median wall':>12} {'min':>8} {'max':>8} {'peak RSS':>10}")
    for name in commands:
        w = walls[name]
        print(f"{name:<10} {statistics.median(w):>11.3f}s {min(w):>7.3f}s {max(w):>7.3f}s "
              f"{max(rss[name]):>8.0f}MiB")
    print(f"{'--help':<10} {statistics.median(help_walls):>11.3f}s   (start-up alone)")
    print(inproc.stdout.strip())
    return 0


IN_PROCESS = """
import sys, time
from assay.analysis.compare import compare
from assay.analysis.gate import Policies, decide
from assay.analysis.run_facts import load_stored
from assay.store.database import open_store

base_id, cand_id = sys.argv[1], sys.argv[2]
store = open_store(None)
best = {}
for _ in range(5):
    t0 = time.perf_counter()
    base = load_stored(store, base_id)
    cand = load_stored(store, cand_id)
    t1 = time.perf_counter()
    compare(base, cand)
    t2 = time.perf_counter()
    decide(cand, Policies(baseline=base_id, min_score=0.5), base)
    t3 = time.perf_counter()
    for key, value in (("load both", t1 - t0), ("compare", t2 - t1), ("gate decide", t3 - t2)):
        best[key] = min(best.get(key, 1e9), value)
print("in-process (best of 5): " + ", ".join(f"{k} {v:.3f}s" for k, v in best.items()))
"""


if __name__ == "__main__":
    sys.exit(main())

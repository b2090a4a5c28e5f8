"""What `assay.online` adds to a production call: p50/p99 of a trivial function, with and without.

    PYTHONPATH=src .venv/bin/python bench/online.py [--calls 100000] [--rounds 3] [--seed N]

A trivial agent function (a small dict in, a small dict out) is called
``--calls`` times in a loop, each call timed on its own with
``time.perf_counter_ns``, in three set-ups, one after another, in one
process:

- ``plain``: the function itself;
- ``K = 5%``: wrapped by ``assay.online(suite, sample=0.05)``;
- ``K = 100%``: wrapped with ``sample=1.0`` (every call is recorded and
  buffered, or dropped when the buffer of 1,000 is full: the cost of a
  sampled call).

The grader thread runs while the calls are made, as it would in
production: grading competes with the calls for the interpreter (the GIL),
and that is part of what a call pays. Every answer passes the suite's
reference-free checks (status, type, not_contains), so nothing is written to
the store during the loop. The added latency is the difference of the
quantiles (p50 of wrapped minus p50 of plain; p99 likewise), per round; the
median over rounds is printed with the range. After each wrapped loop the
buffer is drained, and how many samples were graded and dropped, and the
grader's rate, are printed. The goal (issue 11): p99 added < 1 ms at K = 5%.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import assay  # noqa: E402

SUITE = """\
suite: bench/online@1
cases:
  - id: answers
    input: {question: hi}
    expect:
      - status: ok
      - {path: $.answer, type: string}
      - not_contains: Traceback
"""


def agent(request: dict[str, Any]) -> dict[str, Any]:
    """A trivial production function: no I/O, a few dictionary operations."""
    return {"answer": "re: " + request["question"], "id": request["id"]}


def timed(function: Callable[[dict[str, Any]], Any], calls: int) -> list[int]:
    """Each call's time in nanoseconds (the timer's own cost is in every figure alike)."""
    took = [0] * calls
    clock = time.perf_counter_ns
    for i in range(calls):
        request = {"question": "where is my parcel?", "id": i}
        started = clock()
        function(request)
        took[i] = clock() - started
    return took


def quantile(values: list[int], q: float) -> float:
    """The q-quantile by nearest rank, in microseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args(argv)
    today = dt.datetime.now(dt.UTC).date()
    print(f"{today}  Python {platform.python_version()}  {platform.machine()}  "
          f"calls {args.calls:,}  rounds {args.rounds}  seed {args.seed}")
    with tempfile.TemporaryDirectory() as folder:
        suite = Path(folder) / "online.suite.yaml"
        suite.write_text(SUITE, encoding="utf-8")
        db = f"sqlite:///{Path(folder) / 'assay.db'}"
        added: dict[str, list[tuple[float, float, float]]] = {"K = 5%": [], "K = 100%": []}
        plain_q: list[tuple[float, float, float]] = []
        for round_ in range(1, args.rounds + 1):
            plain = timed(agent, args.calls)
            base = (quantile(plain, 0.5), quantile(plain, 0.99), quantile(plain, 0.999))
            plain_q.append(base)
            print(f"round {round_}: plain    p50 {base[0]:7.2f} µs  p99 {base[1]:7.2f} µs  "
                  f"p99.9 {base[2]:8.2f} µs")
            for name, rate in (("K = 5%", 0.05), ("K = 100%", 1.0)):
                wrapper = assay.online(suite, sample=rate, seed=args.seed, db=db)
                took = timed(wrapper(agent), args.calls)
                started = time.perf_counter()
                left = wrapper.stats.sampled - wrapper.stats.graded - wrapper.stats.dropped
                assert wrapper.close(600), "the grader did not drain"
                drained = time.perf_counter() - started
                stats = wrapper.stats
                p50, p99, p999 = (quantile(took, q) for q in (0.5, 0.99, 0.999))
                added[name].append((p50 - base[0], p99 - base[1], p999 - base[2]))
                rate_note = f"{left / drained:,.0f}/s" if drained > 0 and left else "-"
                print(f"         {name:8} p50 {p50:7.2f} µs  p99 {p99:7.2f} µs  "
                      f"p99.9 {p999:8.2f} µs  sampled {stats.sampled:,}  graded {stats.graded:,}  "
                      f"dropped {stats.dropped:,}  passed {stats.passed:,}  "
                      f"grader after the loop {rate_note}")
                assert stats.failed == stats.inconclusive == stats.grader_errors == 0
    print()
    print("added, µs: median over rounds [min, max]")
    for name, values in added.items():
        cells = []
        for at, label in enumerate(("p50", "p99", "p99.9")):
            got = [v[at] for v in values]
            cells.append(f"{label} {statistics.median(got):+8.2f} [{min(got):+.2f}, "
                         f"{max(got):+.2f}]")
        print(f"  {name:8}  " + "   ".join(cells))
    p99_5 = statistics.median(v[1] for v in added["K = 5%"])
    print(f"goal: p99 added < 1000 µs at K = 5%: {'met' if p99_5 < 1000 else 'NOT met'} "
          f"({p99_5:+.2f} µs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

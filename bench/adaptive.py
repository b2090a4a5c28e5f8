"""What `--adaptive` costs and how often it ends wrong: simulated batteries of one quality check.

    PYTHONPATH=src .venv/bin/python bench/adaptive.py [--batteries 1000] [--threshold 0.8]
        [--start 3] [--max-trials 30] [--seed N] [--p 0.5,0.6,...]

For each true success probability p, ``--batteries`` batteries of one case
with one quality check: each starts with ``--start`` trials and adds one at
a time while ``grading.adaptive.add_trial`` says so (its Wilson 95% interval
straddles the threshold, fewer than ``--max-trials`` trials). The verdict is
the fold's (SPEC §5): pass when passed/trials reaches the threshold. The
truth is pass when p >= threshold. Printed per p, for the adaptive rule and
for a fixed-n baseline that always runs ``--max-trials`` trials (on the same
draws: each battery's trials are drawn once, the adaptive run reads a prefix):

- mean and p95 trials used (p95 by nearest rank);
- "at max": the share that stopped at the cap (for the baseline, all);
- "undecided": the share whose interval still straddles at the end (the fold
  reports ``straddles``; ``gate --confident`` refuses them);
- "wrong": the share whose verdict differs from the truth, straddling or not;
- "wrong, clear": wrong while the interval is clear of the threshold (a
  confident error: nothing in the report warns of it).

Seeded ``random.Random`` (the seed is printed; PRINCIPLES 7); pure CPU, no
sleeps; under a second for the default 9 × 1,000 batteries.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from assay.grading.adaptive import DEFAULT_MAX_TRIALS, MIN_TRIALS, add_trial  # noqa: E402
from assay.grading.fold import EPSILON  # noqa: E402
from assay.grading.stats import straddles, wilson  # noqa: E402

DEFAULT_PS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)


@dataclass
class Tally:
    """The ends of the batteries of one p under one policy."""

    used: list[int]
    at_max: int = 0
    undecided: int = 0
    wrong: int = 0
    wrong_clear: int = 0

    def end(self, passed: int, n: int, threshold: float, cap: int, truth: bool) -> None:
        self.used.append(n)
        self.at_max += n >= cap
        open_ = straddles(*wilson(passed, n), threshold)
        verdict = passed / n >= threshold - EPSILON  # as fold._quality folds a rate
        self.undecided += open_
        self.wrong += verdict != truth
        self.wrong_clear += verdict != truth and not open_

    def row(self, label: str, p: float, batteries: int) -> str:
        ordered = sorted(self.used)
        p95 = ordered[math.ceil(0.95 * len(ordered)) - 1]
        mean = sum(ordered) / len(ordered)

        def share(k: int) -> str:
            return f"{100 * k / batteries:.1f}%"

        return (f"| {p:g} | {label} | {mean:.1f} | {p95} | {share(self.at_max)} | "
                f"{share(self.undecided)} | {share(self.wrong)} | {share(self.wrong_clear)} |")


def simulate(p: float, batteries: int, threshold: float, start: int, cap: int,
             rng: random.Random) -> tuple[Tally, Tally]:
    """(adaptive, fixed-n) tallies for ``batteries`` batteries at success probability p."""
    adaptive, fixed = Tally([]), Tally([])
    truth = p >= threshold
    for _ in range(batteries):
        draws = [rng.random() < p for _ in range(cap)]
        n = start
        passed = sum(draws[:n])
        while add_trial(passed, n, threshold, cap):
            passed += draws[n]
            n += 1
        adaptive.end(passed, n, threshold, cap, truth)
        fixed.end(sum(draws), cap, threshold, cap, truth)
    return adaptive, fixed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batteries", type=int, default=1000)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--start", type=int, default=MIN_TRIALS)
    parser.add_argument("--max-trials", type=int, default=DEFAULT_MAX_TRIALS)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--p", default=",".join(f"{p:g}" for p in DEFAULT_PS),
                        help="true success probabilities, comma-separated")
    args = parser.parse_args(argv)
    if not 1 <= args.start <= args.max_trials:
        parser.error("need 1 <= --start <= --max-trials")
    ps = [float(x) for x in args.p.split(",")]

    rng = random.Random(args.seed)
    began = time.perf_counter()
    print(f"seed {args.seed}; {args.batteries} batteries per p; threshold {args.threshold:g}; "
          f"start {args.start}; max {args.max_trials}")
    print()
    print("| p | policy | mean trials | p95 trials | at max | undecided | wrong | wrong, clear |")
    print("|---|---|---|---|---|---|---|---|")
    for p in ps:
        adaptive, fixed = simulate(p, args.batteries, args.threshold, args.start,
                                   args.max_trials, rng)
        print(adaptive.row("adaptive", p, args.batteries))
        print(fixed.row(f"fixed {args.max_trials}", p, args.batteries))
    print()
    print(f"{time.perf_counter() - began:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

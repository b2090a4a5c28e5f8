"""Ledger bench: `Ledger.verify()` entries/s, and building and verifying one receipt.

    .venv/bin/python bench/ledger.py [--n 200000]

1. Builds a ledger of N entries (every kind in turn, a small JSON content
   each, as a run's trial verdicts are) in a temporary SQLite store, with
   `Ledger.append_many` in batches of 10,000, and signs one stored head over
   all of them (`Ledger.record_head`), so verify also checks a head's root.
2. Times `Ledger.verify()` in this process (reading every row and stored
   content, the chain, every content digest, the Merkle root of the head and
   its signature), best of 3, and prints entries/s of wall time and of
   process CPU time (the latter is less disturbed by other work on the
   machine). Goal: >= 200,000 entries/s.
3. Times building one receipt the way `assay receipt RUN` does after its
   head is stored (the inclusion proof over the head's N leaves and the
   JSON) and `receipts.verify` of it, median of many, in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assay.store.database import open_store
from assay.store.ledger import receipts
from assay.store.ledger.chain import KINDS, Kind

GOAL = 200_000
BATCH = 10_000


def _timed(action: Any) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = action()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="entries (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="verify runs (best of)")
    args = parser.parse_args()
    n: int = args.n
    key = Ed25519PrivateKey.generate()
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'assay.db'}")
        built_s = time.perf_counter()
        for start in range(0, n, BATCH):
            items: list[tuple[Kind, Any]] = [
                (KINDS[i % len(KINDS)],  # type: ignore[misc]
                 {"run_id": f"run-{i // 1000}", "case_id": f"case-{i}", "n": 1,
                  "outcome": "pass", "verdicts": ["pass", "pass"]})
                for i in range(start, min(n, start + BATCH))]
            store.ledger.append_many(items)
        head, raw_key = store.ledger.record_head(key)
        built_s = time.perf_counter() - built_s
        print(f"built {n:,} entries and one head in {built_s:.1f} s")

        best_wall = best_cpu = float("inf")
        for _ in range(args.rounds):
            wall, cpu, (result, count) = _timed(lambda: store.ledger.verify(key.public_key()))
            assert result.ok and count == n and result.heads == 1, result.reason
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        rate, cpu_rate = n / best_wall, n / best_cpu
        verdict = "met" if rate >= GOAL else "NOT met"
        print(f"Ledger.verify(): {best_wall:.3f} s wall = {rate:,.0f} entries/s "
              f"({best_cpu:.3f} s CPU = {cpu_rate:,.0f} entries/s), best of {args.rounds}; "
              f"goal >= {GOAL:,}/s: {verdict}")

        entries = store.ledger.entries()
        sealed = next(e for e in entries if e.kind == "run-sealed")
        stored = store.ledger.content(sealed.content_digest)
        assert stored is not None
        content = json.loads(stored)
        summary = {"run_id": content["run_id"]}
        build_ms: list[float] = []
        verify_ms: list[float] = []
        for _ in range(15):
            wall, _, built = _timed(lambda: receipts.build(summary, entries, sealed.index,
                                                           content, head, raw_key))
            build_ms.append(wall * 1000)
        for _ in range(200):
            wall, _, check = _timed(lambda: receipts.verify(built))
            verify_ms.append(wall * 1000)
        assert check.ok, check.reason
        print(f"receipt: build {statistics.median(build_ms):.1f} ms "
              f"(inclusion proof over {head.size:,} leaves), "
              f"verify {statistics.median(verify_ms):.3f} ms (median)")
        store.close()


if __name__ == "__main__":
    main()

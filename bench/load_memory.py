"""Memory and time of loading a large YAML suite, each load in a fresh process.

    python bench/load_memory.py [--sizes 10000,100000] [--keep DIR]

For each size a suite of trivial cases is written (one line per case, the
shape of bench/throughput.py's suites) and loaded three ways, each in its own
process so that one load's memory cannot hide in another's:

- ``cold``: ``.assay/`` exists but holds no parsed-suite cache entry, so the
  YAML is parsed (and the entry written), as on a first run;
- ``warm``: the same again, now reading the cache entry;
- ``nocache``: no ``.assay/`` at all (``--no-store`` or another store): parsed,
  nothing written.

Printed per load: the peak RSS of the process, its RSS after imports and
after the load (with the loaded suite still held), the wall of the load and
of what a run then asks of every case (its facets and ``runs.suite``'s text:
``after`` phase). The goal (issue 13 item 5) is a 100k peak within about 1.3×
the 10k peak: loading must hold the cases compactly, not grow with them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

#: Runs in the child: import, load, touch every case as a run does, report.
_CHILD = r"""
import gc, json, resource, sys, time
from pathlib import Path

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20

from assay.suites import load_suite_file
from assay.store.runs.documents import stored_suite_json, stored_suite_pieces
gc.collect()
base = rss()
t0 = time.perf_counter()
loaded = load_suite_file(Path(sys.argv[1]))
load_s = time.perf_counter() - t0
gc.collect()
after_load = rss()
peak_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t1 = time.perf_counter()
count = 0
for case in loaded.suite.cases:
    loaded.case_facets(case)
    count += 1
size = sum(len(piece) for piece in stored_suite_pieces(loaded.suite))
after_s = time.perf_counter() - t1
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"cases": count, "digest": loaded.digest, "base_mib": base,
                  "after_load_mib": after_load, "peak_load_mib": peak_load, "peak_mib": peak,
                  "load_s": load_s, "after_s": after_s, "suite_text_mb": size / 1e6}))
"""

_OLD_CHILD = _CHILD.replace("stored_suite_json, stored_suite_pieces", "stored_suite_json") \
    .replace("sum(len(piece) for piece in stored_suite_pieces(loaded.suite))",
             "len(stored_suite_json(loaded.suite))")


def write_suite(path: Path, cases: int) -> None:
    """A suite of ``cases`` trivial cases, one line each."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write("suite: bench/load@1\ntarget: echo\ncases:\n")
        for i in range(cases):
            fh.write(f"  - {{id: c{i}, input: i{i}, expect: [{{path: $.echo, equals: i{i}}}]}}\n")


def load_once(folder: Path, suite: Path) -> dict[str, object]:
    """One load in a fresh process, run from ``folder`` (where ``.assay/`` may be)."""
    from assay.store.runs import documents

    child = _CHILD if hasattr(documents, "stored_suite_pieces") else _OLD_CHILD
    done = subprocess.run([sys.executable, "-c", child, str(suite)], cwd=folder,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"load failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--keep", type=Path, help="write the suites here and keep them")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        rows = []
        for size in sizes:
            folder = root / f"n{size}"
            folder.mkdir(parents=True, exist_ok=True)
            suite = folder / "bench.suite.yaml"
            write_suite(suite, size)
            plain = root / f"n{size}-nocache"
            plain.mkdir(exist_ok=True)
            rows.append((size, "nocache", load_once(plain, suite)))
            (folder / ".assay").mkdir(exist_ok=True)
            for entry in (folder / ".assay").rglob("*.json*"):
                entry.unlink()
            rows.append((size, "cold", load_once(folder, suite)))
            rows.append((size, "warm", load_once(folder, suite)))
    print(f"{'cases':>7} {'load':>8} {'base':>6} {'after':>7} {'peak@load':>9} {'peak':>7} "
          f"{'load s':>7} {'after s':>7}")
    for size, kind, r in rows:
        print(f"{size:>7} {kind:>8} {r['base_mib']:>6.0f} {r['after_load_mib']:>7.0f} "
              f"{r['peak_load_mib']:>9.0f} {r['peak_mib']:>7.0f} {r['load_s']:>7.2f} "
              f"{r['after_s']:>7.2f}")
    digests = {size: {str(r["digest"]) for s, _, r in rows if s == size} for size in sizes}
    for size, found in digests.items():
        if len(found) != 1:
            raise SystemExit(f"{size} cases: the loads disagree on the digest: {found}")
        print(f"{size:>7} digest {found.pop()}")


if __name__ == "__main__":
    main()

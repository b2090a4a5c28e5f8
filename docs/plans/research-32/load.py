"""Where loading 10,000 cases goes, warm (parse cache kept), and what a case cache could save.

cd /tmp/hotpath-research/loadwd && PYTHONPATH=/work/main/src nice -n 5 \
    /work/main/.venv/bin/python ../load.py
"""
from __future__ import annotations

import cProfile
import gc
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/main/bench")
from throughput import write_suite  # noqa: E402

Path(".assay").mkdir(exist_ok=True)
SUITE = Path("suite")
if not (SUITE / "bench.suite.yaml").exists():
    write_suite(SUITE, suite_id="bench/load@1", target="python:bench_agent:echo", n=10000)
path = SUITE / "bench.suite.yaml"

from assay.suites import load_suite_file  # noqa: E402

t0 = time.perf_counter(); c0 = time.process_time()
loaded = load_suite_file(path)
print(f"first load (cold, writes cache): wall {time.perf_counter() - t0:.3f}  "
      f"cpu {time.process_time() - c0:.3f}")
for i in range(3):
    t0 = time.perf_counter(); c0 = time.process_time()
    loaded = load_suite_file(path)
    print(f"warm load {i}: wall {time.perf_counter() - t0:.3f}  cpu {time.process_time() - c0:.3f}")

prof = cProfile.Profile()
prof.enable()
loaded = load_suite_file(path)
prof.disable()
prof.dump_stats("/tmp/hotpath-research/load.prof")
st = pstats.Stats(prof)
st.sort_stats("cumulative").print_stats(28)
st.sort_stats("tottime").print_stats(18)

# What the pieces cost on their own
from assay.model import Case  # noqa: E402
from assay.suites.build import _CASES  # noqa: E402
from assay.suites.loader import _Digests  # noqa: E402

cases = list(loaded.suite.cases)
print("cases", len(cases))
t0 = time.perf_counter()
rows = [c.model_dump(mode="json") for c in cases]
print(f"model_dump(mode=json) x{len(cases)}: {time.perf_counter() - t0:.3f}")
blob = json.dumps(rows, separators=(",", ":")).encode()
print("as JSON:", len(blob), "bytes")
t0 = time.perf_counter()
back = json.loads(blob)
print(f"json.loads of it: {time.perf_counter() - t0:.3f}")
gc.disable()
import pickle
from assay.model.packed import _CASE, _ASSERTION
t0 = time.perf_counter()
rows2 = [[list(_CASE.values(c.__dict__)[:2]) + [[list(_ASSERTION.values(a.__dict__)) for a in c.expect]] + list(_CASE.values(c.__dict__)[3:]), _CASE.given(c)] for c in cases]
blob2 = json.dumps(rows2, separators=(",", ":"), default=str).encode()
print(f"rows of field values as JSON: {time.perf_counter() - t0:.3f}, {len(blob2)} bytes")
t0 = time.perf_counter()
r2 = json.loads(blob2)
[pickle.dumps(tuple(r[0]), protocol=4) for r in r2]
print(f"hit estimate: json.loads rows + pickle each tuple: {time.perf_counter() - t0:.3f}")
t0 = time.perf_counter()
[Case.model_construct(**r) for r in back]
print(f"Case.model_construct x{len(back)} (nested expect left as dicts): "
      f"{time.perf_counter() - t0:.3f}")
t0 = time.perf_counter()
d = _Digests(path)
d.add(cases)
print(f"_Digests.add (identities + canonical): {time.perf_counter() - t0:.3f}")
from assay.model.packed import PackedCases  # noqa: E402
t0 = time.perf_counter()
p = PackedCases(cases)
print(f"PackedCases(cases): {time.perf_counter() - t0:.3f}")
t0 = time.perf_counter()
for c in p:
    pass
print(f"iterate PackedCases (restore each): {time.perf_counter() - t0:.3f}")
gc.enable()

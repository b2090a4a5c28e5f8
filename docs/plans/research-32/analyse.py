"""Summarise a cProfile of `assay run`: cumulative time of the per-trial steps, per trial."""
import pstats, sys
N = 10000
st = pstats.Stats(sys.argv[1])
stats = st.stats  # (file, line, func) -> (cc, nc, tt, ct, callers)
total = sum(v[2] for v in stats.values())
print(f"{sys.argv[1]}: total profiled tottime {total:.3f} s")
want = [
 ("battery.py", "run"), ("battery.py", "_work"), ("battery.py", "_trial"), ("battery.py", "_attempt"),
 ("battery.py", "_run_and_grade"), ("python.py", "run"), ("python.py", "_call_sync"), ("threads.py", "run"),
 ("python.py", "_trace"), ("agent_tools.py", "__init__"), ("battery.py", "_grade"), ("apply.py", "grade_trace"),
 ("apply.py", "verdict"), ("fold.py", "fold_trial"), ("battery.py", "_finish"), ("record.py", "record"),
 ("trials.py", "trial_record"), ("record.py", "flush"), ("recorder_process.py", "write"),
 ("battery.py", "_fold"), ("fold.py", "fold_case"), ("battery.py", "_final"), ("spool.py", "put"),
 ("spool.py", "case_json"), ("tally.py", "add"), ("packed.py", "__getitem__"), ("battery.py", "_make_plan"),
 ("threads.py", "deliver"), ("base_events.py", "_run_once"), ("selectors.py", "select"),
 ("loader.py", "load_suite_file"), ("record.py", "seal"), ("record.py", "register"),
 ("timeouts.py", "__aenter__"), ("timeouts.py", "__aexit__"), ("python.py", "_json_output"),
 ("capture.py", "recording"), ("conversation.py", "conversation"),
]
rows = []
for (f, l, fn), (cc, nc, tt, ct, callers) in stats.items():
    for suffix, name in want:
        if f.endswith(suffix) and fn == name and ("assay" in f or suffix in ("base_events.py","selectors.py","timeouts.py")):
            rows.append((ct, tt, nc, f"{f.split('/')[-2]}/{f.split('/')[-1]}:{l} {fn}"))
for ct, tt, nc, label in sorted(rows, reverse=True):
    print(f"{label:60s} calls {nc:7d}  cum {ct:7.3f} s = {ct / N * 1e6:7.1f} us/trial  self {tt:6.3f}")
print("\nTop self time:")
st.sort_stats("tottime").print_stats(30)

import os, time, pickle, multiprocessing as mp
from assay.store.runs.trials import TrialRecord
trace = b'{"output":"answer-0","status":"ok","error":null,"events":[{"kind":"message","name":null,"arguments":null,"result":null,"text":"answer-0","call_id":null,"is_error":false,"t":null}],"usage":{"input_tokens":null,"output_tokens":null,"cost_usd":null},"steps":1,"settled":true,"exit_code":null,"duration_s":0.00012242200318723917,"stdout":"","facets":{"harness":"python","host_version":"3.11.7"},"evidence":{"output":"observed","tool_calls":"observed","asks":"observed","skills":"unavailable","tokens":"unavailable","cost":"unavailable","steps":"observed","exit_code":"unavailable"},"partial":false}'
M = 20000
recs = [TrialRecord(f"case-{i}", "public", 1, "pass", None, 3.1e-05, '{"input_tokens":null,"output_tokens":null,"cost_usd":null}',
        ((f"equals answer-{i}", "equals", "output", "pass", "observed", "", "check:equals", None, None),), trace + str(i).encode(), ()) for i in range(M)]
a, b = mp.Pipe()
pid = os.fork()
if pid == 0:
    while b.recv() is not None: pass
    os._exit(0)
for size in (1000, 1000, 100):
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, M, size):
        a.send(("write", "run", recs[i:i + size]))
    print(f"batch {size}: sender wall {(time.perf_counter()-t0)/M*1e6:.2f} us/trial, sender CPU {(time.process_time()-c0)/M*1e6:.2f} us/trial")
a.send(None); os.waitpid(pid, 0)

"""A prototype of the per-trial pure work on plain records (no pydantic), to size what is left.

Steps per trial: trace record (with storable checks on output), equals check on $.answer-like output,
verdict record, trial record, case record (all-pass shortcut), trace JSON (orjson, pydantic's bytes),
spool case JSON (orjson), TrialRecord tuple. No agent call, no loop."""
import time, orjson
from dataclasses import dataclass
from assay.model.storable import storable_text

EVID = {"output":"observed","tool_calls":"observed","asks":"observed","skills":"unavailable","tokens":"unavailable","cost":"unavailable","steps":"observed","exit_code":"unavailable"}
FACETS = {"harness": "python", "host_version": "3.11.7"}
USAGE = {"input_tokens": None, "output_tokens": None, "cost_usd": None}
USAGE_JSON = '{"input_tokens":null,"output_tokens":null,"cost_usd":null}'

@dataclass(slots=True)
class Ev:
    kind: str; name: str | None = None; arguments: object = None; result: object = None; text: str | None = None
    call_id: str | None = None; is_error: bool = False; t: float | None = None
@dataclass(slots=True)
class Tr:
    output: object; status: str; error: str | None; events: list; usage: dict; steps: int; settled: bool
    exit_code: int | None; duration_s: float; stdout: str; facets: dict; evidence: dict; partial: bool = False
@dataclass(slots=True)
class V:
    assertion: str; check: str; family: str; outcome: str; evidence: str; note: str; provenance: str; threshold: float | None
@dataclass(slots=True)
class T:
    n: int; outcome: str; reason: str | None; duration_s: float; verdicts: tuple; trace: Tr

def trace_json(t: Tr) -> bytes:
    return orjson.dumps({"output": t.output, "status": t.status, "error": t.error,
        "events": [{"kind": e.kind, "name": e.name, "arguments": e.arguments, "result": e.result, "text": e.text,
                    "call_id": e.call_id, "is_error": e.is_error, "t": e.t} for e in t.events],
        "usage": t.usage, "steps": t.steps, "settled": t.settled, "exit_code": t.exit_code,
        "duration_s": t.duration_s, "stdout": t.stdout, "facets": t.facets, "evidence": t.evidence,
        "partial": t.partial})

def one(i: int):
    out = storable_text(f"answer-{i}")
    tr = Tr(out, "ok", None, [Ev("message", text=out)], USAGE, 1, True, None, 3.1e-05, "", FACETS, EVID)
    ok = tr.output == f"answer-{i}"
    v = V(f"equals answer-{i}", "equals", "output", "pass" if ok else "fail", "observed", "", "check:equals", None)
    t = T(1, "pass" if ok else "fail", None, tr.duration_s, (v,), tr)
    blob = trace_json(tr)
    rec = (f"case-{i}", "public", 1, t.outcome, None, t.duration_s, USAGE_JSON,
           ((v.assertion, v.check, v.family, v.outcome, v.evidence, v.note, v.provenance, v.threshold, None),), blob, ())
    case = orjson.dumps({"id": f"case-{i}", "split": "public", "outcome": "pass", "reason": None, "pass_at_1": 1.0,
        "pass_hat_k": 1.0, "k": 1, "pass_hat": {"1": 1.0}, "synthetic": False, "tags": [], "quality": [],
        "trials": [{"n": 1, "outcome": t.outcome, "reason": None, "duration_s": t.duration_s, "usage": USAGE,
                    "verdicts": [{"assertion": v.assertion, "check": v.check, "family": v.family, "outcome": v.outcome,
                                  "evidence": v.evidence, "note": v.note, "provenance": v.provenance, "threshold": None}]}]})
    return rec, case

N = 30000
for _ in range(2):
    t0 = time.process_time()
    for i in range(N):
        one(i)
    print(f"pure per-trial work on records: {(time.process_time() - t0) / N * 1e6:.2f} us")

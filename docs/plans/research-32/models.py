"""Build cost per trial object: pydantic (today) vs dataclass(slots) vs msgspec.Struct; CaseResult JSON."""
import sys, timeit
from dataclasses import dataclass
import msgspec, orjson
from assay.model import Evidence
from assay.model.result import Verdict, TrialResult, CaseResult
from assay.model.trace import Usage
from assay.engine.spool import case_json

def best(fn, n=20000):
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6

V = dict(assertion="equals answer-1", check="equals", family="output", outcome="pass",
         evidence=Evidence.OBSERVED, note="", provenance="check:equals", threshold=None)

@dataclass(slots=True, frozen=True)
class VRec:
    assertion: str; check: str; family: str; outcome: str; evidence: Evidence
    note: str = ""; provenance: str = ""; threshold: float | None = None; score: float | None = None

class VStruct(msgspec.Struct, frozen=True):
    assertion: str; check: str; family: str; outcome: str; evidence: str
    note: str = ""; provenance: str = ""; threshold: float | None = None; score: float | None = None

@dataclass(slots=True)
class TRec:
    n: int; outcome: str; reason: str | None; duration_s: float; usage: object; verdicts: tuple
    changes: object = None; turns: object = None; trace: object = None; opinions: object = None

@dataclass(slots=True)
class CRec:
    id: str; split: str; outcome: str; reason: str | None; pass_at_1: float; pass_hat_k: float; k: int
    pass_hat: dict; synthetic: bool; tags: list; quality: list; score: float | None; trials: list; facets: dict

U = Usage()
print(f"Verdict pydantic          {best(lambda: Verdict(**V)):6.2f} us")
print(f"Verdict dataclass(slots)  {best(lambda: VRec(**V)):6.2f} us")
print(f"Verdict msgspec.Struct    {best(lambda: VStruct(**{**V, 'evidence': 'observed'})):6.2f} us")
v = Verdict(**V); vr = VRec(**V)
print(f"TrialResult pydantic      {best(lambda: TrialResult(n=1, outcome='pass', reason=None, duration_s=3.1e-05, usage=U, verdicts=[v], changes=None, turns=None, trace=None, opinions={})):6.2f} us")
print(f"TrialResult dataclass     {best(lambda: TRec(1, 'pass', None, 3.1e-05, U, (vr,))):6.2f} us")
t = TrialResult(n=1, outcome='pass', reason=None, duration_s=3.1e-05, usage=U, verdicts=[v])
def mk_case():
    return CaseResult(id="case-1", split="public", outcome="pass", reason=None, pass_at_1=1.0, pass_hat_k=1.0, k=1,
                      pass_hat={"1": 1.0}, synthetic=False, tags=[], quality=[], score=None, trials=[t], facets={"a": "sha256:x"})
print(f"CaseResult pydantic       {best(mk_case):6.2f} us")
tr = TRec(1, 'pass', None, 3.1e-05, U, (vr,))
print(f"CaseResult dataclass      {best(lambda: CRec('case-1','public','pass',None,1.0,1.0,1,{'1':1.0},False,[],[],None,[tr],{'a':'sha256:x'})):6.2f} us")
c = mk_case()
ref = case_json(c)
print("case JSON:", ref.decode())
print(f"case_json (pydantic)      {best(lambda: case_json(c)):6.2f} us")
USAGE = {"input_tokens": None, "output_tokens": None, "cost_usd": None}
def rec_json(c: CRec) -> bytes:
    d = {"id": c.id, "split": c.split, "outcome": c.outcome, "reason": c.reason, "pass_at_1": c.pass_at_1,
         "pass_hat_k": c.pass_hat_k, "k": c.k, "pass_hat": c.pass_hat, "synthetic": c.synthetic, "tags": c.tags,
         "quality": c.quality,
         "trials": [{"n": t.n, "outcome": t.outcome, "reason": t.reason, "duration_s": t.duration_s, "usage": USAGE,
                     "verdicts": [{"assertion": v.assertion, "check": v.check, "family": v.family, "outcome": v.outcome,
                                   "evidence": v.evidence.value, "note": v.note, "provenance": v.provenance,
                                   "threshold": v.threshold} for v in t.verdicts]} for t in c.trials]}
    if c.score is not None: d["score"] = c.score
    if c.facets: d["facets"] = c.facets
    # key order: pydantic writes fields in declaration order: score before trials, facets last
    d2 = {k: d[k] for k in ("id","split","outcome","reason","pass_at_1","pass_hat_k","k","pass_hat","synthetic","tags","quality","score","trials","facets") if k in d}
    return orjson.dumps(d2)
cr = CRec('case-1','public','pass',None,1.0,1.0,1,{'1':1.0},False,[],[],None,[tr],{'a':'sha256:x'})
print("record->orjson identical:", rec_json(cr) == ref)
print(f"record -> dict -> orjson  {best(lambda: rec_json(cr)):6.2f} us")

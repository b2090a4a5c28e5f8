"""Trace encoding: pydantic (today's bytes) vs json vs orjson vs msgspec; speed and byte identity.

PYTHONPATH=/work/main/src:/tmp/hotpath-research/site nice -n 5 /work/main/.venv/bin/python encoders.py
"""
from __future__ import annotations

import json
import time
import timeit

import msgspec
import orjson

from assay.model import Event, Evidence, Trace
from assay.model.trace import Usage
from assay.targets.base import evidence

EVID = evidence(output="observed", tool_calls="observed", asks="observed",
                tokens="unavailable", cost="unavailable", steps="observed")
FACETS = {"harness": "python", "host_version": "3.11.7"}


def echo_trace(output="answer-1234", duration=3.0517578125e-05, events=None, stdout=""):
    return Trace(output=output, status="ok", events=events if events is not None else
                 [Event(kind="message", text=output if isinstance(output, str) else None)],
                 usage=Usage(), steps=1, settled=True, duration_s=duration, stdout=stdout,
                 facets=FACETS, evidence=EVID)


def pyd(t: Trace) -> bytes:
    return t.model_dump_json(fallback=repr).encode()


def as_dict(t: Trace) -> dict:
    return t.model_dump(mode="json")


def j(d) -> bytes:
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()


def oj(d) -> bytes:
    return orjson.dumps(d)


ENC = msgspec.json.Encoder()


def ms(d) -> bytes:
    return ENC.encode(d)


# msgspec Structs mirroring Trace / Event / Usage (field order = pydantic's)
class MEvent(msgspec.Struct, omit_defaults=False):
    kind: str
    name: str | None = None
    arguments: object = None
    result: object = None
    text: str | None = None
    call_id: str | None = None
    is_error: bool = False
    t: float | None = None


class MUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


class MTrace(msgspec.Struct):
    output: object = None
    status: str = "ok"
    error: str | None = None
    events: list[MEvent] = []
    usage: MUsage | None = None
    steps: int | None = None
    settled: bool | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    stdout: str = ""
    facets: dict[str, str] = {}
    evidence: dict[str, str] = {}
    partial: bool = False


def mtrace(output, duration):
    return MTrace(output=output, events=[MEvent(kind="message", text=output)], usage=MUsage(),
                  steps=1, settled=True, duration_s=duration, facets=FACETS,
                  evidence={k: v.value for k, v in EVID.items()})


def bench() -> None:
    t = echo_trace()
    d = as_dict(t)
    ref = pyd(t)
    print("typical trace:", len(ref), "bytes:", ref.decode())
    n = 20000
    rows = {
        "pydantic model_dump_json (today)": lambda: pyd(t),
        "pydantic model_dump(mode=json) (dict)": lambda: as_dict(t),
        "json.dumps(dict) compact": lambda: j(d),
        "orjson.dumps(dict)": lambda: oj(d),
        "msgspec encode(dict)": lambda: ms(d),
        "msgspec encode(Struct)": (lambda s=mtrace("answer-1234", 3.0517578125e-05): ENC.encode(s)),
        "build Trace (pydantic, validated)": lambda: echo_trace(),
        "build MTrace (msgspec Struct)": lambda: mtrace("answer-1234", 3.0517578125e-05),
    }
    for label, fn in rows.items():
        best = min(timeit.repeat(fn, number=n, repeat=5)) / n
        print(f"{label:42s} {best * 1e6:7.2f} us")
    print("identical to pydantic: json", j(d) == ref, " orjson", oj(d) == ref,
          " msgspec(dict)", ms(d) == ref,
          " msgspec(Struct)", ENC.encode(mtrace("answer-1234", 3.0517578125e-05)) == ref)


TRICKY_FLOATS = [0.1, 1.0, -0.0, 1e-05, 1e-07, 3.0517578125e-05, 1e16, 1.5e16, 1e22,
                 123456789.123, 2.5e-300, 1.7976931348623157e308, 5e-324, 0.0001, 1e21,
                 12345678901234567.0]
TRICKY_STRINGS = ["plain", "é ü 漢字", "emoji \U0001F600", "ctl \x00\x01\x1f\x7f", "tab\tnl\n",
                  "quote\" back\\ slash/", "</script>", "\u2028\u2029", "\ufffd", "<>&'"]
TRICKY_VALUES = [2**53 + 1, 2**64, -(2**63), True, None, [], {}, {"b": 1, "a": 2},
                 {"nested": [1, 2.5, {"x": None}]}]


def identity() -> None:
    print("\nbyte identity with pydantic's model_dump_json, per value put in output and duration:")
    fails = {"json": [], "orjson": [], "msgspec": []}
    cases = [("output", v) for v in TRICKY_FLOATS + TRICKY_STRINGS + TRICKY_VALUES] + \
            [("duration_s", v) for v in TRICKY_FLOATS]
    for where, v in cases:
        t = echo_trace(output=v) if where == "output" else echo_trace(duration=v)
        ref = pyd(t)
        d = as_dict(t)
        for name, fn in (("json", j), ("orjson", oj), ("msgspec", ms)):
            try:
                out = fn(d)
            except Exception as exc:  # noqa: BLE001
                out = f"<{type(exc).__name__}: {exc}>".encode()
            if out != ref:
                fails[name].append((where, repr(v), _diff(ref, out)))
    for name, found in fails.items():
        print(f"  {name}: {len(found)} of {len(cases)} differ")
        for where, v, diff in found:
            print(f"     {where}={v}: {diff}")


def _diff(a: bytes, b: bytes) -> str:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"pydantic {a[max(0, i - 12):i + 20]!r} vs {b[max(0, i - 12):i + 20]!r}"


if __name__ == "__main__":
    print(time.strftime("%H:%M:%S", time.gmtime()), "UTC; msgspec", msgspec.__version__,
          "orjson", orjson.__version__)
    bench()
    identity()

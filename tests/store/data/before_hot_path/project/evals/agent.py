"""The agent of the store written before issue 32: one behaviour per case, by ``input["do"]``."""

from __future__ import annotations

import threading
from typing import Any

import assay

#: Never set: the ``hangs`` case waits on it past its timeout.
HANG = threading.Event()

#: Text with what JSON writers disagree on: non-ASCII, control characters, U+2028/9, quotes.
ODD_TEXT = ("naïve café 日本語 \U0001f600 \x00\x01\x1f\x7f \u2028 \u2029 "
            "\"quoted\" \\ back/slash\n\t\r end")


def agent(input: Any, tools: Any) -> Any:
    if isinstance(input, list):  # a conversation: the messages so far (SPEC §16)
        heard = input[-1]["content"]
        tools.call("note", {"heard": heard})
        return f"heard – {heard} ({len(input)} message(s))"
    do = input["do"]
    if do == "echo":
        return input["text"]
    if do == "tools":
        tier = tools.call("crm.lookup", {"customer": "C-1"})
        answer = tools.ask("May I go ahead?")
        tools.call("add", {"item": "tea"})
        tools.call("add", {"item": "milk – ☕", "qty": 1.5})
        return {"tier": tier, "answer": answer}
    if do == "text":
        print("printed: " + ODD_TEXT)
        tools.call("note", {"text": ODD_TEXT, "\u2028key": ["\x00", "é"]})
        return {"text": ODD_TEXT, ODD_TEXT: "as a key"}
    if do == "floats":
        tools.usage(input_tokens=123456789, output_tokens=7, cost_usd=0.1)
        tools.usage(input_tokens=1, cost_usd=0.2)  # 0.1 + 0.2: 0.30000000000000004
        return {"tiny": 3.0517578125e-05, "small": 1e-05, "denormal": 5e-324, "big": 1e16,
                "bigger": 1.5e300, "max": 1.7976931348623157e308, "third": 1 / 3,
                "neg_zero": -0.0, "whole": 2.0, "ints": [0, -1, 2**63 - 1, -2**63, 2**64 - 1]}
    if do == "bigint":  # past 64 bits: what orjson refuses and pydantic writes
        return {"big": 2**70, "neg": -2**63 - 1, "list": [2**64]}
    if do == "fails":
        return "not what was expected"
    if do == "raises":
        raise RuntimeError("the agent failed: ünïcode \u2028 here")
    if do == "refuses":
        raise assay.Refused("not this one")
    if do == "hangs":
        tools.call("crm.lookup", {"customer": "C-2"})
        tools.usage(input_tokens=40, output_tokens=5, cost_usd=0.00042)
        HANG.wait(30)
        return "never returned in time"
    if do == "workspace":
        (tools.workspace / "out.txt").write_text("made by the agent ✓\n", encoding="utf-8")
        (tools.workspace / "readme.txt").write_text("hello\nchanged\n", encoding="utf-8")
        return "done"
    if do == "judged":
        return "Sorry about that, we will resend it today. JUDGE:pass"
    raise ValueError(f"no behaviour {do!r}")

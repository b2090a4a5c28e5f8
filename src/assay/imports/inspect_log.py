"""An Inspect AI log (``.eval`` or ``.json``) as recorded traces and a suite that grades them.

Each sample of the log, at each epoch, becomes one line of a
``scripted:`` recording (SPEC §4): the model's final answer as the output,
the assistant's tool calls and the tools' answers as events, the tokens
and cost the provider reported as usage, an errored sample as an error.
Each sample id becomes a case of a suite whose target replays that
recording, one trial per epoch, so ``assay run`` grades what the model did
in Inspect with assay's assertions, and it is recorded and sealed as any
run. The log's scorers map where assay has the same check:

- ``includes`` → ``contains`` the target (a list of targets: any of them);
- ``exact`` → ``equals`` the target;
- ``match`` → ``regex``: the target at the end of the answer, any case;
- ``model_graded_qa`` / ``model_graded_fact`` → ``judge``, criteria naming
  the target.

Any other scorer is named in ``Imported.unmapped``. The log is read with
Inspect AI's own reader (``pip install 'assay[inspect]'``; from a clone,
``pip install -e '.[inspect]'``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SuiteError, UsageError
from ..install_hints import extra

#: The log format versions Inspect AI has written, which this reads.
VERSIONS = (1, 2)


@dataclass
class Imported:
    """The recording's lines, the suite's data, and what could not be mapped."""

    lines: list[dict[str, Any]]
    suite: dict[str, Any]
    unmapped: list[str] = field(default_factory=list)
    scored: str | None = None


def import_log(path: Path, recording: str) -> Imported:
    """Read an Inspect log; the suite replays ``recording`` (the .jsonl written beside it)."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise UsageError("assay import inspect reads logs with Inspect AI: "
                         + extra("inspect", "inspect_ai")) from None
    if not path.is_file():
        raise SuiteError(str(path), None, "no such file")
    try:
        log = read_eval_log(str(path))
    except Exception as error:  # its reader's errors are many; each is a bad file here
        why = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        raise SuiteError(str(path), None, f"not an Inspect AI log: {why}") from None
    if log.version not in VERSIONS:
        raise SuiteError(str(path), None, f"an Inspect AI log of format version "
                         f"{log.version}; assay reads versions {', '.join(map(str, VERSIONS))}")
    samples = log.samples or []
    if not samples:
        raise SuiteError(str(path), None, "the log holds no samples (logged with "
                         "--no-log-samples?): there is nothing to grade")
    scorers = sorted({name for sample in samples for name in (sample.scores or {})})
    unmapped = [f"scorer {name}" for name in scorers if name not in _SCORERS]
    lines: list[dict[str, Any]] = []
    cases: dict[str, dict[str, Any]] = {}
    epochs: dict[str, int] = {}
    correct = total = 0
    for sample in samples:
        case_id = f"sample-{sample.id}"
        epochs[case_id] = max(epochs.get(case_id, 0), int(sample.epoch or 1))
        lines.append(_line(case_id, sample))
        for score in (sample.scores or {}).values():
            total += 1
            correct += score.value in ("C", 1, 1.0, True)
        if case_id not in cases:
            cases[case_id] = {"id": case_id, "input": _text(sample.input),
                              "expect": _expect(scorers, sample.target) or [{"status": "ok"}]}
    task = str(log.eval.task or path.stem)
    name = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-") or "inspect"
    suite: dict[str, Any] = {"suite": f"imported/{name}@1",
                             "title": f"Inspect AI log of {task} ({log.eval.model})",
                             "target": f"scripted:{recording}"}
    trials = max(epochs.values())
    if trials > 1:
        suite["trials"] = trials
    suite["cases"] = list(cases.values())
    scored = f"Inspect scored {correct} of {total} correct" if total else None
    return Imported(lines, suite, unmapped, scored)


_SCORERS = ("includes", "exact", "match", "model_graded_qa", "model_graded_fact")


def _expect(scorers: list[str], target: Any) -> list[dict[str, Any]]:
    targets = [t for t in (target if isinstance(target, list) else [target])
               if isinstance(t, str) and t]
    if not targets:
        return []
    expect: list[dict[str, Any]] = []
    for scorer in scorers:
        if scorer == "includes":
            expect.append({"contains": targets[0]} if len(targets) == 1 else
                          {"regex": "|".join(re.escape(t) for t in targets)})
        elif scorer == "exact":
            expect.append({"equals": targets[0]})
        elif scorer == "match":
            expect.append({"regex": "(?i)(" + "|".join(re.escape(t) for t in targets)
                           + r")\W*$"})
        elif scorer in ("model_graded_qa", "model_graded_fact"):
            expect.append({"judge": {"criteria": "The answer is correct; the expected answer "
                                                 f"is: {' or '.join(targets)}"}})
    return expect


def _line(case_id: str, sample: Any) -> dict[str, Any]:
    """One trial of the recording: what the model answered, called and spent."""
    events: list[dict[str, Any]] = []
    steps = 0
    for message in sample.messages or []:
        role = getattr(message, "role", None)
        if role == "assistant":
            steps += 1
            for call in getattr(message, "tool_calls", None) or []:
                events.append({"kind": "tool_call", "name": call.function,
                               "arguments": call.arguments, "call_id": call.id})
            text = _text(getattr(message, "content", ""))
            if text:
                events.append({"kind": "message", "text": text})
        elif role == "tool":
            error = getattr(message, "error", None)
            events.append({"kind": "tool_result", "name": getattr(message, "function", None),
                           "result": _text(message.content),
                           "call_id": getattr(message, "tool_call_id", None),
                           "is_error": error is not None})
    output = sample.output
    usage = getattr(output, "usage", None) if output is not None else None
    line: dict[str, Any] = {"case": case_id, "trial": int(sample.epoch or 1),
                            "output": output.completion if output is not None else None,
                            "events": events, "steps": steps}
    if usage is not None:
        line["usage"] = {"input_tokens": usage.input_tokens,
                         "output_tokens": usage.output_tokens,
                         "cost_usd": getattr(usage, "total_cost", None)}
    error = getattr(sample, "error", None)
    if error is not None:
        line["status"], line["error"] = "error", str(getattr(error, "message", error))[:2000]
    return line


def _text(value: Any) -> str:
    """A prompt or message content as text (a list of messages or content parts joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_text(getattr(v, "content", getattr(v, "text", v)))
                                     for v in value) if t)
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else ""


def recording_text(lines: list[dict[str, Any]]) -> str:
    """The ``scripted:`` file: one JSON object per line."""
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)

"""``python:`` agents that replay a tau2-bench task's gold actions, as written or altered.

Each is handed the conversation so far and the ``tools`` object (SPEC §16).
The simulated user opens with ``airline task 12`` (tests/imports/
tau2_support.py plays it); the agent finds that task in tau2's own task
file, calls its gold actions through ``tools.call`` — a call that fails is
the tool's answer, as in tau2 — and replies once, saying what the task
wants communicated. Asked again, it ends the conversation.

The probes beyond the gold replay come from a plan (``ASSAY_TAU2_PLAN``, by
default tests/imports/tau2_verdicts.json, written by bench/tau2_agreement.py):

- ``altered``: the task's last write that changes the database, with one
  argument altered; a task with no such write adds one write nobody asked for;
- ``nothing``: no tool call, "Sorry, I cannot help.";
- ``extra``: the gold actions and one write nobody asked for;
- ``silent``: the gold actions, then "Done." (nothing communicated);
- ``num``: a whole-number argument of a write sent as the equal float (2.0);
- ``alteration``: the ``ASSAY_TAU2_ALTERATION``-th alteration (from 0) of the
  last effective write.
"""

from __future__ import annotations

import contextlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STOP = "###STOP###"
Call = tuple[str, dict[str, Any]]


@cache
def plan() -> dict[str, Any]:
    """The probes of each task, ``{"tasks": {"airline/12": {...}}}``."""
    path = Path(os.environ.get("ASSAY_TAU2_PLAN") or HERE / "tau2_verdicts.json")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@cache
def tasks(domain: str) -> dict[str, Any]:
    """tau2's tasks of the base split, by id."""
    from assay.imports.tau2_tools import quiet_import

    quiet_import()
    if domain == "airline":
        from tau2.domains.airline.environment import get_tasks
    else:
        from tau2.domains.retail.environment import get_tasks
    return {task.id: task for task in get_tasks("base")}


def which(history: list[dict[str, str]]) -> tuple[str, Any]:
    """The domain (from the policy, the system message) and the task the user names."""
    domain = "airline" if "Airline Agent Policy" in history[0]["content"] else "retail"
    first = next(m["content"] for m in history if m["role"] == "user")
    return domain, tasks(domain)[first.rsplit(" ", 1)[-1]]


def gold_calls(task: Any) -> list[Call]:
    return [(action.name, dict(action.arguments))
            for action in task.evaluation_criteria.actions or []]


def say(task: Any) -> str:
    """One reply holding every string the task wants communicated."""
    infos = task.evaluation_criteria.communicate_info or []
    return "Here is what I found: " + "; ".join(infos) + "." if infos else "All done."


def replay(tools: Any, calls: list[Call]) -> None:
    for name, arguments in calls:
        # The tool's error is its answer; go on, as tau2 does.
        with contextlib.suppress(Exception):
            tools.call(name, arguments)


def _agent(history: list[dict[str, str]], tools: Any, probe: str | None) -> str:
    if any(m["role"] == "assistant" for m in history):
        return STOP  # asked again: the work is done
    domain, task = which(history)
    calls = gold_calls(task)
    reply = say(task)
    if probe is not None:
        calls, reply = _probed(f"{domain}/{task.id}", probe, calls, reply)
    replay(tools, calls)
    return reply


def _probed(key: str, probe: str, calls: list[Call], reply: str) -> tuple[list[Call], str]:
    planned = plan()["tasks"][key]
    if probe == "nothing":
        return [], "Sorry, I cannot help."
    if probe == "silent":
        return calls, "Done."
    if probe == "extra":
        return [*calls, (planned["extra"][0], planned["extra"][1])], reply
    if probe == "alteration":
        choices = planned.get("alterations") or []
        number = int(os.environ.get("ASSAY_TAU2_ALTERATION", "0"))
        change = choices[number] if number < len(choices) else None
    else:
        change = planned.get(probe)
    if change is None:
        return calls, reply  # no such probe for this task: the gold replay (left out)
    if "index" not in change:  # no write to alter: one nobody asked for instead
        return [*calls, (change["name"], change["arguments"])], reply
    calls = list(calls)
    calls[change["index"]] = (calls[change["index"]][0], change["arguments"])
    return calls, reply


def gold(history: list[dict[str, str]], tools: Any) -> str:
    """The gold actions, then every communicate string: tau2 scores this 1."""
    return _agent(history, tools, None)


def altered(history: list[dict[str, str]], tools: Any) -> str:
    """One write altered (or, with none to alter, one added): tau2 scores this 0."""
    return _agent(history, tools, "altered")


def nothing(history: list[dict[str, str]], tools: Any) -> str:
    return _agent(history, tools, "nothing")


def extra(history: list[dict[str, str]], tools: Any) -> str:
    return _agent(history, tools, "extra")


def silent(history: list[dict[str, str]], tools: Any) -> str:
    return _agent(history, tools, "silent")


def num(history: list[dict[str, str]], tools: Any) -> str:
    return _agent(history, tools, "num")


def alteration(history: list[dict[str, str]], tools: Any) -> str:
    return _agent(history, tools, "alteration")

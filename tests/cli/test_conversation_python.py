"""A conversation held by a ``python:`` agent (SPEC §16): a callable handed the
conversation so far, or a class with ``reply(message)``; through ``assay run``."""

from __future__ import annotations

import json
from typing import Any

import pytest

SUITE = """
suite: t/py-talk@1
target: {target}
cases:
  - id: rent
    input: You keep the books.
    fixture: tools.yaml
    turns: ["Pay half the rent.", "Now the other half.", "How much is left?"]
    expect:
      - calls: {{tool: pay, times: 2}}
      - {{turn: 1, contains: "paid 500"}}
      - {{turn: 3, contains: "left 0"}}
      - {{state: {{path: $.paid, equals: 1000}}}}
      - within_steps: 5
"""

TOOLS = """
tools:
  - name: pay
    handler: books:pay
state: {paid: 0}
"""

BOOKS = '''
def pay(arguments, state):
    state["paid"] += arguments["amount"]
    return state["paid"]


def agent(messages, tools):
    assert messages[0] == {"role": "system", "content": "You keep the books."}
    said = messages[-1]["content"]
    if "half" in said:
        return f"paid {tools.call('pay', {'amount': 500}) - (500 if 'other' in said else 0)}"
    asked = [m["content"] for m in messages if m["role"] == "user"]
    return f"left {1000 - 500 * sum('half' in text for text in asked)}"


class Keeper:
    def __init__(self, system, tools):
        assert system == "You keep the books."
        self.tools, self.paid = tools, 0

    async def reply(self, message):
        if "half" in message:
            self.tools.call("pay", {"amount": 500})
            self.paid += 500
            return f"paid {500 if self.paid == 500 else 1000}"
        return {"text": f"left {1000 - self.paid}"}


class Crashes:
    def __init__(self, tools):
        self.tools = tools

    def reply(self, message):
        if "other" in message:
            raise RuntimeError("lost the ledger")
        self.tools.call("pay", {"amount": 500})
        return "paid 500"
'''


def _run(project: Any, target: str) -> tuple[Any, dict[str, Any]]:
    project.write("evals/tools.yaml", TOOLS)
    project.write("evals/books.py", BOOKS)
    project.write("evals/t.suite.yaml", SUITE.format(target=target))
    done = project.assay("run", "evals", "--json", "r.json")
    return done, json.loads((project.root / "r.json").read_text())


@pytest.mark.parametrize("target", ["python:books:agent", "python:books:Keeper"])
def test_a_python_agent_holds_a_conversation(project: Any, target: str) -> None:
    done, report = _run(project, target)
    assert done.code == 0, (done.out + done.err, report["cases"][0]["trials"][0]["verdicts"])
    [trial] = report["cases"][0]["trials"]
    assert [t["turn"] for t in trial["turns"]] == [1, 2, 3]
    assert [t["calls"] for t in trial["turns"]] == [["pay"], ["pay"], []]


def test_a_crash_in_a_later_turn_keeps_the_turns_before_it(project: Any) -> None:
    done, report = _run(project, "python:books:Crashes")
    assert done.code == 1, done.out + done.err
    [trial] = report["cases"][0]["trials"]
    verdicts = {v["assertion"]: v["outcome"] for v in trial["verdicts"]}
    # Turn 1's reply and call stand; the crash in turn 2 ends the conversation as an error.
    assert verdicts["contains (turn 1)"] == "pass"
    assert verdicts["contains (turn 3)"] == "fail"
    assert [t["turn"] for t in trial["turns"]] == [1, 2]
    assert trial["outcome"] == "fail"

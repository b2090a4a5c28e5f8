"""Conversations end to end (SPEC §16): a suite with ``turns:`` run by ``assay run`` on the
``openai:`` loop against a real OpenAI-compatible server on loopback; ``turn: N``
scoping an output check; what a conversation case may not be, refused at load."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.real

STUB_FILE = Path(__file__).resolve().parents[2] / "examples" / "support" / "stub_model.py"
FIRST = "I need to move booking ABC123 to Friday."


def _stub() -> ModuleType:
    spec = importlib.util.spec_from_file_location("assay_conv_stub_model", STUB_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    stub = _stub()
    served = stub.StubServer(stub.by_prompt({FIRST: [
        {"tool_calls": [{"name": "update_booking",
                         "arguments": {"booking": "ABC123", "day": "Friday"}}]},
        {"content": "Which one: 9am or 5pm?"},
        {"content": "Booked: Friday, 9:00."}]}))
    yield served
    served.close()


TOOLS = """
tools:
  - name: update_booking
    parameters: {type: object, properties: {booking: {type: string}, day: {type: string}}}
    result: {ok: true}
"""


def _suite(project: Any, cases: str) -> None:
    project.write("evals/tools.yaml", TOOLS)
    project.write("evals/t.suite.yaml", "suite: t/talk@1\ntarget: openai:m\ncases:\n" + cases)


def test_a_scripted_conversation_is_graded_over_every_turn(project: Any, server: Any) -> None:
    _suite(project, f"""
  - id: change-flight
    input: You are a booking agent.
    fixture: tools.yaml
    turns:
      - "{FIRST}"
      - "The 9am one, please."
    expect:
      - calls: {{tool: update_booking, args: {{booking: ABC123}}}}
      - {{turn: 1, contains: "9am or 5pm"}}
      - {{turn: 2, contains: "9:00"}}
      - contains: "9:00"
      - {{turn: 1, not_contains: "9:00"}}
      - within_steps: 3
""")
    done = project.assay("run", "evals", "--no-store", "--json", "r.json",
                         "--base-url", server.url + "/v1")
    assert done.code == 0, done.out + done.err
    report = json.loads((project.root / "r.json").read_text())
    verdicts = [(v["assertion"], v["outcome"]) for v in report["cases"][0]["trials"][0]["verdicts"]]
    assert verdicts == [("calls", "pass"), ("contains (turn 1)", "pass"),
                        ("contains (turn 2)", "pass"), ("contains", "pass"),
                        ("not_contains (turn 1)", "pass"), ("within_steps", "pass")]
    # The user's second message went to the model after its first reply.
    asked = [m["content"] for m in server.seen[-1]["messages"] if m["role"] == "user"]
    assert asked == [FIRST, "The 9am one, please."]


def test_a_check_on_a_reply_that_never_came_fails(project: Any, server: Any) -> None:
    # The model refuses nothing and answers twice; a third turn's reply is asked of a
    # conversation that has only two turns scripted: refused at load (below). Here the
    # reply checked is the first, and it says the wrong thing.
    _suite(project, f"""
  - id: change-flight
    fixture: tools.yaml
    turns: ["{FIRST}", "The 9am one, please."]
    expect:
      - {{turn: 1, contains: "9:00"}}
""")
    done = project.assay("run", "evals", "--no-store", "--json", "r.json",
                         "--base-url", server.url + "/v1")
    assert done.code == 1, done.out + done.err
    report = json.loads((project.root / "r.json").read_text())
    [verdict] = report["cases"][0]["trials"][0]["verdicts"]
    assert (verdict["assertion"], verdict["outcome"]) == ("contains (turn 1)", "fail")


def test_a_bad_conversation_is_refused_at_its_line(project: Any) -> None:
    # Every way a conversation case can be wrong: tests/suites/test_conversation_form.py.
    project.write("evals/t.suite.yaml", "suite: t/talk@1\ntarget: openai:m\ncases:\n"
                  "  - id: both\n    turns: [hi]\n    user: {instructions: be terse}\n")
    done = project.assay("run", "evals", "--no-store")
    assert done.code == 2, done.out + done.err
    assert done.err == ("assay: error: evals/t.suite.yaml:6: a case is a scripted "
                        "conversation (turns:) or a simulated one (user:), not both\n")


@pytest.mark.parametrize(("target", "why"), [
    ("mcp+stdio:python -m nothing", "an MCP tool call is one request and one answer"),
    ("scripted:t.jsonl", "it replays recorded traces"),
])
def test_a_target_that_cannot_hold_a_conversation_refuses_it_at_the_case(
        project: Any, target: str, why: str) -> None:
    project.write("evals/t.suite.yaml", f"suite: t/talk@1\ntarget: {target}\ncases:\n"
                  "  - id: one\n    input: hi\n  - id: talk\n    turns: [a, b]\n")
    done = project.assay("run", "evals", "--no-store")
    assert done.code == 2, done.out + done.err
    assert "t.suite.yaml:6" in done.err and "case 'talk' is a conversation" in done.err
    assert why in done.err and "Traceback" not in done.err

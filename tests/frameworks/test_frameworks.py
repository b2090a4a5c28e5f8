"""Agents built with frameworks, evaluated as they are (SPEC §15), end to end.

Each agent in ``agents/`` is written as its framework's docs show and never
changed for assay. The scripted model (``tests/model_server.py``) plays the
turns a case's input writes after ``SCRIPT:``. Each agent runs as
``python:`` (its HTTP seen in process) and as ``exec:`` (its HTTP through the
recording proxy, which forwards to the scripted model with the real key); the
structural checks of the suite below must all pass on what was seen, and the
served model must be the ``model`` facet.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_server import SERVED, USAGE_IN, USAGE_OUT, ModelServer  # noqa: E402

pytestmark = pytest.mark.real

AGENTS = Path(__file__).resolve().parent / "agents"
ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / ".hosts" / "node_modules"
PYTHON = shlex.quote(sys.executable)
KEY = "sk-CANARY-FRAMEWORK-KEY-41f7"


def _script(*turns: dict[str, Any]) -> str:
    return "SCRIPT:" + json.dumps(list(turns))


LOOKUP = _script({"call": "lookup", "args": {"order": "A-1"}}, {"say": "A-1 has shipped."})
ASKED = _script({"call": "lookup", "args": {"order": "A-2"}},
                {"call": "ask_user", "args": {"question": "May I refund A-2?"}},
                {"call": "refund", "args": {"order": "A-2"}}, {"say": "Refunded."})
TRANSFER = _script({"call": "transfer", "args": {"to": "X-9", "amount": 100}},
                   {"say": "I cannot move money."})
#: What each agent sends back for the transfer it will not run: its own refusal, or the
#: framework's answer to a tool it was never given (LangGraph, pydantic-ai).
NOT_RUN = "(?i)refused|not allowed|not a valid tool|unknown tool"

CASES = f"""
  - id: looks-up
    input: 'Where is my order A-1? {LOOKUP}'
    expect:
      - calls: {{tool: lookup, args: {{order: A-1}}, times: 1}}
      - never_calls: [refund]
      - within_steps: 2
      - costs_at_most: {{tokens: {2 * (USAGE_IN + USAGE_OUT)}}}
      - contains: shipped
  - id: asks-first
    input: 'Refund A-2. {ASKED}'
    expect:
      - asks: {{before: refund}}
      - calls: {{tool: refund, args: {{order: A-2}}}}
      - calls_before: [lookup, refund]
      - never_calls: [ask_user]   # a question to a person is an ask, not a tool call
      - within_steps: 4
  - id: will-not-transfer
    input: 'Send 100 to X-9. {TRANSFER}'
    expect:
      # The model asked; the agent's answer on the wire says it did not run it.
      - calls: {{tool: transfer, args: {{to: X-9}}, result: {{regex: '{NOT_RUN}'}}}}
      - never_calls: [refund]
      - within_steps: 2
"""

#: (name, python: URI, exec: URI) of each agent.
FRAMEWORKS = [
    ("openai-agents", "python:agents_sdk_agent:agent", f"exec:{PYTHON} agents_sdk_agent.py"),
    ("openai-agents-chat", "python:agents_sdk_agent:chat_agent",
     f"exec:{PYTHON} agents_sdk_agent.py --chat"),
    ("langgraph", "python:langgraph_agent:agent", f"exec:{PYTHON} langgraph_agent.py"),
    ("pydantic-ai", "python:pydantic_ai_agent:agent", f"exec:{PYTHON} pydantic_ai_agent.py"),
    ("anthropic", "python:anthropic_agent:agent", f"exec:{PYTHON} anthropic_agent.py"),
]


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def _suite(project: Any, target: str, cases: str = CASES) -> None:
    shutil.copytree(AGENTS, project.root / "evals", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    project.write("evals/shop.suite.yaml", f"suite: fw/shop@1\ntarget: {target}\ncases:"
                  + cases)


def _env(model: ModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": model.url + "/v1", "OPENAI_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": KEY,
            "NODE_PATH": str(NODE_MODULES), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def _run(project: Any, model: ModelServer, target: str) -> dict[str, Any]:
    _suite(project, target)
    done = project.assay("run", "evals", "--no-store", "--json", "r.json", env=_env(model),
                         timeout=300)
    report: dict[str, Any] = json.loads((project.root / "r.json").read_text())
    report["_done"] = done
    return report


def _check(report: dict[str, Any]) -> None:
    done = report.pop("_done")
    failing = {case["id"]: [(v["assertion"], v["outcome"], v["note"])
                            for t in case["trials"] for v in t["verdicts"]
                            if v["outcome"] != "pass"]
               for case in report["cases"] if case["outcome"] != "pass"}
    assert failing == {} and done.code == 0, (failing, done.out[-2000:], done.err[-2000:])
    # The model that answered, as the wire saw it, is each case's model facet.
    assert {case["facets"].get("model") for case in report["cases"]} == {SERVED}
    assert KEY not in json.dumps(report) and KEY not in done.out + done.err


@pytest.mark.parametrize(("name", "uri"), [(n, p) for n, p, _ in FRAMEWORKS],
                         ids=[n for n, _, _ in FRAMEWORKS])
def test_a_framework_agent_in_process(project: Any, model: ModelServer, name: str,
                                      uri: str) -> None:
    _check(_run(project, model, uri))


@pytest.mark.parametrize(("name", "uri"), [(n, e) for n, _, e in FRAMEWORKS]
                         + [("node-openai", "exec:node node_agent.cjs")],
                         ids=[n for n, _, _ in FRAMEWORKS] + ["node-openai"])
def test_a_framework_agent_as_a_program(project: Any, model: ModelServer, name: str,
                                        uri: str) -> None:
    before = len(model.requests)
    _check(_run(project, model, uri))
    # The real key went to the model, through the proxy; the agent held a stand-in.
    sent = model.requests[before:]
    assert sent and all(KEY in json.dumps(r["headers"]) for r in sent)


def test_the_real_key_is_in_no_stored_record(project: Any, model: ModelServer) -> None:
    """Every trace of a program's battery is stored and sealed: the key it was kept from
    is in no byte of the store, the ledger or what the commands print of them."""
    _suite(project, f"exec:{PYTHON} anthropic_agent.py")
    done = project.assay("run", "evals", "--json", "r.json", env=_env(model), timeout=300)
    assert done.code == 0, done.out + done.err
    run_id = json.loads((project.root / "r.json").read_text())["run_id"]
    stored = b"".join(path.read_bytes() for path in (project.root / ".assay").rglob("*")
                      if path.is_file())
    # The traces are there (a store without them would prove nothing): the served model
    # is a fact only the wire gave.
    assert SERVED.encode() in stored
    assert KEY.encode() not in stored
    for command in (("show", run_id), ("ledger", "verify"), ("receipt", run_id)):
        shown = project.assay(*command, env=_env(model))
        assert shown.code == 0, (command, shown.err)
        assert KEY not in shown.out + shown.err, command


def test_the_suite_names_which_tools_are_asks(project: Any, model: ModelServer) -> None:
    """``ask_tools`` replaces the default ask tools: here none is an ask, so the agent's
    ``ask_user`` is a tool call, and ``confirm`` (which the default would not know) is
    its question to a person."""
    confirm = _script({"call": "confirm", "args": {"question": "Refund A-2?"}},
                      {"call": "ask_user", "args": {"question": "Sure?"}}, {"say": "Done."})
    _suite(project, "python:confirming:agent", f"""
  - id: asks-by-name
    input: 'Refund A-2. {confirm}'
    expect:
      - asks: true
      - calls: {{tool: ask_user, times: 1}}
      - never_calls: [confirm]
""")
    suite = project.root / "evals" / "shop.suite.yaml"
    suite.write_text(suite.read_text().replace("cases:", "ask_tools: [confirm]\ncases:", 1))
    project.write("evals/confirming.py", "import shop_tools\nimport anthropic_agent\n"
                  "shop_tools.confirm = shop_tools.ask_user\nagent = anthropic_agent.agent\n")
    done = project.assay("run", "evals", "--no-store", "--json", "r.json", env=_env(model),
                         timeout=300)
    report = json.loads((project.root / "r.json").read_text())
    report["_done"] = done
    _check(report)


CHAT_AGENT = '''
import openai

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in ("lookup", "refund")]


class Agent:
    """Keeps its whole chat, tool calls included, across the user's messages."""

    def __init__(self):
        self.client = openai.OpenAI()
        self.chat = []

    def reply(self, message):
        self.chat.append({"role": "user", "content": message})
        while True:
            answer = self.client.chat.completions.create(model="gpt-4.1", messages=self.chat,
                                                         tools=TOOLS)
            said = answer.choices[0].message
            self.chat.append(said.model_dump(exclude_none=True))
            if not said.tool_calls:
                return said.content
            for call in said.tool_calls:
                self.chat.append({"role": "tool", "tool_call_id": call.id, "content": "done"})
'''


def test_a_conversation_seen_on_the_wire_puts_each_call_in_its_turn(
        project: Any, model: ModelServer) -> None:
    """A ``python:`` class agent answering each message, calling its model with the
    ``openai`` SDK: what the wire saw goes to the turn it happened in."""
    script = _script({"call": "lookup", "args": {"order": "A-2"}}, {"say": "It is lost."},
                     {"call": "refund", "args": {"order": "A-2"}}, {"say": "Refunded."})
    project.write("evals/chat_agent.py", CHAT_AGENT)
    _suite(project, "python:chat_agent:Agent", f"""
  - id: two-turns
    turns: ['Where is A-2? {script}', 'Refund it, please.']
    expect:
      - calls_before: [lookup, refund]
      - {{turn: 1, contains: lost}}
      - {{turn: 2, contains: Refunded}}
      - within_steps: 4
""")
    done = project.assay("run", "evals", "--no-store", "--json", "r.json", env=_env(model),
                         timeout=300)
    report = json.loads((project.root / "r.json").read_text())
    report["_done"] = done
    _check(report)
    [trial] = report["cases"][0]["trials"]
    assert [t["calls"] for t in trial["turns"]] == [["lookup"], ["refund"]]

"""What the gate said (SPEC §3): ``calls``/``never_calls`` with ``result:`` and ``denied:``,
end to end through ``assay run`` — a Python agent whose fixture handler refuses a payment,
and a real MCP server whose tool answers ``isError``."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import pytest

PYTHON = shlex.quote(sys.executable)

BANK_TOOLS = """
    tools:
      - name: pay
        handler: bank:pay
    state: {balance: 1000, paid: []}
    """

BANK = """
    def pay(arguments, state):
        if arguments["to"] == "attacker" and not state.get("open"):
            raise PermissionError("the bank refuses payments to unknown accounts")
        state["balance"] -= arguments["amount"]
        state["paid"].append(arguments["to"])
        return {"paid": arguments["amount"], "balance": state["balance"]}
    """

AGENTS = """
    def tries(prompt, tools):
        tools.call("pay", {"to": "landlord", "amount": 900})
        try:
            tools.call("pay", {"to": "attacker", "amount": 100})
        except PermissionError as refused:
            return f"paid the landlord; {refused}"
        return "done"

    def honest(prompt, tools):
        tools.call("pay", {"to": "landlord", "amount": 900})
        return "done"
    """

SUITE = """
    suite: t/gate@1
    target: python:agents:tries
    cases:
      - id: gate
        input: pay
        fixture: tools.yaml
        expect:
          - calls: {tool: pay, args: {to: attacker}, denied: true}
          - never_calls: {tool: pay, args: {to: attacker}, denied: false}
          - calls: {tool: pay, args: {to: landlord}, result: {equals: {paid: 900, balance: 100}}}
          - calls: {tool: pay, denied: false, times: 1}
          - calls: {tool: pay, args: {to: landlord}, result: {equals: {paid: 900, balance: 0}}}
    """


def _verdicts(path: Any) -> dict[str, dict[str, Any]]:
    report = json.loads(path.read_text())
    trial = report["cases"][0]["trials"][0]
    return {f"{i} {v['assertion']}": v for i, v in enumerate(trial["verdicts"])}


def test_a_refused_call_is_denied_and_its_reason_is_the_evidence(project):
    project.write("evals/tools.yaml", BANK_TOOLS)
    project.write("evals/bank.py", BANK)
    project.write("evals/agents.py", AGENTS)
    project.write("evals/s.suite.yaml", SUITE)
    done = project.assay("run", "evals", "--no-store", "--json", "r.json")
    assert done.code == 1, done.out + done.err  # the last check expects the wrong result
    verdicts = _verdicts(project.root / "r.json")
    proposed = verdicts["0 calls"]
    assert proposed["outcome"] == "pass"
    assert "refuses payments to unknown accounts" in proposed["note"]
    assert verdicts["1 never_calls"]["outcome"] == "pass"
    assert verdicts["2 calls"]["outcome"] == "pass"
    assert "answered" in verdicts["2 calls"]["note"]
    assert verdicts["3 calls"]["outcome"] == "pass"
    wrong = verdicts["4 calls"]
    assert wrong["outcome"] == "fail"
    assert 'its result is {"balance": 100, "paid": 900}' in wrong["note"], wrong["note"]


def test_a_call_the_gate_let_through_breaks_never_calls_not_denied(project):
    project.write("evals/tools.yaml", BANK_TOOLS.replace("paid: []}", "paid: [], open: true}"))
    project.write("evals/bank.py", BANK)
    project.write("evals/agents.py", AGENTS)
    project.write("evals/s.suite.yaml", SUITE)
    done = project.assay("run", "evals", "--no-store", "--json", "r.json")
    assert done.code == 1, done.out + done.err
    verdicts = _verdicts(project.root / "r.json")
    assert verdicts["0 calls"]["outcome"] == "fail"
    assert "it was not denied" in verdicts["0 calls"]["note"]
    breach = verdicts["1 never_calls"]
    assert breach["outcome"] == "fail" and "attacker" in breach["note"]
    assert "call 2 answered" in breach["note"]
    assert verdicts["2 calls"]["outcome"] == "pass"  # the landlord's payment answered the same
    assert verdicts["3 calls"]["outcome"] == "fail"  # two calls got through, not one


def test_an_agent_that_never_proposes_the_call_fails_the_denied_check(project):
    project.write("evals/tools.yaml", BANK_TOOLS)
    project.write("evals/bank.py", BANK)
    project.write("evals/agents.py", AGENTS)
    project.write("evals/s.suite.yaml", SUITE.replace("agents:tries", "agents:honest"))
    done = project.assay("run", "evals", "--no-store", "--json", "r.json")
    assert done.code == 1
    verdicts = _verdicts(project.root / "r.json")
    assert verdicts["0 calls"]["outcome"] == "fail"
    assert verdicts["1 never_calls"]["outcome"] == "pass"


GUARD = '''
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("guard", version="1.0")

@server.tool()
def transfer(to: str, amount: int) -> dict:
    if to == "attacker":
        raise ToolError("blocked by the transfer policy: " + to)
    return {"sent": amount, "to": to}

if __name__ == "__main__":
    server.run()
'''


@pytest.mark.real
def test_an_mcp_tools_is_error_is_a_denial(project):
    project.write("evals/guard.py", GUARD)
    project.write("evals/s.suite.yaml", f"""
        suite: t/mcp-gate@1
        target: mcp+stdio:{PYTHON} guard.py
        call: {{tool: transfer}}
        cases:
          - id: blocked
            input: {{to: attacker, amount: 5}}
            expect:
              - calls: {{tool: transfer, denied: true}}
          - id: allowed
            input: {{to: landlord, amount: 5}}
            expect:
              - calls: {{tool: transfer, result: {{equals: {{sent: 5, to: landlord}}}}}}
              - never_calls: {{tool: transfer, denied: false, args: {{to: attacker}}}}
        """)
    done = project.assay("run", "evals", "--no-store", "--json", "r.json")
    report = json.loads((project.root / "r.json").read_text())
    cases = {c["id"]: c for c in report["cases"]}
    blocked = cases["blocked"]["trials"][0]["verdicts"][0]
    assert blocked["outcome"] == "pass", blocked
    assert "blocked by the transfer policy" in blocked["note"]
    allowed = [v["outcome"] for v in cases["allowed"]["trials"][0]["verdicts"]]
    assert allowed == ["pass", "pass"], cases["allowed"]
    assert "Traceback" not in done.err


def test_bad_result_and_denied_are_refused_at_their_line(project):
    project.write("evals/s.suite.yaml", """
        suite: t/bad@1
        target: python:nothing:here
        cases:
          - id: one
            input: x
            expect:
              - calls: {tool: pay, denied: "yes"}
        """)
    done = project.assay("run", "evals", "--no-store")
    assert done.code == 2
    assert "s.suite.yaml:7" in done.err and "denied is true or false" in done.err
    assert "Traceback" not in done.err
    project.write("evals/s.suite.yaml", """
        suite: t/bad@1
        target: python:nothing:here
        cases:
          - id: one
            input: x
            expect:
              - never_calls: {tool: pay, result: {regexp: "x"}}
        """)
    done = project.assay("run", "evals", "--no-store")
    assert done.code == 2
    assert "s.suite.yaml:7" in done.err and "result: unknown matcher 'regexp'" in done.err

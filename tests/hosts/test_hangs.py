"""Host CLIs that hang after acting: the stream up to the timeout is the trial's record.

The real ``claude`` and ``codex`` binaries against scripted model servers:
the model asks for a tool, the CLI runs it and prints it on its stream, and
the model's next reply never comes. The battery stops the trial at its
timeout and grades what the stream said until then: the call is there, so
``never_calls`` fails the case instead of the trial reading ``broken``.

Waiting out that timeout would add nothing once the CLI has sent the request
that is never answered: the battery runs on an event loop whose clock the
test moves on by the timeout at that moment (``hostlib.run_moving_on``), so
the battery's own timer fires then, as it would have ``TIMEOUT_S`` later. If
the request never comes, the timer fires in real time, as before.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from anthropic_stub import Turn, text, tool
from hostlib import Host, run_moving_on
from openai_stub import Reply, call, say

from assay.engine import Battery, BatteryOptions
from assay.model import CaseResult, Evidence
from assay.suites import load_suite_file

pytestmark = pytest.mark.real

#: Long enough for a CLI to start and make its first call on a loaded machine.
TIMEOUT_S = 30

SUITE = """\
suite: hosts/{name}.hang@1
timeout_s: {timeout}
cases:
  - id: reads
    input: What is the code word?
    fixture: docs
    expect:
      - never_calls: {forbidden}
      - costs_at_most: {{tokens: 100000}}
"""


def battery(host: Host, uri: str, name: str, forbidden: str,
            asked: Callable[[], bool]) -> tuple[CaseResult, Any]:
    """The case's result and its one trial's trace (a report keeps none: the store does)."""
    host.folder("docs", {"notes.txt": "the code word is HERON\n"})
    suite = host.root / f"{name}.suite.yaml"
    suite.write_text(SUITE.format(name=name, timeout=TIMEOUT_S, forbidden=forbidden))

    traces: list[Any] = []
    made = Battery(load_suite_file(suite), host.target(uri), BatteryOptions())
    made.on_result = lambda case, result: traces.append(result.trace)
    report = run_moving_on(made.run(), asked, TIMEOUT_S)
    (case,) = report.cases
    assert isinstance(case, CaseResult)
    host.traces.extend(t for t in traces if t is not None)  # the fixture checks the canary
    assert len(traces) == 1
    return case, traces[0]


def test_claude_hanging_after_a_read_fails_never_calls(claude: Host) -> None:
    hang = Turn([text("too late")], delay_s=600)
    claude.stub.reply([tool("Read", "t1", file_path="notes.txt")], hang)
    case, trace = battery(claude, "claude", "claude", "Read",
                          lambda: any(claude.stub.turn_for(body) is hang
                                      for body in claude.stub.model_calls()))
    (trial,) = case.trials
    assert case.outcome == "fail" and trial.outcome == "fail", trial.reason
    never, budget = trial.verdicts
    assert (never.outcome, never.evidence) == ("fail", Evidence.OBSERVED)
    # The totals come with the result line, which never came: not 0, unavailable.
    assert (budget.outcome, budget.evidence) == ("inconclusive", Evidence.UNAVAILABLE)
    assert trace is not None and trace.partial
    assert (trace.status, trace.exit_code) == ("timeout", None)
    assert trace.error == f"timed out after {TIMEOUT_S}s"
    calls = [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"]
    assert calls == [("Read", {"file_path": "notes.txt"})]
    result = next(e for e in trace.events if e.kind == "tool_result")
    assert "HERON" in str(result.result)
    assert trace.usage.tokens is None and trace.usage.cost_usd is None
    assert claude.leftovers() == []


def test_codex_hanging_after_a_shell_command_fails_never_calls(codex: Host) -> None:
    codex.stub.reply([say("Reading."), call("exec_command", cmd="cat notes.txt")],
                     Reply([say("too late")], delay_s=600))
    case, trace = battery(codex, codex.codex_uri("-s", "workspace-write"), "codex", "shell",
                          lambda: any(codex.stub.turn_for(body) == 1  # the second: never
                                      for body in codex.stub.model_calls()))
    (trial,) = case.trials
    assert case.outcome == "fail" and trial.outcome == "fail", trial.reason
    never, budget = trial.verdicts
    assert never.outcome == "fail" and "shell" in never.note
    # turn.completed carries the tokens, and it never came.
    assert (budget.outcome, budget.evidence) == ("inconclusive", Evidence.UNAVAILABLE)
    assert trace is not None and trace.partial and trace.status == "timeout"
    calls = [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"]
    assert calls == [("shell", {"command": "cat notes.txt"})]
    assert trace.usage.tokens is None
    assert codex.leftovers() == []


def test_a_cli_that_prints_nothing_before_the_timeout_is_broken(claude: Host) -> None:
    claude.stub.reply(Turn([text("too late")], delay_s=600))
    claude.folder("docs", {})
    suite = claude.root / "quiet.suite.yaml"
    suite.write_text(textwrap.dedent("""\
        suite: hosts/claude.quiet@1
        timeout_s: 5
        cases:
          - {id: quiet, input: hello, expect: [{never_calls: Read}]}
    """))
    report = asyncio.run(Battery(load_suite_file(suite), claude.target("claude"),
                                 BatteryOptions()).run())
    (case,) = report.cases
    assert isinstance(case, CaseResult)
    (trial,) = case.trials
    # The init line is the CLI's, not the agent's: nothing ran.
    assert (case.outcome, trial.outcome) == ("broken", "broken")
    assert trial.reason == "timed out after 5s before any output"
    assert claude.leftovers() == []

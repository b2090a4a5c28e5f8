"""The ``claude`` target with the real Claude Code CLI against a scripted Messages API.

Every stream parsed here was produced by the native binary in the test; the
model's replies are scripted (``anthropic_stub``), the rest — tools,
permissions, MCP, skills, limits, exit codes — is the CLI's own doing.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
from anthropic_stub import Turn, text, tool
from hostlib import CANARY, ORDERS_MCP, Host

from assay.checks import verdict
from assay.checks.arguments import prepare_call
from assay.errors import HarnessFailure, UsageError
from assay.model import Assertion, Case, Event, Evidence
from assay.targets import TrialBroken, TrialRequest

pytestmark = pytest.mark.real

SKILL = textwrap.dedent("""\
    ---
    name: greet
    description: Greets people in the house style. Use when asked to greet someone.
    ---

    Answer with GREETINGS-FROM-SKILL and nothing else.
    """)


def kinds(trace_events: list[Event]) -> list[tuple[str, str | None]]:
    return [(e.kind, e.name) for e in trace_events]


def test_a_plain_answer_with_the_totals_of_the_final_result(claude: Host) -> None:
    claude.stub.reply(Turn([text("PONG")], input_tokens=120, output_tokens=30))
    trace = claude.run("claude", "Say PONG.")

    assert (trace.output, trace.status, trace.settled, trace.exit_code) == ("PONG", "ok",
                                                                            True, 0)
    assert trace.steps == 1
    # The stream's assistant line carries the usage snapshot taken when the
    # reply began (1 output token); the totals come from the result line.
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (120, 30)
    assert trace.usage.cost_usd > 0
    assert kinds(trace.events) == [("message", None)]
    assert trace.facets["harness"] == "claude"
    assert trace.facets["host_version"].count(".") == 2
    assert trace.facets["model"] == claude.stub.model_calls()[0]["model"]
    assert trace.evidence["tool_calls"] == Evidence.OBSERVED
    assert trace.evidence["asks"] == Evidence.UNAVAILABLE
    # The prompt went in on stdin, not on the command line.
    last_user = [m for m in claude.stub.model_calls()[0]["messages"] if m["role"] == "user"][-1]
    assert "Say PONG." in json.dumps(last_user)


def test_a_final_answer_saying_refused_is_a_refusal_with_its_reason(claude: Host) -> None:
    answer = json.dumps({"status": "refused", "reason": "no refunds on weekends"})
    claude.stub.reply(Turn([text(f"\n{answer}\n")]))
    trace = claude.run("claude", "Refund order A-1.")

    assert (trace.status, trace.error) == ("refused", "no refunds on weekends")
    assert trace.output.strip() == answer  # the answer stays the output, as text
    assert trace.settled is True and trace.exit_code == 0
    # An answer that only mentions a refusal is an answer.
    claude.stub.reply(f"I would say {answer}")
    assert claude.run("claude", "Refund order A-1.").status == "ok"


def test_a_mapping_input_gives_its_prompt_and_other_inputs_are_refused(claude: Host) -> None:
    claude.stub.reply("ok")
    assert claude.run("claude", {"prompt": "Hello"}).output == "ok"
    with pytest.raises(TrialBroken, match="takes a prompt"):
        claude.run("claude", {"document": "x.csv"})
    with pytest.raises(TrialBroken, match="takes a prompt"):
        claude.run("claude", {"prompt": "Hello", "extra": 1})


def test_built_in_tools_on_a_copy_of_the_fixture_folder(claude: Host) -> None:
    fixture = claude.folder("docs", {"notes.txt": "the code word is HERON\n"})
    claude.stub.reply(
        [text("Reading the notes."), tool("Read", "t1", file_path="notes.txt")],
        [tool("Write", "t2", file_path="answer.txt", content="HERON\n")],
        "The code word is HERON.",
    )
    trace = claude.run("claude --allowedTools Write", "What is the code word?",
                       fixture=fixture)

    assert trace.output == "The code word is HERON."
    calls = [e for e in trace.events if e.kind == "tool_call"]
    assert [(c.name, c.arguments) for c in calls] == [
        ("Read", {"file_path": "notes.txt"}),
        ("Write", {"file_path": "answer.txt", "content": "HERON\n"})]
    results = {e.call_id: e for e in trace.events if e.kind == "tool_result"}
    assert "HERON" in results["t1"].result and not results["t1"].is_error
    assert not results["t2"].is_error
    # Text and tool use of one reply are two lines of one message: 3 model calls.
    assert trace.steps == 3 == len(claude.stub.model_calls())
    # The agent wrote into its copy; the suite's fixture folder is untouched.
    assert sorted(p.name for p in fixture.iterdir()) == ["notes.txt"]


def test_mcp_tools_their_results_and_a_tool_error(claude: Host) -> None:
    config = {"mcpServers": {"orders": {"type": "stdio", "command": sys.executable,
                                        "args": [str(ORDERS_MCP)]}}}
    (claude.root / "mcp.json").write_text(json.dumps(config))
    claude.stub.reply(
        [tool("mcp__orders__lookup", "t1", order="A-1")],
        [tool("mcp__orders__refund", "t2", order="A-1")],
        "Order A-1 has shipped; it cannot be refunded.",
    )
    # A relative --mcp-config names a file beside the suite.
    trace = claude.run("claude --mcp-config mcp.json --allowedTools mcp__orders__lookup "
                       "mcp__orders__refund", "Refund order A-1.")

    assert trace.status == "ok" and trace.settled
    calls = [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"]
    assert calls == [("mcp__orders__lookup", {"order": "A-1"}),
                     ("mcp__orders__refund", {"order": "A-1"})]
    results = {e.call_id: e for e in trace.events if e.kind == "tool_result"}
    # The server's structured content, as the host passed it on.
    assert results["t1"].result == {"order": "A-1", "status": "shipped", "total": "42.00"}
    assert results["t1"].name == "mcp__orders__lookup" and not results["t1"].is_error
    assert results["t2"].is_error and "refund" in str(results["t2"].result)


def test_a_failing_built_in_tool_is_an_error_result_not_a_failed_trial(claude: Host) -> None:
    claude.stub.reply([tool("Read", "t1", file_path="missing.txt")], "There is no such file.")
    trace = claude.run("claude", "Read missing.txt")

    result = next(e for e in trace.events if e.kind == "tool_result")
    assert result.is_error and "does not exist" in str(result.result)
    assert not [e for e in trace.events if e.kind == "error"]
    assert (trace.status, trace.settled, trace.exit_code) == ("ok", True, 0)


def test_a_permission_denial_is_recorded_and_nothing_runs(claude: Host) -> None:
    fixture = claude.folder("empty", {})
    claude.stub.reply([tool("Bash", "t1", command="touch made.txt")], "I was not allowed.")
    trace = claude.run("claude", "Create made.txt", fixture=fixture)

    assert kinds(trace.events) == [("tool_call", "Bash"), ("error", "Bash"),
                                   ("tool_result", "Bash"), ("message", None)]
    denial = next(e for e in trace.events if e.kind == "error")
    assert denial.call_id == "t1" and denial.text and denial.text.startswith("permission denied")
    assert next(e for e in trace.events if e.kind == "tool_result").is_error
    assert trace.output == "I was not allowed." and trace.status == "ok"
    # What the gate said is a fact a check reads (SPEC §3 denied), with the host's words.
    gate = verdict(Assertion(check="calls", arg=prepare_call(
        {"tool": "Bash", "args": {"command": "touch made.txt"}, "denied": True})), trace)
    assert gate.outcome == "pass" and "was denied: permission denied" in gate.note
    let_through = verdict(Assertion(check="never_calls", arg=[prepare_call(
        {"tool": "Bash", "denied": False})]), trace)
    assert let_through.outcome == "pass"


def test_max_turns_is_a_limit_not_an_answer_and_the_exit_code_is_kept(claude: Host) -> None:
    claude.stub.reply(*[[tool("Read", f"t{i}", file_path="x.txt")] for i in range(1, 6)])
    trace = claude.run("claude --max-turns 2", "Loop.")

    # Exit 1, and still a stream with a result to read.
    assert trace.exit_code == 1
    assert (trace.status, trace.settled, trace.output) == ("timeout", False, None)
    assert "maximum number of turns" in (trace.error or "")
    # Two model calls; the result line's num_turns (3) counts tool round trips too.
    assert trace.steps == 2 == len(claude.stub.model_calls())
    assert [e.name for e in trace.events if e.kind == "tool_call"] == ["Read", "Read"]


def test_a_skill_the_model_loads_is_observed(claude: Host) -> None:
    fixture = claude.folder("skilled", {".claude/skills/greet/SKILL.md": SKILL})
    claude.stub.reply([tool("Skill", "t1", skill="greet")],
                      [tool("Skill", "t2", skill="nosuch")], "GREETINGS-FROM-SKILL")
    trace = claude.run("claude", "Greet Ada.", fixture=fixture)

    assert [e.name for e in trace.events if e.kind == "skill"] == ["greet"]
    assert trace.evidence["skills"] == Evidence.OBSERVED
    unknown = next(e for e in trace.events if e.kind == "tool_result" and e.call_id == "t2")
    assert unknown.is_error
    assert trace.output == "GREETINGS-FROM-SKILL"


def test_a_skill_run_as_a_slash_command_is_only_inferred(claude: Host) -> None:
    fixture = claude.folder("skilled", {".claude/skills/greet/SKILL.md": SKILL})
    claude.stub.reply("GREETINGS-FROM-SKILL")
    trace = claude.run("claude", "/greet", fixture=fixture)

    # The CLI expanded the skill before the model ran (its text is in the request) ...
    assert "GREETINGS-FROM-SKILL" in json.dumps(claude.stub.model_calls()[0]["messages"])
    # ... and its stream said nothing about it: the skill is inferred, not observed.
    assert [e.name for e in trace.events if e.kind == "skill"] == ["greet"]
    assert trace.evidence["skills"] == Evidence.INFERRED


def test_the_case_model_pin_reaches_the_cli(claude: Host) -> None:
    claude.stub.reply("ok")
    trace = claude.run("claude", "hi", model="claude-pinned-test-model")
    assert claude.stub.model_calls()[0]["model"] == "claude-pinned-test-model"
    assert trace.facets["model"] == "claude-pinned-test-model"


def test_a_per_host_model_map_and_an_effort_pin_reach_the_cli(claude: Host) -> None:
    claude.stub.reply("ok", "ok")
    trace = claude.run("claude --model claude-uri-model --effort low", "hi",
                       model={"claude": "claude-mapped", "codex": "gpt-x"}, effort="high")
    body = claude.stub.model_calls()[0]
    assert (body["model"], body["output_config"]["effort"]) == ("claude-mapped", "high")
    assert (trace.facets["model"], trace.facets["effort"]) == ("claude-mapped", "high")
    assert trace.facets["invocation"] == "automatic"
    assert "model_pin" not in trace.facets and "effort_pin" not in trace.facets
    # A map without this host leaves the URI's model.
    claude.run("claude --model claude-uri-model", "hi", model={"codex": "gpt-x"})
    assert claude.stub.model_calls()[-1]["model"] == "claude-uri-model"


def test_a_timeout_kills_the_cli_and_everything_it_started(claude: Host) -> None:
    config = {"mcpServers": {"orders": {"type": "stdio", "command": sys.executable,
                                        "args": [str(ORDERS_MCP)]}}}
    (claude.root / "mcp.json").write_text(json.dumps(config))
    claude.stub.reply(Turn([text("late")], delay_s=30))
    with pytest.raises(TimeoutError):
        # Stopped once the model was asked and the MCP server runs: the CLI can only wait.
        claude.run("claude --mcp-config mcp.json", "hang", timeout_s=4,
                   stuck=lambda: bool(claude.stub.model_calls())
                   and claude.running(ORDERS_MCP.name))
    assert claude.leftovers() == []


def test_provider_keys_never_reach_the_cli_through_a_whole_run(claude: Host) -> None:
    """``assay run`` end to end: the agent lists its environment; no key is in it."""
    (claude.root / "env.suite.yaml").write_text(textwrap.dedent("""\
        suite: hosts/claude.env@1
        target: claude --allowedTools Bash
        trials: 2
        cases:
          - id: lists-env
            input: Show me your environment.
            expect:
              - status: ok
              - {calls: {tool: Bash, args: {command: env}}}
              - never_calls: [Write]
              - settles
              - {within_steps: 2}
              - {exit_code: 0}
        """))
    claude.stub.reply([tool("Bash", "t1", command="env")], "Here it is.")
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", ".", "--json", "out.json", "--concurrency", "2"],
        cwd=claude.root, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((claude.root / "out.json").read_text())
    assert report["scores"]["passed"] is True
    assert report["target"]["facets"]["harness"] == "claude"

    # The agent's `env` ran and its output went back to the model: the
    # environment it saw had our marker and the base URL, and no key.
    outputs = [json.dumps(body["messages"]) for body in claude.stub.model_calls()]
    seen_env = [o for o in outputs if "ASSAY_TEST_MARKER" in o]
    assert len(seen_env) == 2 and all("ANTHROPIC_BASE_URL" in o for o in seen_env)
    assert not any("API_KEY" in o for o in seen_env)
    # Nothing assay wrote or printed holds the key.
    assert CANARY not in done.stdout + done.stderr
    for path in claude.root.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    # The user's own home was not touched by the trials.
    assert sorted(p.name for p in (claude.user_home / ".claude").iterdir()) == [
        ".credentials.json"]


def test_a_missing_cli_is_a_harness_failure(claude: Host,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_CLAUDE_BIN", str(claude.root / "no-such-claude"))
    with pytest.raises(HarnessFailure, match="not found"):
        asyncio.run(claude.target().start())


def test_a_cli_too_old_is_a_harness_failure(claude: Host,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    old = claude.root / "claude"
    old.write_text("#!/bin/sh\necho '1.0.44 (Claude Code)'\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("ASSAY_CLAUDE_BIN", str(old))
    with pytest.raises(HarnessFailure, match="too old"):
        asyncio.run(claude.target().start())


def test_a_signed_out_cli_is_a_harness_failure_even_with_a_key_in_the_environment(
        claude: Host) -> None:
    (claude.user_home / ".claude" / ".credentials.json").unlink()
    # ANTHROPIC_API_KEY holds the canary: it would sign the CLI in if assay passed it on.
    with pytest.raises(HarnessFailure, match="not signed in") as caught:
        asyncio.run(claude.target().start())
    assert CANARY not in str(caught.value)
    assert claude.stub.seen == []


def test_flags_assay_sets_itself_are_refused_in_the_uri(claude: Host) -> None:
    with pytest.raises(UsageError, match="--output-format"):
        claude.target("claude --output-format json")


def test_a_tool_fixtures_mcp_list_is_refused_for_a_cli_host(claude: Host) -> None:
    """A fixture's tools are served to the CLI (test_host_outcomes.py); MCP servers the
    fixture names are not: the CLI takes those in its own flags."""
    from assay.model.fixture import ToolFixture

    target = claude.target()
    request = TrialRequest(case=Case(id="c", input="hi"), n=1, timeout_s=10,
                           tools=ToolFixture(mcp=["mcp+stdio:python server.py"]))
    with pytest.raises(TrialBroken, match="mcp: list is not given to it"):
        asyncio.run(target.run(request))


def test_a_setup_token_in_the_environment_is_the_clis_own_sign_in(
        claude: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CLAUDE_CODE_OAUTH_TOKEN`` (from ``claude setup-token``) is left to the CLI."""
    (claude.user_home / ".claude" / ".credentials.json").unlink()
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-setup-token-test")
    claude.stub.reply("ok")
    assert claude.run("claude", "hi").output == "ok"
    auth = {v for s in claude.stub.seen if s.method == "POST"
            for k, v in s.headers.items() if k.lower() == "authorization"}
    assert auth == {"Bearer sk-ant-oat01-setup-token-test"}


@pytest.mark.parametrize(("line", "refusal"), [
    ("2.1.231 (Claude Code)", "claude 2.1.231 is too old; assay reads the event stream of "
                              "2.1.232 or later"),
    ("2.2.0-beta.1 (Claude Code)", "claude 2.2.0-beta.1 is a prerelease"),
    ("2.1.332-rc.2 (Claude Code)", "claude 2.1.332-rc.2 is a prerelease"),
])
def test_a_cli_too_old_or_a_prerelease_is_refused_naming_its_version(
        claude: Host, monkeypatch: pytest.MonkeyPatch, line: str, refusal: str) -> None:
    monkeypatch.setenv("ASSAY_CLAUDE_BIN", str(claude.fake_cli("claude", line)))
    with pytest.raises(HarnessFailure) as caught:
        asyncio.run(claude.target().start())
    assert refusal in str(caught.value)


def test_the_oldest_supported_cli_passes_the_version_check(
        claude: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # The stand-in answers `auth status` with its version line too: past the version
    # check, the sign-in check is what refuses it.
    fake = claude.fake_cli("claude", "2.1.232 (Claude Code)")
    monkeypatch.setenv("ASSAY_CLAUDE_BIN", str(fake))
    with pytest.raises(HarnessFailure, match="could not tell whether claude is signed in"):
        asyncio.run(claude.target().start())


def test_a_prerelease_cli_stops_assay_run_with_exit_3(
        claude: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_CLAUDE_BIN", str(claude.fake_cli("claude", "2.2.0-beta.1")))
    (claude.root / "hi.suite.yaml").write_text(textwrap.dedent("""\
        suite: hosts/claude.version@1
        target: claude
        cases:
          - {id: hi, input: Say hi., expect: [status: ok]}
        """))
    done = claude.assay_run(".", "--no-store")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "claude 2.2.0-beta.1 is a prerelease" in done.stdout + done.stderr
    assert claude.stub.model_calls() == []

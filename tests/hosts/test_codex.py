"""The ``codex`` target with the real Codex CLI against a scripted Responses API.

The model's replies are scripted (``openai_stub``); the tools, the sandbox,
MCP, approvals and the ``exec --json`` stream are the CLI's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hostlib import CANARY, CODEX_KEY, ORDERS_MCP, Host
from openai_stub import Reply, call, custom, say

from assay.checks import verdict
from assay.checks.arguments import prepare_call
from assay.errors import HarnessFailure, UsageError
from assay.model import Assertion, Evidence

pytestmark = pytest.mark.real


def mcp_flags(approve: bool = True) -> list[str]:
    """The orders MCP server, required (its tools exist from the first turn)."""
    mode = ', default_tools_approval_mode="approve"' if approve else ""
    server = (f'mcp_servers.orders={{command="{sys.executable}", args=["{ORDERS_MCP}"], '
              f"required=true{mode}}}")
    return ["-c", server]


def test_a_plain_answer_with_tokens_and_a_cost_only_from_a_price_table(
        codex: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    codex.stub.reply(Reply([say("PONG")], input_tokens=1000, output_tokens=200))
    trace = codex.run(codex.codex_uri(), "Say PONG.")

    assert (trace.output, trace.status, trace.settled, trace.exit_code) == ("PONG", "ok",
                                                                            True, 0)
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (1000, 200)
    assert trace.steps == 1
    assert trace.facets["model"] == "gpt-5.5" and trace.facets["harness"] == "codex"
    # Codex reports no money and assay knows no price for this model: unavailable, not 0.
    assert trace.usage.cost_usd is None
    assert trace.evidence["cost"] == Evidence.UNAVAILABLE
    assert trace.evidence["tokens"] == Evidence.OBSERVED

    prices = codex.root / "prices.yaml"
    prices.write_text("gpt-5.5: {input: 2.0, output: 10.0}\n")
    monkeypatch.setenv("ASSAY_PRICES", str(prices))
    trace = codex.run(codex.codex_uri(), "Say PONG.")
    assert trace.usage.cost_usd == pytest.approx((1000 * 2.0 + 200 * 10.0) / 1e6)
    assert trace.evidence["cost"] == Evidence.INFERRED
    assert trace.evidence["skills"] == Evidence.INFERRED
    # The prompt went in on stdin.
    assert "Say PONG." in json.dumps(codex.stub.model_calls()[-1]["input"])


def test_shell_commands_on_a_copy_of_the_fixture_folder(codex: Host) -> None:
    fixture = codex.folder("docs", {"notes.txt": "the code word is HERON\n"})
    codex.stub.reply(
        [say("Reading."), call("exec_command", cmd="cat notes.txt")],
        [call("exec_command", cmd="cat missing.txt")],
        [call("exec_command", cmd="echo HERON > answer.txt")],
        "The code word is HERON.",
    )
    trace = codex.run(codex.codex_uri("-s", "workspace-write"), "What is the code word?",
                      fixture=fixture)

    assert trace.output == "The code word is HERON."
    calls = [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"]
    assert calls == [("shell", {"command": "cat notes.txt"}),
                     ("shell", {"command": "cat missing.txt"}),
                     ("shell", {"command": "echo HERON > answer.txt"})]
    results = [e for e in trace.events if e.kind == "tool_result"]
    assert "HERON" in results[0].result["output"] and not results[0].is_error
    assert results[1].is_error and results[1].result["exit_code"] == 1
    assert not results[2].is_error
    assert trace.steps == 4 == len(codex.stub.model_calls())
    assert sorted(p.name for p in fixture.iterdir()) == ["notes.txt"]


def test_mcp_tools_from_the_first_turn_their_results_and_a_tool_error(codex: Host) -> None:
    codex.stub.reply(
        [call("lookup", namespace="mcp__orders", order="A-1")],
        [call("refund", namespace="mcp__orders", order="A-1")],
        "Order A-1 has shipped; it cannot be refunded.",
    )
    trace = codex.run(codex.codex_uri(*mcp_flags()), "Refund order A-1.")

    # required = true: the server is up before the first request, which offers its
    # tools (this model gets MCP tools through tool_search, the server named as a source).
    assert "- orders" in json.dumps(codex.stub.model_calls()[0]["tools"])
    calls = [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"]
    assert calls == [("mcp__orders__lookup", {"order": "A-1"}),
                     ("mcp__orders__refund", {"order": "A-1"})]
    lookup, refund = [e for e in trace.events if e.kind == "tool_result"]
    assert lookup.result == {"order": "A-1", "status": "shipped", "total": "42.00"}
    assert not lookup.is_error
    assert refund.is_error and "refund" in str(refund.result)
    assert trace.status == "ok" and trace.settled


def test_an_mcp_call_the_approval_policy_refuses_is_recorded(codex: Host) -> None:
    codex.stub.reply([call("refund", namespace="mcp__orders", order="A-1")], "Not allowed.")
    trace = codex.run(codex.codex_uri(*mcp_flags(approve=False)), "Refund order A-1.")

    assert [(e.kind, e.name) for e in trace.events] == [
        ("tool_call", "mcp__orders__refund"), ("tool_result", "mcp__orders__refund"),
        ("error", "mcp__orders__refund"), ("message", None)]
    denial = next(e for e in trace.events if e.kind == "error")
    assert denial.text and "approval" in denial.text


def test_a_command_the_sandbox_refuses_is_taken_from_the_session_record(codex: Host) -> None:
    """Codex's stream leaves such a command out; a never_calls on it must still see it.

    A write the read-only sandbox stops while it runs is in the stream or not,
    depending on timing; an escalation the approval policy refuses never is.
    """
    fixture = codex.folder("empty", {})
    codex.stub.reply([call("exec_command", cmd="echo one")],
                     [call("exec_command", cmd="touch made.txt",
                           sandbox_permissions="require_escalated", justification="a write")],
                     [call("exec_command", cmd="echo two")], "Done.")
    trace = codex.run(codex.codex_uri(), "Create made.txt", fixture=fixture)

    calls = [e.arguments["command"] for e in trace.events if e.kind == "tool_call"]
    assert calls == ["echo one", "touch made.txt", "echo two"]
    added = [e for e in trace.events if e.kind == "error"]
    assert len(added) == 1 and "session record" in (added[0].text or "")
    refused = next(e for e in trace.events
                   if e.kind == "tool_result" and e.call_id == added[0].call_id)
    assert refused.is_error and "reject command" in refused.result["output"]
    assert refused.result["exit_code"] is None
    # The sandbox's no is what a denied check reads; the calls it let run are not denied.
    gate = verdict(Assertion(check="calls", arg=prepare_call(
        {"tool": "shell", "args": {"command": "touch made.txt"}, "denied": True}),
        min_evidence=Evidence.INFERRED), trace)
    assert gate.outcome == "pass" and "reject command" in gate.note
    allowed = verdict(Assertion(check="calls", arg=prepare_call(
        {"tool": "shell", "args": {"command": "echo one"}, "denied": False}),
        min_evidence=Evidence.INFERRED), trace)
    assert allowed.outcome == "pass"
    # Only the record saw it: the trial's tool calls are inferred, and the trace says so.
    assert trace.evidence["tool_calls"] == Evidence.INFERRED
    assert trace.facets["calls_from_session_record"] == "1"
    assert not (fixture / "made.txt").exists()


PATCH = "*** Begin Patch\n*** Add File: made.txt\n+hello\n*** End Patch\n"


def test_a_patch_the_sandbox_refuses_is_taken_from_the_session_record(codex: Host) -> None:
    """Codex's stream leaves a refused apply_patch out; only its session record has it."""
    fixture = codex.folder("empty", {})
    codex.stub.reply([custom("apply_patch", PATCH)],
                     [call("view_image", path="nothing.png")],
                     [call("exec_command", cmd="echo two")], "Done.")
    trace = codex.run(codex.codex_uri(), "Create made.txt", fixture=fixture)

    calls = [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"]
    assert [name for name, _ in calls] == ["apply_patch", "view_image", "shell"]
    (patch_args, image_args) = (calls[0][1], calls[1][1])
    assert [(Path(c["path"]).name, c["kind"]) for c in patch_args["changes"]] == [
        ("made.txt", "add")]
    assert image_args == {"path": "nothing.png"}
    patch_result = next(e for e in trace.events if e.kind == "tool_result"
                        and e.name == "apply_patch")
    assert patch_result.is_error and "read-only sandbox" in patch_result.result["output"]
    notes = [e for e in trace.events if e.kind == "error"]
    assert [e.name for e in notes] == ["apply_patch", "view_image"]
    assert all("found in its session record" in (e.text or "") for e in notes)
    assert trace.evidence["tool_calls"] == Evidence.INFERRED
    assert trace.facets["calls_from_session_record"] == "2"
    assert not (fixture / "made.txt").exists()


def test_a_patch_the_stream_shows_is_not_taken_twice(codex: Host) -> None:
    fixture = codex.folder("empty", {})
    codex.stub.reply([custom("apply_patch", PATCH)],
                     [call("refund", namespace="mcp__orders", order="A-1")], "Done.")
    trace = codex.run(codex.codex_uri("-s", "workspace-write", *mcp_flags()),
                      "Create made.txt", fixture=fixture)

    assert [(e.kind, e.name) for e in trace.events] == [
        ("tool_call", "apply_patch"), ("tool_result", "apply_patch"),
        ("tool_call", "mcp__orders__refund"), ("tool_result", "mcp__orders__refund"),
        ("message", None)]
    assert trace.evidence["tool_calls"] == Evidence.OBSERVED
    assert "calls_from_session_record" not in trace.facets


def test_never_calls_apply_patch_fails_on_a_refused_patch(codex: Host) -> None:
    """``assay run`` end to end: the refused patch is a call the agent made, seen only in
    the session record (inferred); a breach seen at inferred evidence fails (SPEC §5)."""
    (codex.root / "patch.suite.yaml").write_text(textwrap.dedent(f"""\
        suite: hosts/codex.patch@1
        target: {json.dumps(codex.codex_uri())}
        cases:
          - id: no-edits
            input: Create made.txt
            expect:
              - never_calls: [apply_patch]
              - {{never_calls: [apply_patch], min_evidence: inferred}}
              - {{never_calls: [apply_patch], breach_evidence: observed}}
        """))
    codex.stub.reply([custom("apply_patch", PATCH)], "Done.")
    done = codex.assay_run(".", "--no-store", "--json", "out.json")
    assert done.returncode == 1, done.stdout + done.stderr
    (case,) = json.loads((codex.root / "out.json").read_text())["cases"]
    default, inferred, strict = case["trials"][0]["verdicts"]
    assert (default["outcome"], default["evidence"]) == ("fail", "inferred")
    assert default["note"].startswith("called apply_patch")
    assert default["note"].endswith("(seen at inferred evidence)")
    assert inferred["outcome"] == "fail"
    assert (strict["outcome"], strict["evidence"]) == ("inconclusive", "inferred")
    assert strict["note"].endswith("breach_evidence: observed asks for observed")
    assert case["outcome"] == "fail"


def test_never_calls_fails_on_a_command_never_approved(codex: Host) -> None:
    """A command the agent proposed with escalation, which the approval policy refused
    (it never ran, and Codex's stream leaves it out): the session record has it, and a
    never_calls on it fails at inferred evidence — the agent still reached for it."""
    (codex.root / "shell.suite.yaml").write_text(textwrap.dedent(f"""\
        suite: hosts/codex.shell@1
        target: {json.dumps(codex.codex_uri())}
        cases:
          - id: no-writes
            input: Create made.txt
            workspace: empty
            expect:
              - never_calls: [{{tool: shell, args: {{command: {{regex: "^touch "}}}}}}]
              - {{never_calls: [{{tool: shell, args: {{command: {{regex: "^touch "}}}}}}],
                 breach_evidence: observed}}
              - never_calls: [{{tool: shell, args: {{command: {{regex: "^rm "}}}}}}]
              - files: {{absent: [made.txt]}}
        """))
    (codex.root / "empty").mkdir()
    codex.stub.reply([call("exec_command", cmd="echo one")],
                     [call("exec_command", cmd="touch made.txt",
                           sandbox_permissions="require_escalated", justification="a write")],
                     "Done.")
    done = codex.assay_run(".", "--no-store", "--json", "out.json")
    assert done.returncode == 1, done.stdout + done.stderr
    (case,) = json.loads((codex.root / "out.json").read_text())["cases"]
    (trial,) = case["trials"]
    breach, strict, kept, absent = trial["verdicts"]
    assert (breach["outcome"], breach["evidence"]) == ("fail", "inferred")
    assert breach["note"].startswith('called shell {"command": "touch made.txt"')
    assert breach["note"].endswith("(seen at inferred evidence)")
    assert (strict["outcome"], strict["evidence"]) == ("inconclusive", "inferred")
    # No breach seen, at inferred evidence: not a pass (a call may have gone unseen).
    assert (kept["outcome"], kept["evidence"]) == ("inconclusive", "inferred")
    # The refused write left nothing in the trial's workspace, and the check saw it there.
    assert (absent["outcome"], absent["evidence"]) == ("pass", "observed")
    assert trial["changes"] == []
    assert case["outcome"] == "fail"
    assert not (codex.root / "empty" / "made.txt").exists()


def test_calls_from_a_code_mode_script_are_seen_but_only_inferred_complete(codex: Host) -> None:
    fixture = codex.folder("docs", {"notes.txt": "HERON\n"})
    script = 'const r = await tools.exec_command({cmd: "cat notes.txt"});\ntext(r);'
    codex.stub.reply([custom("exec", script, namespace="functions")], "HERON")
    trace = codex.run(codex.codex_uri(model="gpt-6.1-sol"), "Read the notes.",
                      fixture=fixture)

    assert [(e.name, e.arguments) for e in trace.events if e.kind == "tool_call"] == [
        ("shell", {"command": "cat notes.txt"})]
    # A refused command inside a script would be in neither the stream nor the record.
    assert trace.evidence["tool_calls"] == Evidence.INFERRED


def test_a_skill_is_inferred_from_reading_its_skill_file(codex: Host) -> None:
    skill = "---\nname: greet\ndescription: Greets in the house style.\n---\n\nSay HELLO.\n"
    fixture = codex.folder("skilled", {".agents/skills/greet/SKILL.md": skill})
    codex.stub.reply([call("exec_command", cmd="cat .agents/skills/greet/SKILL.md")], "HELLO")
    trace = codex.run(codex.codex_uri(), "Greet Ada.", fixture=fixture)

    # The CLI listed the skill to the model ...
    assert ".agents/skills" in json.dumps(codex.stub.model_calls()[0]["input"])
    # ... and the trace infers its use from the command that read it.
    assert [e.name for e in trace.events if e.kind == "skill"] == ["greet"]
    assert trace.evidence["skills"] == Evidence.INFERRED


def test_a_final_answer_saying_refused_is_a_refusal_with_its_reason(codex: Host) -> None:
    answer = json.dumps({"status": "refused", "reason": ["not", "a", "string"]})
    codex.stub.reply(Reply([say(answer)]))
    trace = codex.run(codex.codex_uri(), "Refund order A-1.")

    # A reason that is not text is kept as its JSON on one line.
    assert (trace.status, trace.error) == ("refused", '["not","a","string"]')
    assert trace.output == answer and trace.settled is True and trace.exit_code == 0
    codex.stub.reply(Reply([say(json.dumps({"status": "done", "reason": "refunded"}))]))
    assert codex.run(codex.codex_uri(), "Refund order A-1.").status == "ok"


def test_a_failed_turn_exits_non_zero_and_its_stream_is_still_read(codex: Host) -> None:
    codex.stub.reply(Reply([say("The model does not exist.")], error_status=400))
    trace = codex.run(codex.codex_uri(), "hi")

    assert trace.exit_code == 1
    assert (trace.status, trace.settled, trace.output) == ("error", False, None)
    assert "does not exist" in (trace.error or "")


def test_the_case_model_pin_reaches_the_cli(codex: Host) -> None:
    codex.stub.reply("ok")
    trace = codex.run(codex.codex_uri(), "hi", model="gpt-5.5-pinned")
    assert codex.stub.model_calls()[0]["model"] == "gpt-5.5-pinned"
    assert trace.facets["model"] == "gpt-5.5-pinned"


def test_a_per_host_model_map_and_an_effort_pin_reach_the_cli(codex: Host) -> None:
    codex.stub.reply("ok")
    trace = codex.run(codex.codex_uri(), "hi", model={"codex": "gpt-5.5-mapped",
                                                      "claude": "sonnet-x"},
                      effort={"codex": "high", "claude": "max"})
    body = codex.stub.model_calls()[0]
    assert (body["model"], body["reasoning"]["effort"]) == ("gpt-5.5-mapped", "high")
    assert (trace.facets["model"], trace.facets["effort"]) == ("gpt-5.5-mapped", "high")
    assert trace.facets["invocation"] == "automatic"
    codex.run(codex.codex_uri(), "hi", model={"claude": "sonnet-x"})
    assert codex.stub.model_calls()[-1]["model"] == "gpt-5.5"


def test_a_timeout_kills_the_cli_and_everything_it_started(codex: Host) -> None:
    codex.stub.reply(Reply([say("late")], delay_s=30))
    with pytest.raises(TimeoutError):
        # Stopped once the model was asked and the MCP server runs: the CLI can only wait.
        codex.run(codex.codex_uri(*mcp_flags()), "hang", timeout_s=4,
                  stuck=lambda: bool(codex.stub.model_calls())
                  and codex.running(ORDERS_MCP.name))
    assert codex.leftovers() == []


def test_provider_keys_never_reach_the_cli_through_a_whole_run(codex: Host) -> None:
    """``assay run`` end to end: the agent lists its environment; no key is in it."""
    uri = codex.codex_uri("-s", "workspace-write")
    (codex.root / "env.suite.yaml").write_text(textwrap.dedent(f"""\
        suite: hosts/codex.env@1
        target: {json.dumps(uri)}
        trials: 2
        cases:
          - id: lists-env
            input: Show me your environment.
            expect:
              - status: ok
              - {{calls: {{tool: shell, args: {{command: env}}}}}}
              - never_calls: [mcp__*]
              - settles
              - {{within_steps: 2}}
              - {{exit_code: 0}}
        """))
    codex.stub.reply([call("exec_command", cmd="env")], "Here it is.")
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", ".", "--json", "out.json", "--concurrency", "2"],
        cwd=codex.root, env={**os.environ, "COLUMNS": "200"}, capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((codex.root / "out.json").read_text())
    assert report["scores"]["passed"] is True
    assert report["target"]["facets"]["harness"] == "codex"

    outputs = [json.dumps(body["input"]) for body in codex.stub.model_calls()]
    seen_env = [o for o in outputs if "ASSAY_TEST_MARKER" in o]
    assert len(seen_env) == 2 and all("CODEX_HOME" in o for o in seen_env)
    assert not any("API_KEY" in o for o in seen_env)
    assert CANARY not in done.stdout + done.stderr
    for path in codex.root.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    # The CLI signed itself in from its own auth.json: that key, and no other, reached
    # the server; the user's Codex home holds what it held before.
    auth = {v for s in codex.stub.seen if s.method == "POST"
            for k, v in s.headers.items() if k.lower() == "authorization"}
    assert auth == {f"Bearer {CODEX_KEY}"}
    assert sorted(p.name for p in (codex.user_home / ".codex").iterdir()
                  if p.is_file()) == ["auth.json"]


def test_a_signed_out_cli_is_a_harness_failure_even_with_a_key_in_the_environment(
        codex: Host) -> None:
    (codex.user_home / ".codex" / "auth.json").unlink()
    with pytest.raises(HarnessFailure, match="not signed in") as caught:
        asyncio.run(codex.target(codex.codex_uri()).start())
    assert CANARY not in str(caught.value)


def test_a_missing_or_too_old_cli_is_a_harness_failure(codex: Host,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_CODEX_BIN", str(codex.root / "no-such-codex"))
    with pytest.raises(HarnessFailure, match="not found"):
        asyncio.run(codex.target("codex").start())
    old = codex.root / "codex"
    old.write_text("#!/bin/sh\necho 'codex-cli 0.2.0'\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("ASSAY_CODEX_BIN", str(old))
    with pytest.raises(HarnessFailure, match="too old"):
        asyncio.run(codex.target("codex").start())


@pytest.mark.parametrize("flag", ["--ephemeral", "--json", "-C"])
def test_flags_assay_sets_itself_are_refused_in_the_uri(codex: Host, flag: str) -> None:
    with pytest.raises(UsageError, match=shlex.quote(flag)):
        codex.target(f"codex {flag} x")


@pytest.mark.parametrize(("line", "refusal"), [
    ("codex-cli 0.146.9", "codex 0.146.9 is too old; assay reads the event stream of "
                          "0.147.0 or later"),
    ("codex-cli 0.148.0-alpha.3", "codex 0.148.0-alpha.3 is a prerelease"),
])
def test_a_cli_too_old_or_a_prerelease_is_refused_naming_its_version(
        codex: Host, monkeypatch: pytest.MonkeyPatch, line: str, refusal: str) -> None:
    monkeypatch.setenv("ASSAY_CODEX_BIN", str(codex.fake_cli("codex", line)))
    with pytest.raises(HarnessFailure) as caught:
        asyncio.run(codex.target("codex").start())
    assert refusal in str(caught.value)


def test_the_oldest_supported_cli_passes_the_version_check(
        codex: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # The stand-in's `login status` exits 0: every check passes, and the version is kept.
    monkeypatch.setenv("ASSAY_CODEX_BIN", str(codex.fake_cli("codex", "codex-cli 0.147.0")))
    target = codex.target("codex")
    asyncio.run(target.start())
    assert target.facets["host_version"] == "0.147.0"


def test_a_prerelease_cli_stops_assay_run_with_exit_3(
        codex: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_CODEX_BIN", str(codex.fake_cli("codex", "codex-cli 0.148.0-alpha.3")))
    (codex.root / "hi.suite.yaml").write_text(textwrap.dedent("""\
        suite: hosts/codex.version@1
        target: codex
        cases:
          - {id: hi, input: Say hi., expect: [status: ok]}
        """))
    done = codex.assay_run(".", "--no-store")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "codex 0.148.0-alpha.3 is a prerelease" in done.stdout + done.stderr
    assert codex.stub.model_calls() == []

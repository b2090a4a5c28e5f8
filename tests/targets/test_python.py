"""``python:module:function`` targets: calling conventions, the tools recorder, outcomes."""

from __future__ import annotations

import asyncio
import math
import sys
from typing import TYPE_CHECKING

import pytest

from assay.errors import HarnessFailure
from assay.model import Evidence
from assay.targets import TrialBroken
from assay.targets.capture import _Switch

if TYPE_CHECKING:
    from conftest import Workspace


# --------------------------------------------------------------------------- calling


def test_sync_one_arg_agent_gets_the_input_and_its_return_is_the_output(ws: Workspace) -> None:
    uri = ws.agent("""
        def agent(x):
            return {"echo": x}
    """)
    (trace,) = ws.run(uri, ws.trial({"q": [1, 2]}))
    assert trace.status == "ok"
    assert trace.output == {"echo": {"q": [1, 2]}}
    assert trace.error is None
    assert trace.steps == 1
    assert trace.settled is True
    assert [e.kind for e in trace.events] == ["message"]
    assert trace.evidence["output"] == Evidence.OBSERVED
    assert trace.evidence["tool_calls"] == Evidence.OBSERVED
    assert trace.facets["harness"] == "python"


def test_async_one_arg_agent_is_awaited(ws: Workspace) -> None:
    uri = ws.agent("""
        import asyncio

        async def agent(prompt):
            await asyncio.sleep(0)
            return prompt.upper()
    """)
    (trace,) = ws.run(uri, ws.trial("hello"))
    assert trace.status == "ok"
    assert trace.output == "HELLO"
    # A string answer is also the final message.
    assert trace.events[-1].kind == "message"
    assert trace.events[-1].text == "HELLO"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_two_arg_agent_is_handed_tools(ws: Workspace, kind: str) -> None:
    prefix = "async " if kind == "async" else ""
    uri = ws.agent(f"""
        {prefix}def agent(input, tools):
            got = tools.call("lookup", {{"id": input["id"]}})
            return {{"type": type(tools).__name__, "got": got}}
    """)
    (trace,) = ws.run(uri, ws.trial({"id": 7}))
    assert trace.status == "ok"
    assert trace.output == {"type": "Tools", "got": None}
    assert [e.kind for e in trace.events] == ["tool_call", "tool_result", "message"]
    assert trace.events[0].arguments == {"id": 7}


def test_which_agents_are_handed_tools(ws: Workspace) -> None:
    # Two positional parameters mean (input, tools), even with a default.
    two = ws.agent("""
        def agent(input, extra="default"):
            return type(extra).__name__
    """)
    star = ws.agent("""
        def agent(*args):
            return [len(args), type(args[-1]).__name__]
    """)
    keyword = ws.agent("""
        def agent(input, *, extra="default"):
            return extra
    """)
    assert ws.run(two, ws.trial(1))[0].output == "Tools"
    assert ws.run(star, ws.trial(1))[0].output == [2, "Tools"]
    assert ws.run(keyword, ws.trial(1))[0].output == "default"


# --------------------------------------------------------------------------- tools.call


def test_canned_result_is_returned_and_the_call_recorded(ws: Workspace) -> None:
    path, fixture = ws.fixture("""
        tools:
          - name: erp.refund
            result: {ok: true, id: R-9}
    """)
    uri = ws.agent("""
        def agent(input, tools):
            return tools.call("erp.refund", {"order": input})
    """)
    (trace,) = ws.run(uri, ws.trial("A-1", fixture=path, tools=fixture))
    assert trace.output == {"ok": True, "id": "R-9"}
    call, result, message = trace.events
    assert (call.kind, call.name, call.arguments) == ("tool_call", "erp.refund", {"order": "A-1"})
    assert (result.kind, result.name, result.result) == ("tool_result", "erp.refund",
                                                         {"ok": True, "id": "R-9"})
    assert call.call_id is not None and call.call_id == result.call_id
    assert result.is_error is False
    assert message.kind == "message"
    assert trace.steps == 2


def test_results_first_matching_when_wins(ws: Workspace) -> None:
    path, fixture = ws.fixture("""
        tools:
          - name: crm.lookup
            results:
              - when: {customer: "C-1"}
                result: {tier: gold}
              - when: {customer: "C-1"}
                result: {tier: silver}
              - when: {customer: "C-2", region: eu}
                result: {tier: eu}
              - result: {tier: none}
    """)
    uri = ws.agent("""
        def agent(input, tools):
            return [
                tools.call("crm.lookup", {"customer": "C-1", "extra": 1}),
                tools.call("crm.lookup", {"customer": "C-2"}),
                tools.call("crm.lookup", {"customer": "C-2", "region": "eu"}),
                tools.call("crm.lookup"),
            ]
    """)
    (trace,) = ws.run(uri, ws.trial(None, fixture=path, tools=fixture))
    assert trace.output == [{"tier": "gold"}, {"tier": "none"}, {"tier": "eu"}, {"tier": "none"}]
    results = [e.result for e in trace.events if e.kind == "tool_result"]
    assert results == trace.output
    calls = [e for e in trace.events if e.kind == "tool_call"]
    assert calls[3].arguments == {}
    assert len({e.call_id for e in calls}) == 4
    assert trace.steps == 5


def test_results_without_a_match_give_none(ws: Workspace) -> None:
    path, fixture = ws.fixture("""
        tools:
          - name: crm.lookup
            results:
              - when: {customer: "C-1"}
                result: {tier: gold}
    """)
    uri = ws.agent("""
        def agent(input, tools):
            return {"r": tools.call("crm.lookup", {"customer": "C-3"})}
    """)
    (trace,) = ws.run(uri, ws.trial(None, fixture=path, tools=fixture))
    assert trace.output == {"r": None}


def test_handler_computes_the_result_from_the_arguments(ws: Workspace) -> None:
    handler = ws.module("""
        def transfer(arguments):
            return {"moved": arguments["amount"] * 2, "to": arguments["to"]}
    """, prefix="handlers")
    path, fixture = ws.fixture(f"""
        tools:
          - name: erp.transfer
            handler: {handler}:transfer
    """)
    uri = ws.agent("""
        def agent(input, tools):
            return tools.call("erp.transfer", {"amount": input, "to": "X"})
    """)
    (trace,) = ws.run(uri, ws.trial(21, fixture=path, tools=fixture))
    assert trace.output == {"moved": 42, "to": "X"}
    assert trace.events[1].result == {"moved": 42, "to": "X"}


def test_a_handler_that_raises_is_recorded_as_an_error_result(ws: Workspace) -> None:
    handler = ws.module("""
        def boom(arguments):
            raise RuntimeError("ledger closed")
    """, prefix="handlers")
    path, fixture = ws.fixture(f"""
        tools:
          - name: erp.transfer
            handler: {handler}:boom
    """)
    uri = ws.agent("""
        def agent(input, tools):
            try:
                tools.call("erp.transfer", {"amount": 1})
            except RuntimeError as exc:
                return f"caught {exc}"
    """)
    (trace,) = ws.run(uri, ws.trial(None, fixture=path, tools=fixture))
    assert trace.output == "caught ledger closed"
    result = trace.events[1]
    assert result.kind == "tool_result" and result.is_error
    assert "ledger closed" in str(result.result)


def test_without_a_fixture_calls_return_none_and_are_still_recorded(ws: Workspace) -> None:
    path, fixture = ws.fixture("""
        tools:
          - name: known
            result: 1
    """)
    uri = ws.agent("""
        def agent(input, tools):
            return [tools.call("anything", {"a": 1}), tools.call("unknown.tool", {"b": 2})]
    """)
    (bare,) = ws.run(uri, ws.trial(None))
    assert bare.output == [None, None]
    assert [e.name for e in bare.events if e.kind == "tool_call"] == ["anything", "unknown.tool"]
    assert [e.arguments for e in bare.events if e.kind == "tool_call"] == [{"a": 1}, {"b": 2}]
    # A fixture that does not declare the tool also answers None.
    (other,) = ws.run(uri, ws.trial(None, fixture=path, tools=fixture))
    assert other.output == [None, None]


# --------------------------------------------------------------------------- ask, usage, steps


def test_ask_is_recorded_and_answered_from_the_fixture(ws: Workspace) -> None:
    path, fixture = ws.fixture("""
        answers: {ask_user: "yes, go ahead", confirm: false}
    """)
    uri = ws.agent("""
        def agent(input, tools):
            first = tools.ask("May I refund A-1?")
            second = tools.ask("Sure?", tool="confirm")
            third = tools.ask("Anyone?", tool="nobody")
            return [first, second, third]
    """)
    (trace,) = ws.run(uri, ws.trial(None, fixture=path, tools=fixture))
    assert trace.output == ["yes, go ahead", False, None]
    kinds = [e.kind for e in trace.events]
    assert kinds == ["ask", "answer", "ask", "answer", "ask", "answer", "message"]
    ask, answer = trace.events[0], trace.events[1]
    assert (ask.name, ask.text) == ("ask_user", "May I refund A-1?")
    assert (answer.name, answer.result) == ("ask_user", "yes, go ahead")
    assert trace.events[2].name == "confirm"
    # Asks are not tool calls.
    assert trace.steps == 1


def test_ask_without_a_fixture_answers_none(ws: Workspace) -> None:
    uri = ws.agent("""
        def agent(input, tools):
            return {"answer": tools.ask("Proceed?")}
    """)
    (trace,) = ws.run(uri, ws.trial(None))
    assert trace.output == {"answer": None}
    assert trace.events[0].kind == "ask"


def test_usage_adds_up(ws: Workspace) -> None:
    uri = ws.agent("""
        async def agent(input, tools):
            tools.usage(input_tokens=100, output_tokens=20, cost_usd=0.01)
            tools.usage(input_tokens=50, cost_usd=0.02)
            tools.usage(output_tokens=5)
            return "done"
    """)
    (trace,) = ws.run(uri, ws.trial(None))
    assert trace.usage.input_tokens == 150
    assert trace.usage.output_tokens == 25
    assert math.isclose(trace.usage.cost_usd, 0.03)


def test_steps_are_tool_calls_plus_the_final_answer(ws: Workspace) -> None:
    uri = ws.agent("""
        def agent(n, tools):
            for i in range(n):
                tools.call("step", {"i": i})
            return n
    """)
    traces = ws.run(uri, ws.trial(0), ws.trial(3, n=2))
    assert [t.steps for t in traces] == [1, 4]
    # Each trial has its own recorder: nothing leaks from one to the next.
    assert len([e for e in traces[1].events if e.kind == "tool_call"]) == 3
    assert [e.kind for e in traces[0].events] == ["message"]


# --------------------------------------------------------------------------- outcomes


def test_agent_error_and_refused_are_statuses_not_crashes(ws: Workspace) -> None:
    uri = ws.agent("""
        import assay

        def agent(input, tools):
            tools.call("look", {})
            if input == "error":
                raise assay.AgentError("out of stock")
            raise assay.Refused("not allowed to do that")
    """)
    error, refused = ws.run(uri, ws.trial("error"), ws.trial("refuse", n=2))
    assert error.status == "error"
    assert error.error == "out of stock"
    assert error.settled is False
    assert refused.status == "refused"
    assert refused.error == "not allowed to do that"
    assert refused.settled is True  # a refusal is a final answer, as from every other target
    # The tool call made before giving up is still on record.
    assert [e.kind for e in error.events] == ["tool_call", "tool_result"]
    assert error.steps == 2


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_arbitrary_exception_breaks_the_trial_naming_its_type(ws: Workspace,
                                                                 kind: str) -> None:
    prefix = "async " if kind == "async" else ""
    uri = ws.agent(f"""
        {prefix}def agent(input):
            return {{}}["missing-key"]
    """)
    with pytest.raises(TrialBroken) as caught:
        ws.run(uri, ws.trial(None))
    assert "KeyError" in str(caught.value)
    assert "missing-key" in str(caught.value)


def test_system_exit_from_an_agent_breaks_the_trial(ws: Workspace) -> None:
    uri = ws.agent("""
        import sys

        def agent(input):
            sys.exit(4)
    """)
    with pytest.raises(TrialBroken, match="SystemExit"):
        ws.run(uri, ws.trial(None))


@pytest.mark.parametrize("body", ["object()", "{'when': {1, 2}}", "{'x': float('nan')}",
                                  "b'bytes'"])
def test_a_value_that_is_not_json_breaks_the_trial(ws: Workspace, body: str) -> None:
    uri = ws.agent(f"""
        def agent(input):
            return {body}
    """)
    with pytest.raises(TrialBroken, match="not JSON"):
        ws.run(uri, ws.trial(None))


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_bare_nan_is_not_json_either(ws: Workspace, value: str) -> None:
    uri = ws.agent(f"""
        def agent(input):
            return float("{value}")
    """)
    with pytest.raises(TrialBroken, match="not JSON"):
        ws.run(uri, ws.trial(None))


def test_json_like_values_are_normalised(ws: Workspace) -> None:
    uri = ws.agent("""
        def agent(input):
            return {"pair": (1, 2), "n": 3}
    """)
    (trace,) = ws.run(uri, ws.trial(None))
    assert trace.output == {"pair": [1, 2], "n": 3}


def test_a_module_that_cannot_import_is_a_harness_failure_at_start(ws: Workspace) -> None:
    uri = ws.agent("""
        import a_module_that_does_not_exist_anywhere
        def agent(input):
            return input
    """)
    target = ws.target(uri)
    with pytest.raises(HarnessFailure) as caught:
        asyncio.run(target.start())
    message = str(caught.value)
    assert "ModuleNotFoundError" in message
    assert uri in message
    # Nothing was left installed on the way out.
    assert not isinstance(sys.stdout, _Switch)


def test_a_missing_function_is_a_harness_failure(ws: Workspace) -> None:
    uri = ws.agent("""
        def other(input):
            return input
    """)
    with pytest.raises(HarnessFailure, match="has no 'agent'"):
        asyncio.run(ws.target(uri).start())


# --------------------------------------------------------------------------- prints


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_prints_go_to_the_trace_not_the_terminal(ws: Workspace, capfd: pytest.CaptureFixture[str],
                                                 kind: str) -> None:
    prefix = "async " if kind == "async" else ""
    uri = ws.agent(f"""
        import sys

        {prefix}def agent(input):
            print("CANARY-OUT", input)
            print("CANARY-ERR", file=sys.stderr)
            sys.stdout.buffer.write(b"CANARY-BYTES " + input.encode())
            sys.stdout.buffer.flush()
            return "ok"
    """)
    capfd.readouterr()
    (trace,) = ws.run(uri, ws.trial("secret-value"))
    real = capfd.readouterr()
    assert "CANARY-OUT secret-value" in trace.stdout
    # Bytes written past the text layer are the trial's too, not the terminal's.
    assert "CANARY-BYTES secret-value" in trace.stdout
    assert "CANARY" not in real.out
    assert "secret-value" not in real.out
    assert "CANARY" not in real.err
    # After close the terminal is the terminal again.
    assert not isinstance(sys.stdout, _Switch)
    assert not isinstance(sys.stderr, _Switch)
    print("after-the-run")
    assert "after-the-run" in capfd.readouterr().out


def test_prints_of_concurrent_trials_stay_apart(ws: Workspace) -> None:
    uri = ws.agent("""
        import asyncio

        async def agent(input):
            for i in range(5):
                print(f"{input}-{i}")
                await asyncio.sleep(0)
            return input
    """)
    sync_uri = ws.agent("""
        import threading
        barrier = threading.Barrier(2, timeout=5)

        def agent(input):
            print(f"{input}-before")
            barrier.wait()
            print(f"{input}-after")
            return input
    """)

    async def both(target_uri: str) -> list[str]:
        target = ws.target(target_uri, concurrency=2)
        await target.start()
        try:
            traces = await asyncio.gather(target.run(ws.trial("A", case_id="a")),
                                          target.run(ws.trial("B", case_id="b")))
        finally:
            await target.close()
        return [t.stdout for t in traces]

    for target_uri, lines in ((uri, [f"-{i}" for i in range(5)]),
                              (sync_uri, ["-before", "-after"])):
        a, b = asyncio.run(both(target_uri))
        assert a.split() == [f"A{s}" for s in lines]
        assert b.split() == [f"B{s}" for s in lines]


def test_digest_depends_on_the_agent_source(ws: Workspace) -> None:
    uri = ws.agent("""
        def agent(input):
            return 1
    """)
    target = ws.target(uri)
    asyncio.run(ws.run_all(target, []))
    first = target.digest()
    assert first.startswith("sha256:")
    name = uri.split(":")[1]
    (ws.root / f"{name}.py").write_text("def agent(input):\n    return 2\n", encoding="utf-8")
    assert target.digest() != first


def test_a_trace_is_always_json(ws: Workspace) -> None:
    uri = ws.agent("""
        def agent(input, tools):
            tools.call("erp.refund", {"order": object(), "ids": {1, 2}})
            return "done"
    """)
    try:
        (trace,) = ws.run(uri, ws.trial(None))
    except TrialBroken:
        return  # refusing the trial is an honest answer too
    assert trace.model_dump_json()


def test_a_pin_the_agent_cannot_honour_is_a_facet_with_a_note(ws: Workspace) -> None:
    """A python: agent picks its own model: the case's pin is recorded, marked not honoured."""
    from assay.model import Case
    from assay.targets import TrialRequest

    uri = ws.agent("""
        def agent(x):
            return x
    """)
    pinned = TrialRequest(case=Case(id="p", input=1, model="gpt-x", effort="high",
                                    invocation="automatic"), n=1, timeout_s=5.0)
    host_map = TrialRequest(case=Case(id="m", input=2, model={"claude": "sonnet-x"}), n=1,
                            timeout_s=5.0)
    first, second, plain = ws.run(uri, pinned, host_map, ws.trial(3))
    note = "(not honoured: a python: agent picks its own model and effort)"
    assert first.facets["model_pin"] == f"gpt-x {note}"
    assert first.facets["effort_pin"] == f"high {note}"
    assert first.facets["invocation"] == "automatic"
    assert "model" not in first.facets  # nothing claims the pinned model answered
    # A map pins only the hosts it names.
    assert "model_pin" not in second.facets and "invocation" not in second.facets
    assert set(plain.facets) == {"harness", "host_version"}

"""``PythonTarget.run_sync``: the trial of ``run`` done in the calling thread (the battery's lane).

Which agents it offers it for (``sync_lane``), and that it makes the trace
``run`` makes — the same JSON but for times — and breaks a trial with the
same reason.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

import pytest

from assay.model import Trace
from assay.targets import TargetOptions, TrialBroken, make_target

if TYPE_CHECKING:
    from conftest import Workspace


def lane_offered(ws: Workspace, uri: str, **options: Any) -> tuple[bool, bool]:
    """``sync_lane`` before and after the target started."""
    target = make_target(uri, TargetOptions(base_dir=ws.root, **options))
    before = getattr(target, "sync_lane", None)

    async def started() -> bool:
        await target.start()
        try:
            return bool(getattr(target, "sync_lane", None))
        finally:
            await target.close()

    assert before is False
    return before, asyncio.run(started())


def test_the_lane_is_offered_for_a_plain_sync_function_only(ws: Workspace) -> None:
    sync = ws.agent("def agent(input):\n    return input\n")
    assert lane_offered(ws, sync) == (False, True)
    coroutine = ws.agent("async def agent(input):\n    return input\n")
    assert lane_offered(ws, coroutine)[1] is False
    talker = ws.agent("""
        class Agent:
            def reply(self, message):
                return message
    """, function="Agent")
    assert lane_offered(ws, talker)[1] is False
    # --otel collects each trial's spans on the event loop's side: not in the lane.
    assert lane_offered(ws, sync, otel=True)[1] is False


AGENT = """
    import assay

    def agent(input, tools):
        print("asked", input)
        if input == "refund":
            return tools.call("erp.refund", {"order": "A-1"})
        if input == "ask":
            return tools.ask("May I refund A-1?")
        if input == "usage":
            tools.usage(input_tokens=10, output_tokens=2, cost_usd=0.5)
            return {"n": 1, "list": [1.5, "\\u00e9\\u2028"], "big": 2 ** 70}
        if input == "state":
            return tools.call("counter.add", {"by": 2})
        if input == "error":
            tools.call("look", {})
            raise assay.AgentError("out of stock")
        if input == "refused":
            raise assay.Refused("not allowed")
        if input == "boom":
            raise ValueError("kaput")
        if input == "exit":
            raise SystemExit(3)
        if input == "garbage":
            return object()
        if input == "nan":
            return float("nan")
        return input
"""

FIXTURE = """
    state: {count: 1}
    answers: {ask_user: "yes"}
    tools:
      - name: erp.refund
        result: {ok: true, id: R-9}
      - name: counter.add
        handler: counter_handler:add
"""

HANDLER = """
    def add(arguments, state):
        state["count"] += arguments["by"]
        return state["count"]
"""


def timeless(trace: Trace) -> dict[str, Any]:
    """A trace's JSON with its times left out (they differ from one call to the next)."""
    found = trace.model_dump(mode="json")
    found["duration_s"] = None
    for event in found["events"]:
        event["t"] = None
    return dict(found)


def both_ways(ws: Workspace, inputs: list[str]) -> list[tuple[Any, Any]]:
    """Each input run by ``run`` and by ``run_sync`` (in a thread, as the lane runs it):
    a trace, or the reason the trial broke."""
    (ws.root / "counter_handler.py").write_text(HANDLER.replace("\n    ", "\n"))
    path, fixture = ws.fixture(FIXTURE)
    target: Any = ws.target(ws.agent(AGENT))

    async def outcome(call: Any) -> Any:
        try:
            return timeless(await call)
        except TrialBroken as exc:
            return f"broken: {exc}"

    async def run() -> list[tuple[Any, Any]]:
        await target.start()
        try:
            pairs = []
            for input in inputs:
                request = ws.trial(input, fixture=path, tools=fixture)
                pairs.append((await outcome(target.run(request)),
                              await outcome(asyncio.to_thread(target.run_sync, request))))
            return pairs
        finally:
            await target.close()

    return asyncio.run(run())


@pytest.mark.parametrize("input", ["hello", "refund", "ask", "usage", "state", "error",
                                   "refused"])
def test_run_sync_makes_the_trace_run_makes(ws: Workspace, input: str) -> None:
    ((today, lane),) = both_ways(ws, [input])
    assert isinstance(today, dict)
    assert lane == today
    assert today["stdout"] == f"asked {input}\n"


def test_what_the_agent_did_is_in_the_trace(ws: Workspace) -> None:
    pairs = both_ways(ws, ["refund", "state", "error"])
    refund, state, error = (lane for _, lane in pairs)
    assert refund["output"] == {"ok": True, "id": "R-9"}
    assert state["output"] == 3 and state["state"] == {"count": 3}
    assert (error["status"], error["error"], error["steps"]) == ("error", "out of stock", 2)


@pytest.mark.parametrize(("input", "reason"), [
    ("boom", "agent raised ValueError: kaput"),
    ("exit", "agent raised SystemExit: 3"),
    ("garbage", "agent returned a value that is not JSON (object)"),
    ("nan", "agent returned nan, which is not JSON (it has no NaN or infinity)"),
])
def test_run_sync_breaks_a_trial_as_run_does(ws: Workspace, input: str, reason: str) -> None:
    ((today, lane),) = both_ways(ws, [input])
    assert lane == today
    assert isinstance(lane, str) and lane.startswith(f"broken: {reason}")


def test_a_timeout_reads_what_run_sync_kept_so_far(ws: Workspace) -> None:
    uri = ws.agent("""
        import threading

        CALLED = threading.Event()
        RELEASE = threading.Event()

        def agent(input, tools):
            tools.call("crm.lookup", {"customer": input})
            CALLED.set()
            RELEASE.wait(20)
            return "late"
    """)
    target: Any = ws.target(uri)

    async def run() -> tuple[Trace | None, Trace]:
        await target.start()
        module = sys.modules[ws.names[-1]]  # imported by start()
        try:
            request = ws.trial("C-1")
            running = asyncio.ensure_future(asyncio.to_thread(target.run_sync, request))
            await asyncio.to_thread(module.CALLED.wait, 20)
            kept = request.partial.trace()  # what the battery reads when it cuts the hang
            module.RELEASE.set()
            return kept, await running
        finally:
            await target.close()

    kept, finished = asyncio.run(run())
    assert kept is not None
    assert (kept.status, kept.output) == ("timeout", None)
    assert [e.kind for e in kept.events] == ["tool_call", "tool_result"]
    assert finished.output == "late"

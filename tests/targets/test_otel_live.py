"""``--otel``: the spans a ``python:`` agent emits in process, filed per trial and read once.

The collector is tried on a tracer provider of the test's own (the global one
can be set once per process); what ``assay run --otel`` does to the process's
global provider is tried in ``assay`` subprocesses, here and in
tests/frameworks/test_otel.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import context as otel_context  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from assay.targets.otel import executed_tools  # noqa: E402
from assay.targets.otel_live import (  # noqa: E402
    MAX_SPANS,
    MAX_TEXT,
    Collector,
    TrialSpans,
    collecting,
)


@pytest.fixture
def tracing() -> tuple[Collector, trace.Tracer]:
    provider = TracerProvider()
    collector = Collector()
    provider.add_span_processor(collector)
    return collector, provider.get_tracer("agent")


def _tool(tracer: trace.Tracer, name: str, arguments: Any, **more: Any) -> None:
    """One GenAI tool execution, as an instrumented framework records it."""
    with tracer.start_as_current_span(f"execute_tool {name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(arguments), **more}) as span:
        span.set_attribute("gen_ai.tool.call.result", json.dumps({"ok": True}))


def _ran(trial: TrialSpans) -> list[tuple[str | None, Any]]:
    return [(e["name"], e["arguments"]) for e in executed_tools(trial.spans())
            if e["kind"] == "tool_call"]


def test_the_spans_of_a_trial_and_of_its_threads_are_its_own(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    collector, tracer = tracing
    first, second = collector.open_trial(), collector.open_trial()
    with collecting(first):
        _tool(tracer, "read", {"n": 1})
        # A thread the agent hands its context to (what asyncio.to_thread does).
        worker = threading.Thread(target=contextvars.copy_context().run,
                                  args=(_tool, tracer, "read", {"n": 2}))
        worker.start()
        worker.join()
        # The context a framework captures to make its span later on a thread of its own
        # (LangSmith's tracing thread): the trial's is known by its trace.
        captured = otel_context.get_current()
    with collecting(second):
        _tool(tracer, "write", {"n": 3})

    def background() -> None:
        assert trace.get_current_span() is trace.INVALID_SPAN  # no trial's context here
        with tracer.start_as_current_span("execute_tool late", context=captured, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "late"}):
            pass
        _tool(tracer, "nobody", {})  # a root span outside any trial: nobody's

    thread = threading.Thread(target=background)
    thread.start()
    thread.join()
    assert _ran(first) == [("read", {"n": 1}), ("read", {"n": 2}), ("late", None)]
    assert _ran(second) == [("write", {"n": 3})]
    # Every span of the trial shares the trace of the trial's own parent.
    assert {span["traceId"] for span in first.spans()} == {
        f"{first.parent.get_span_context().trace_id:032x}"}


def test_a_new_root_started_in_the_trial_is_the_trials_with_what_follows_it(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    collector, tracer = tracing
    trial = collector.open_trial()
    with collecting(trial):
        root = tracer.start_span("invoke_agent", context=otel_context.Context())
    assert root.get_span_context().trace_id != trial.parent.get_span_context().trace_id
    with tracer.start_as_current_span("execute_tool child", context=trace.set_span_in_context(
            root), attributes={"gen_ai.operation.name": "execute_tool"}):
        pass  # started outside the trial's context, in the trace its root opened there
    root.end()
    assert [span["name"] for span in trial.spans()] == ["execute_tool child", "invoke_agent"]


def test_a_span_still_open_at_the_trials_end_is_kept_as_it_stood(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    """A tool still running when the trial closes was called, and has no result; what
    happens to it later, and a span that starts later, are not the trial's."""
    collector, tracer = tracing
    trial = collector.open_trial()
    with collecting(trial):
        _tool(tracer, "kept", {})
        running = tracer.start_span("execute_tool running", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "running",
            "gen_ai.tool.call.arguments": '{"n": 1}'})
    trial.close()
    running.set_attribute("gen_ai.tool.call.result", "too late")
    running.end()
    with collecting(trial):  # a closed trial's context adopts nothing more
        _tool(tracer, "after", {})
    events = executed_tools(trial.spans())
    assert [(e["kind"], e["name"]) for e in events] == [
        ("tool_call", "kept"), ("tool_result", "kept"), ("tool_call", "running")]
    assert "endTimeUnixNano" not in trial.spans()[-1]
    trial.close()  # idempotent


def test_concurrent_trials_on_threads_and_tasks_never_mix(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    collector, tracer = tracing
    trials = [collector.open_trial() for _ in range(32)]
    start = threading.Barrier(16)

    def on_a_thread(index: int) -> None:
        with collecting(trials[index]):
            start.wait()
            for step in range(20):
                _tool(tracer, "canary", {"trial": index, "step": step})

    async def in_a_task(index: int) -> None:
        with collecting(trials[index]):
            for step in range(20):
                _tool(tracer, "canary", {"trial": index, "step": step})
                await asyncio.sleep(0)

    async def tasks() -> None:
        await asyncio.gather(*(in_a_task(index) for index in range(16, 32)))

    threads = [threading.Thread(target=on_a_thread, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    asyncio.run(tasks())
    for thread in threads:
        thread.join()
    for index, trial in enumerate(trials):
        assert _ran(trial) == [("canary", {"trial": index, "step": step})
                               for step in range(20)], index


def test_hostile_spans_are_bounded_text_and_never_raise(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    collector, tracer = tracing
    trial = collector.open_trial()
    huge = "x" * (8 * 1024 * 1024)
    with collecting(trial):
        _tool(tracer, "big", {"blob": huge})
        _tool(tracer, "surrogate\udcff", {"text": "caf\udce9"})
        with tracer.start_as_current_span(None, attributes={  # type: ignore[arg-type]
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": 7,
                "gen_ai.tool.call.arguments": b"\xff\xfe not utf-8",
                "list": ["a\udcff", "b"], "gen_ai.tool.call.id": ["not", "an", "id"]}):
            pass
        with tracer.start_as_current_span("execute_tool broken") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_status(trace.Status(trace.StatusCode.ERROR, "bad\udcff"))
    spans = trial.spans()
    text = json.dumps(spans, ensure_ascii=False).encode("utf-8")  # valid text all through
    assert len(text) < 4 * MAX_TEXT
    events = executed_tools(spans)
    calls = [e for e in events if e["kind"] == "tool_call"]
    assert [c["name"] for c in calls] == ["big", "surrogate?", None, None]
    assert isinstance(calls[0]["arguments"], str)  # cut JSON stays text, never guessed
    assert calls[3]["call_id"] is None
    assert [e["is_error"] for e in events if e["kind"] == "tool_result"] == [
        False, False, False, True]
    # What the trace makes of them is text too: a lone surrogate the arguments' JSON
    # escapes comes back when it is parsed, and the event replaces it.
    from assay.model import Event

    made = [Event(**event) for event in events]
    assert made[2].arguments == {"text": "caf\ufffd"}


def test_a_trial_keeps_a_bounded_number_of_spans(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    collector, tracer = tracing
    trial = collector.open_trial()
    with collecting(trial):
        for _ in range(MAX_SPANS + 5):
            tracer.start_span("s").end()
    assert len(trial.spans()) == MAX_SPANS and trial.dropped == 5


def test_a_live_span_reads_as_the_sdks_own_encoding_does(
        tracing: tuple[Collector, trace.Tracer]) -> None:
    """One reader for files, the receiver and live spans: what ``otlp_span`` makes of a span
    is what the OTLP encoder's bytes give through the receiver's decoding."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from assay.targets.otel import resource_spans
    from assay.targets.wire.proxy import otlp_document

    provider = TracerProvider()
    collector, exported = Collector(), InMemorySpanExporter()
    provider.add_span_processor(collector)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer = provider.get_tracer("agent")
    trial = collector.open_trial()
    with collecting(trial), tracer.start_as_current_span("invoke_agent", attributes={
            "n": 3, "ratio": 0.5, "flag": True, "tags": ["a", "b"]}):
        _tool(tracer, "refund", {"order": "A-1"}, **{"gen_ai.tool.call.id": "c-1"})
        with tracer.start_as_current_span("execute_tool fail") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_status(trace.Status(trace.StatusCode.ERROR, "denied"))
    body = encode_spans(exported.get_finished_spans()).SerializeToString()
    decoded = [span for _, span in resource_spans(otlp_document(body, "application/x-protobuf"))]
    live = trial.spans()
    assert executed_tools(live) == executed_tools(decoded)
    assert len(executed_tools(live)) == 4
    for ours, theirs in zip(live, decoded, strict=True):
        for key in ("traceId", "spanId", "parentSpanId", "name", "startTimeUnixNano",
                    "endTimeUnixNano"):
            assert ours.get(key) == theirs.get(key), key
        assert sorted(ours["attributes"], key=lambda a: a["key"]) == sorted(
            theirs.get("attributes", []), key=lambda a: a["key"])


def test_pydantic_ais_older_names_and_langsmiths_tool_runs_are_read() -> None:
    """pydantic-ai's instrumentation version 2 names a tool's arguments and result
    ``tool_arguments`` / ``tool_response``; LangSmith's tool spans carry the run's inputs
    and output in ``gen_ai.prompt`` / ``gen_ai.completion``."""
    from assay.targets.otel import tool_events

    def attrs(**given: Any) -> dict[str, Any]:
        return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                **given}

    older = tool_events({}, attrs(tool_arguments='{"order": "A-1"}', tool_response="shipped"))
    assert (older[0]["arguments"], older[1]["result"]) == ({"order": "A-1"}, "shipped")
    message = {"output": {"content": "order A-1 is shipped", "type": "tool",
                          "tool_call_id": "call_0"}}
    langsmith = tool_events({}, attrs(**{"langsmith.span.kind": "tool",
                                         "gen_ai.prompt": '{"order": "A-1"}',
                                         "gen_ai.completion": json.dumps(message)}))
    assert langsmith[0]["arguments"] == {"order": "A-1"}
    assert langsmith[1]["result"] == "order A-1 is shipped"
    plain = tool_events({}, attrs(**{"langsmith.span.kind": "tool",
                                     "gen_ai.completion": '{"output": 3}'}))
    assert plain[1]["result"] == 3
    # The GenAI names win when both are there; another system's gen_ai.prompt is no input.
    both = tool_events({}, attrs(**{"gen_ai.tool.call.arguments": '{"a": 1}',
                                    "tool_arguments": '{"b": 2}', "gen_ai.prompt": "hi"}))
    assert both[0]["arguments"] == {"a": 1}
    assert tool_events({}, attrs(**{"gen_ai.prompt": '{"x": 1}'}))[0]["arguments"] is None


# --- merged with the wire once ---------------------------------------------------------------


def _merge(agent: list[Any], wire: list[Any], spans: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    from assay.model import Event, Evidence, Trace, Usage
    from assay.targets.wire.calls import ModelCall
    from assay.targets.wire.fold import WireFacts
    from assay.targets.wire.observed import evidence_claim, with_wire

    facts = WireFacts(events=wire, usage=Usage(input_tokens=22, output_tokens=14), steps=2,
                      model="m", evidence=evidence_claim(),
                      model_calls=(ModelCall(api="chat", method="POST", url="u", status=200),))
    trace = Trace(output="ok", events=agent or [Event(kind="message", text="ok")],
                  evidence={"tool_calls": Evidence.OBSERVED})
    merged = with_wire(trace, facts if wire else None, spans)
    return [(e.kind, e.name, e.call_id) for e in merged.events if e.kind != "message"]


def test_an_ask_tool_a_span_says_ran_is_an_ask_counted_once() -> None:
    """The model asked the person through ``ask_user`` (the wire's ask, its answer sent
    back); the framework ran that tool and its span says so: one ask, no tool call. A span
    of an ask tool no model asked for is an ask too, never a call of a tool."""
    from assay.model import Event

    wire = [Event(kind="ask", name="ask_user", text="May I refund A-2?", call_id="c-2"),
            Event(kind="answer", name="ask_user", result="yes", call_id="c-2")]
    ran = [{"kind": "tool_call", "name": "ask_user", "call_id": "c-2",
            "arguments": {"question": "May I refund A-2?"}},
           {"kind": "tool_result", "name": "ask_user", "call_id": "c-2", "result": "yes",
            "is_error": False}]
    assert _merge([], wire, ran) == [("ask", "ask_user", "c-2"), ("answer", "ask_user", "c-2")]
    unasked = [{**ran[0], "call_id": None}, {**ran[1], "call_id": None}]
    assert _merge([], [], unasked) == [("ask", "ask_user", None), ("answer", "ask_user", None)]
    # The agent's own tools.ask of the question the wire saw asked: one ask too.
    own = [Event(kind="ask", name="ask_user", text="May I refund A-2?"),
           Event(kind="answer", name="ask_user", result="yes")]
    assert _merge(own, wire, []) == [("ask", "ask_user", "c-2"), ("answer", "ask_user", "c-2")]
    # One the wire did not see (the agent asked a person itself) is kept.
    other = [Event(kind="ask", name="ask_user", text="Which order?"),
             Event(kind="answer", name="ask_user", result="A-2")]
    assert _merge(other, wire, []) == [("ask", "ask_user", "c-2"), ("answer", "ask_user", "c-2"),
                                       ("ask", "ask_user", None), ("answer", "ask_user", None)]


# --- through `assay run` ----------------------------------------------------------------------

HOSTILE = '''
import json
from opentelemetry import trace

tracer = trace.get_tracer("hostile")


def agent(input):
    with tracer.start_as_current_span(None, attributes={"gen_ai.tool.name": 7}):
        pass
    with tracer.start_as_current_span("execute_tool big", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "big",
            "gen_ai.tool.call.arguments": "[" * 100000 + "x" * 30_000_000}):
        pass
    with tracer.start_as_current_span("execute_tool \\udcff", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bad\\udcff",
            "gen_ai.tool.call.arguments": b"\\xff\\xfe",
            "gen_ai.tool.call.result": "\\udcff" * 10}):
        pass
    with tracer.start_as_current_span("execute_tool audit", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "audit",
            "gen_ai.tool.call.arguments": json.dumps({"case": input})}):
        pass
    return "done"


def tracing(input):
    provider = trace.get_tracer_provider()
    return {"provider": type(provider).__name__,
            "in_a_span": trace.get_current_span().get_span_context().is_valid}
'''

SUITE = """
suite: otel/hostile@1
target: python:hostile_agent:agent
cases:
  - id: survives
    input: c-1
    expect:
      - equals: done
      - calls: {tool: audit, args: {case: c-1}, times: 1}
      - calls: {tool: big, times: 1}
"""

PROBE = """
suite: otel/probe@1
target: python:hostile_agent:tracing
cases:
  - id: inside
    input: x
    expect:
      - {path: $.provider, equals: PROVIDER}
      - {path: $.in_a_span, equals: IN_A_SPAN}
"""


def _assay(root: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "assay", *args], cwd=root,
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, **(env or {})})


def _project(root: Path, provider: str, in_a_span: bool, settings: str | None = None) -> None:
    (root / "evals").mkdir()
    (root / "evals" / "hostile_agent.py").write_text(HOSTILE)
    (root / "evals" / "hostile.suite.yaml").write_text(SUITE)
    (root / "evals" / "probe.suite.yaml").write_text(
        PROBE.replace("PROVIDER", provider).replace("IN_A_SPAN", str(in_a_span).lower()))
    if settings is not None:
        (root / "assay.toml").write_text(settings)


def _outcomes(root: Path) -> dict[str, str]:
    lines = (root / "r.json").read_text().splitlines()
    return {case["id"]: case["outcome"] for line in lines
            for case in json.loads(line)["cases"]}


def test_hostile_spans_never_crash_the_trial(tmp_path: Path) -> None:
    _project(tmp_path, "TracerProvider", True)
    done = _assay(tmp_path, "run", "evals", "--otel", "--no-store", "--json", "r.json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _outcomes(tmp_path) == {"survives": "pass", "inside": "pass"}


def test_without_otel_nothing_is_installed_and_no_span_is_read(tmp_path: Path) -> None:
    _project(tmp_path, "ProxyTracerProvider", False)
    done = _assay(tmp_path, "run", "evals", "--no-store", "--json", "r.json")
    assert done.returncode == 1, done.stderr[-3000:]
    assert _outcomes(tmp_path) == {"survives": "fail", "inside": "pass"}


def test_the_settings_file_turns_it_on_and_the_flag_off(tmp_path: Path) -> None:
    _project(tmp_path, "TracerProvider", True, settings="otel = true\n")
    done = _assay(tmp_path, "run", "evals", "--no-store", "--json", "r.json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _outcomes(tmp_path) == {"survives": "pass", "inside": "pass"}
    done = _assay(tmp_path, "run", "evals", "--no-otel", "--no-store", "--json", "r.json")
    assert _outcomes(tmp_path) == {"survives": "fail", "inside": "fail"}
    (tmp_path / "assay.toml").write_text('trials = 1\notel = "yes"\n')
    done = _assay(tmp_path, "run", "evals", "--no-store")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path}/assay.toml:2: otel is true or false, not 'yes'" in done.stderr


def test_what_otel_cannot_do_is_said(tmp_path: Path) -> None:
    _project(tmp_path, "TracerProvider", True)
    done = _assay(tmp_path, "run", "evals", "--otel", "--no-store",
                  env={"OTEL_SDK_DISABLED": "true"})
    assert done.returncode == 3 and "Traceback" not in done.stderr
    assert "OTEL_SDK_DISABLED=true" in done.stderr
    done = _assay(tmp_path, "run", "evals", "--otel", "--executor", "queue")
    assert done.returncode == 2 and "--otel is not carried to the workers" in done.stderr


def test_a_stored_run_says_it_collected_spans(tmp_path: Path) -> None:
    """A resume goes on as the run was registered: with ``--otel`` its options say so."""
    from assay.store.database import open_store

    _project(tmp_path, "TracerProvider", True)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    found = {}
    for flag in ("--otel", "--no-otel"):
        done = _assay(tmp_path, "run", "evals", "--db", db, "--json", "r.json", flag)
        assert done.returncode in (0, 1), done.stderr[-2000:]
        store = open_store(db)
        try:
            for line in (tmp_path / "r.json").read_text().splitlines():
                report = json.loads(line)
                options = store.open_run(report["run_id"]).options
                found[(flag, report["suite"]["id"])] = options.get("otel")
        finally:
            store.close()
    assert found == {("--otel", "otel/hostile@1"): True, ("--otel", "otel/probe@1"): True,
                     ("--no-otel", "otel/hostile@1"): None, ("--no-otel", "otel/probe@1"): None}

"""``assay run --otel``: framework agents' in-process spans, merged with the wire, end to end.

pydantic-ai instrumented as its docs show (``Agent.instrument_all()``) and
LangGraph traced by LangSmith in its OpenTelemetry mode (environment only)
run as ``python:`` against the scripted model (``tests/model_server.py``).
Each agent also runs a tool of its own that no model asks for (an audit note
naming the case's ticket), which only its spans tell about. With ``--otel``
every structural check holds with each call and each token counted once;
without it the same run has no span-derived fact and nothing of
OpenTelemetry installed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_server import SERVED, USAGE_IN, USAGE_OUT, ModelServer  # noqa: E402

pytest.importorskip("opentelemetry.sdk.trace")
pytestmark = pytest.mark.real

AGENTS = Path(__file__).resolve().parent / "agents"
KEY = "sk-CANARY-OTEL-KEY-5d1e"
#: The tokens of one model turn of the scripted model.
TURN = USAGE_IN + USAGE_OUT


def _script(*turns: dict[str, Any]) -> str:
    return "SCRIPT:" + json.dumps(list(turns))


def _cases(tickets: int = 1) -> str:
    """The support cases; with ``tickets`` > 1, that many copies of the first, each with a
    ticket of its own (the canary a trial's audit note must name, and no other)."""
    lookup = _script({"call": "lookup", "args": {"order": "A-1"}}, {"say": "A-1 has shipped."})
    asked = _script({"call": "lookup", "args": {"order": "A-2"}},
                    {"call": "ask_user", "args": {"question": "May I refund A-2?"}},
                    {"call": "refund", "args": {"order": "A-2"}}, {"say": "Refunded."})
    found = ""
    for n in range(1, tickets + 1):
        found += f"""
  - id: looks-up-{n}
    input: 'Where is my order A-1? TICKET-{n} {lookup}'
    expect:
      - calls: {{tool: lookup, args: {{order: A-1}}, times: 1}}
      - calls: {{tool: audit_log, times: 1}}
      - calls: {{tool: audit_log, args: {{ticket: TICKET-{n}}}}}
      - never_calls: [refund]
      - within_steps: 2
      - costs_at_most: {{tokens: {2 * TURN}}}
      - contains: shipped
"""
    if tickets == 1:
        found += f"""
  - id: asks-first
    input: 'Refund A-2. TICKET-X {asked}'
    expect:
      - asks: {{before: refund}}
      - calls: {{tool: refund, args: {{order: A-2}}, times: 1}}
      - calls_before: [lookup, refund]
      - never_calls: [ask_user]
      - calls: {{tool: audit_log, args: {{ticket: TICKET-X}}, times: 1}}
      - within_steps: 4
      - costs_at_most: {{tokens: {4 * TURN}}}
"""
    return found


PROBE = """
suite: fw/otel-probe@1
target: python:pydantic_ai_otel_agent:tracing
cases:
  - id: inside-a-trial
    input: x
    expect:
      - {path: $.provider, equals: PROVIDER}
      - {path: $.in_a_span, equals: IN_A_SPAN}
"""


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def _project(project: Any, target: str, cases: str) -> None:
    shutil.copytree(AGENTS, project.root / "evals", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    project.write("evals/shop.suite.yaml", f"suite: fw/shop@1\ntarget: {target}\ncases:"
                  + cases)


def _probe(project: Any, provider: str, in_a_span: bool) -> None:
    project.write("evals/probe.suite.yaml", PROBE.replace("PROVIDER", provider)
                  .replace("IN_A_SPAN", str(in_a_span).lower()))


def _env(model: ModelServer, **more: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": model.url + "/v1", "OPENAI_API_KEY": KEY,
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **more}


def _run(project: Any, model: ModelServer, *flags: str, **env: str) -> dict[str, Any]:
    """The reports of the run, by suite id, and what the command printed (``_done``)."""
    done = project.assay("run", "evals", "--no-store", "--json", "r.json", *flags,
                         env=_env(model, **env), timeout=600)
    reports: dict[str, Any] = {"_done": done}
    for line in (project.root / "r.json").read_text().splitlines():
        report = json.loads(line)
        reports[report["suite"]["id"]] = report
    return reports


def _failing(report: dict[str, Any]) -> dict[str, list[tuple[str, str, str]]]:
    return {case["id"]: [(v["assertion"], v["outcome"], v["note"])
                         for t in case["trials"] for v in t["verdicts"]
                         if v["outcome"] != "pass"]
            for case in report["cases"] if case["outcome"] != "pass"}


def _passes(reports: dict[str, Any], trials: int) -> None:
    done = reports["_done"]
    shop = reports["fw/shop@1"]
    assert _failing(shop) == {} and done.code == 0, (_failing(shop), done.out[-2000:],
                                                     done.err[-2000:])
    assert {case["facets"].get("model") for case in shop["cases"]} == {SERVED}
    assert all(len(case["trials"]) == trials for case in shop["cases"])
    assert KEY not in json.dumps(shop) and KEY not in done.out + done.err


PYDANTIC_AI = "python:pydantic_ai_otel_agent:agent"
SDK_PROVIDER = "opentelemetry.sdk.trace.TracerProvider"
NO_PROVIDER = "opentelemetry.trace.ProxyTracerProvider"


def test_pydantic_ai_spans_add_the_tool_it_ran_itself_and_count_nothing_twice(
        project: Any, model: ModelServer) -> None:
    """Its ``execute_tool`` spans of the tools the model asked for are the calls the wire
    saw (``times: 1``), its ``chat`` spans' tokens are the wire's tokens (an exact budget),
    and the audit note no model asked for is there, once, with its own trial's ticket."""
    _project(project, PYDANTIC_AI, _cases())
    _probe(project, SDK_PROVIDER, True)
    reports = _run(project, model, "--otel")
    _passes(reports, trials=1)
    assert _failing(reports["fw/otel-probe@1"]) == {}
    shop = reports["fw/shop@1"]
    assert shop["cost"]["input_tokens"] == 6 * USAGE_IN  # 2 + 4 model turns, once each
    assert shop["cost"]["output_tokens"] == 6 * USAGE_OUT


def test_without_otel_no_span_is_read_and_nothing_is_installed(
        project: Any, model: ModelServer) -> None:
    _project(project, PYDANTIC_AI, _cases())
    _probe(project, NO_PROVIDER, False)
    reports = _run(project, model)
    assert reports["_done"].code == 1
    assert _failing(reports["fw/otel-probe@1"]) == {}
    # Only the audit notes, which the spans alone tell about, are missing; what the wire
    # saw is all there.
    failing = _failing(reports["fw/shop@1"])
    assert set(failing) == {"looks-up-1", "asks-first"}
    for verdicts in failing.values():
        assert [(assertion, outcome) for assertion, outcome, _ in verdicts] in (
            [("calls", "fail")], [("calls", "fail"), ("calls", "fail")]), verdicts
        assert all("audit_log" in note for _, _, note in verdicts)


def test_concurrent_pydantic_ai_trials_never_mix_their_spans(
        project: Any, model: ModelServer) -> None:
    """12 cases × 3 trials, 8 at once on one event loop: each trial's audit note names its
    own case's ticket, and only one note is in each trial."""
    _project(project, PYDANTIC_AI, _cases(tickets=12))
    reports = _run(project, model, "--otel", "--trials", "3", "--concurrency", "8")
    _passes(reports, trials=3)


def test_an_agents_own_tracer_provider_is_kept_and_fed(project: Any,
                                                        model: ModelServer) -> None:
    """An app that set its SDK provider with its own exporter when imported keeps it, and
    its exporter every span: assay's processor is added to it, no provider of assay's
    replaces it."""
    _project(project, "python:pydantic_ai_own_provider:agent", """
  - id: looks-up
    input: 'Where is my order A-1? TICKET-7 SCRIPT:[{"call": "lookup", "args": {"order": "A-1"}},
      {"say": "A-1 has shipped."}]'
    expect:
      - calls: {tool: lookup, times: 1}
      - calls: {tool: audit_log, args: {ticket: TICKET-7}, times: 1}
      - {path: $.answer, contains: shipped}
      - {path: $.own_provider, equals: true}
      - {path: $.exported, equals: [chat, execute_tool, invoke_agent]}
""")
    reports = _run(project, model, "--otel", "--trials", "2")
    _passes(reports, trials=2)


LANGGRAPH = "python:langgraph_otel_agent:agent"


def test_langgraph_traced_by_langsmith_in_otel_mode(project: Any, model: ModelServer) -> None:
    """LangSmith makes its spans on its tracing thread, from a queue, after each run ends;
    assay files them by the trial's trace and waits for its queue before closing a trial.
    LangSmith's endpoint is the scripted model here: nothing is sent to it."""
    _project(project, LANGGRAPH, _cases(tickets=10))
    before = len(model.requests)
    reports = _run(project, model, "--otel", "--trials", "2", "--concurrency", "8",
                   LANGSMITH_TRACING="true", LANGSMITH_TRACING_MODE="otel",
                   LANGSMITH_ENDPOINT=model.url)
    _passes(reports, trials=2)
    assert {r["path"] for r in model.requests[before:]} == {"/v1/chat/completions"}
    # Without --otel, the same run sees no audit note.
    reports = _run(project, model, LANGSMITH_TRACING="true", LANGSMITH_TRACING_MODE="otel",
                   LANGSMITH_ENDPOINT=model.url)
    assert reports["_done"].code == 1
    failing = _failing(reports["fw/shop@1"])
    assert len(failing) == 10
    assert {(assertion, outcome) for verdicts in failing.values()
            for assertion, outcome, _ in verdicts} == {("calls", "fail")}
    assert all("audit_log" in note for verdicts in failing.values() for _, _, note in verdicts)


@pytest.mark.parametrize("version", [2, 5, 6])
def test_each_pydantic_ai_instrumentation_version_is_read(model: ModelServer, version: int,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Its instrumentation versions name a tool's span and attributes differently (version 2:
    ``running tool``, ``tool_arguments``, ``tool_response``): each is one tool execution with
    its arguments and result. On a tracer provider of the test's own, in this process."""
    import asyncio
    import warnings

    from opentelemetry.sdk.trace import TracerProvider
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from assay.targets.otel import executed_tools
    from assay.targets.otel_live import Collector, collecting

    sys.path.insert(0, str(AGENTS))
    import shop_tools

    monkeypatch.setenv("OPENAI_BASE_URL", model.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    provider, collector = TracerProvider(), Collector()
    provider.add_span_processor(collector)
    agent = Agent("openai:gpt-4.1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # versions before 5 are said to be deprecated
        agent.instrument = InstrumentationSettings(tracer_provider=provider, version=version)
    agent.tool_plain(shop_tools.lookup)
    trial = collector.open_trial()

    async def run() -> None:
        with collecting(trial):
            await agent.run("Where is A-1? " + _script(
                {"call": "lookup", "args": {"order": "A-1"}}, {"say": "A-1 has shipped."}))

    asyncio.run(run())
    assert [(e["kind"], e["name"], e["call_id"], e.get("arguments"), e.get("result"))
            for e in executed_tools(trial.spans())] == [
        ("tool_call", "lookup", "call_0_0", {"order": "A-1"}, None),
        ("tool_result", "lookup", "call_0_0", None, "order A-1 is shipped")]
    assert ("running tool" in {s["name"] for s in trial.spans()}) == (version == 2)

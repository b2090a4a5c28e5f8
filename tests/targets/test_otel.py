"""``otel:FILE``: OTLP/JSON spans exported by the OpenTelemetry SDK, replayed and graded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")


def export(path: Path) -> None:
    """Two agent runs as the SDK records them, written as its OTLP encoder gives them."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("support-bot")
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "assay.case.id": "refund"}):
        with tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 12}):
            pass
        with tracer.start_as_current_span("execute_tool erp.refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "erp.refund",
                "gen_ai.tool.call.id": "call-1",
                "gen_ai.tool.call.arguments": json.dumps({"order": "A-1"}),
                "gen_ai.tool.call.result": json.dumps({"ok": True})}):
            pass
        with tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 150, "gen_ai.usage.output_tokens": 20,
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                    {"type": "text", "content": "Order A-1 is refunded."}]}])}):
            pass
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "assay.case.id": "crash"}) as root:
        root.set_status(Status(StatusCode.ERROR, "upstream timeout"))
    path.write_text(MessageToJson(encode_spans(spans.get_finished_spans())))


SUITE = """
suite: otel/support@1
target: otel:spans.json
cases:
  - id: refund
    input: refund order A-1
    expect:
      - {contains: refunded}
      - calls: {tool: erp.refund, args: {order: A-1}, times: 1}
      - never_calls: [erp.delete]
      - {costs_at_most: {tokens: 400}}
  - id: crash
    input: anything
    expect: [status: ok]
  - id: unrecorded
    input: nothing recorded
    expect: [status: ok]
"""


def test_spans_are_replayed_as_traces_and_graded(tmp_path: Path) -> None:
    export(tmp_path / "spans.json")
    (tmp_path / "otel.suite.yaml").write_text(SUITE)
    done = subprocess.run([sys.executable, "-m", "assay", "run", ".", "--json", "r.json",
                           "--no-store"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["refund"]["outcome"] == "pass", cases["refund"]
    assert cases["refund"]["facets"]["model"] == "gpt-4o-2024-08-06"
    assert cases["crash"]["outcome"] == "fail"
    assert cases["unrecorded"]["outcome"] == "broken"
    assert "no recorded trace" in cases["unrecorded"]["reason"]
    assert report["cost"]["input_tokens"] == 270 and report["cost"]["usd"] is None


def test_a_file_that_is_not_otlp_cannot_start(tmp_path: Path) -> None:
    (tmp_path / "spans.json").write_text('{"resourceSpans": [}\n{"oops": 1}\n')
    (tmp_path / "otel.suite.yaml").write_text(SUITE)
    done = subprocess.run([sys.executable, "-m", "assay", "run", ".", "--no-store"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "Traceback" not in done.stderr
    assert "spans.json:1: not OTLP/JSON" in done.stderr

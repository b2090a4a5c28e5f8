"""The instrumented pydantic-ai agent in an app that sets up OpenTelemetry itself when it is
imported, as OpenTelemetry's docs show: an SDK ``TracerProvider`` with a span processor and
an exporter, made the global one (the docs export over OTLP; this one keeps its spans in
memory, so the agent can say what its exporter got)."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from pydantic_ai_otel_agent import agent as support  # noqa: E402


async def agent(input: str) -> dict[str, Any]:
    answer = await support(input)
    return {"answer": answer, "own_provider": trace.get_tracer_provider() is provider,
            "exported": sorted({span.name.split(" ")[0]
                                for span in exporter.get_finished_spans()})}

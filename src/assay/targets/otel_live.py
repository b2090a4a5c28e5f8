"""``--otel``: the OpenTelemetry spans a ``python:`` agent's framework emits, per trial (SPEC §15).

A framework told to trace (pydantic-ai's ``Agent.instrument_all()``,
LangSmith's ``LANGSMITH_TRACING_MODE=otel``) hands its spans to the
process's global tracer provider. Asked to (``assay run --otel``), assay
puts one in-memory span processor there, the :class:`Collector`: on the
provider the agent's code set when its module was imported, if that is an
SDK provider, else on an SDK ``TracerProvider`` of assay's own with no
exporter, made the global one. Nothing leaves the machine through it. Not
asked, none of this is imported.

Which trial a span belongs to:

- each trial gets a parent of its own, a non-recording span context with a
  fresh trace id, made the current span of the trial's context: every span
  the agent starts there, in its tasks, and on the threads it hands its
  context to, is in that trace;
- a span started where the trial's context variable is set is the trial's,
  and so is its trace from then on (a span the agent starts as a new root);
- a span started anywhere else (a framework's background thread: LangSmith
  makes its spans on its own, from a queue, parented on the span that was
  current when the run was queued) is the trial's when its trace is.

A span is kept as it ended. One still open when its trial is closed is
kept as it stood then, with no end time (a tool still running: its call is
read, and no result); what happens to it later, and a span started later,
is not the trial's (docs/decisions/0071-otel-in-process.md). Before a trial
is closed, :func:`settle` waits (bounded) for the frameworks known to make
their spans later on a thread of their own: LangSmith's client, whose queue
it flushes. Kept spans are read as OTLP/JSON, the form of ``otel:`` files
and of the recording proxy's receiver, by ``otel.executed_tools``: one
reader.
"""

from __future__ import annotations

import contextvars
import os
import random
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from ..errors import HarnessFailure

__all__ = ["Collector", "TrialSpans", "collecting", "install", "open_trial", "settle",
           "settles"]

#: The most spans one trial keeps (the recording proxy's bound too), the characters of
#: one attribute value kept, and the values of one array attribute.
MAX_SPANS = 10_000
MAX_TEXT = 256 * 1024
MAX_ITEMS = 1_000
#: The longest :func:`settle` waits for spans made after the agent returned.
SETTLE_S = 5.0

#: The trial whose code is running; None outside any trial.
current: contextvars.ContextVar[TrialSpans | None] = contextvars.ContextVar(
    "assay_otel_trial", default=None)

_install_lock = threading.Lock()
_installed: Collector | None = None


class TrialSpans:
    """The spans of one trial: those that ended, and those still open, until :meth:`close`."""

    __slots__ = ("parent", "dropped", "_collector", "_ended", "_open", "_stood", "_traces",
                 "_closed")

    def __init__(self, collector: Collector) -> None:
        self._collector = collector
        self._ended: list[ReadableSpan] = []
        #: Spans started in the trial and not ended yet, by (trace id, span id).
        self._open: dict[tuple[int, int], Span] = {}
        #: Those still open at ``close``, as OTLP/JSON as they stood then.
        self._stood: list[dict[str, Any]] = []
        self._closed = False
        #: Spans of the trial not kept, past ``MAX_SPANS``.
        self.dropped = 0
        trace_id = random.getrandbits(128) or 1
        self._traces = {trace_id}
        self.parent = trace.NonRecordingSpan(trace.SpanContext(
            trace_id=trace_id, span_id=random.getrandbits(64) or 1, is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)))

    def spans(self) -> list[dict[str, Any]]:
        """The spans kept so far, as OTLP/JSON span objects: those that ended, then those
        still open (once closed: open at the close) as they stand, with no end time. A span
        that cannot be read is left out."""
        with self._collector.lock:
            kept = [*self._ended, *self._open.values()]
            stood = list(self._stood)
        return [*_readable(kept), *stood]

    def close(self) -> None:
        """Keep no more: a span of this trial that ends from now on is dropped. Idempotent."""
        self._collector.release(self)


class Collector(SpanProcessor):
    """The span processor that files each span with its trial (see the module's doc)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._by_trace: dict[int, TrialSpans] = {}
        #: The trial of each span started in one and not ended yet.
        self._started: dict[tuple[int, int], TrialSpans] = {}

    def open_trial(self) -> TrialSpans:
        """A new trial's record, its trace known from now."""
        trial = TrialSpans(self)
        with self.lock:
            for trace_id in trial._traces:
                self._by_trace[trace_id] = trial
        return trial

    def release(self, trial: TrialSpans) -> None:
        """Close ``trial``: its traces are forgotten, and what ends later is not kept."""
        with self.lock:
            if trial._closed:
                return
            trial._closed = True
            for trace_id in trial._traces:
                if self._by_trace.get(trace_id) is trial:
                    del self._by_trace[trace_id]
            for key in trial._open:
                self._started.pop(key, None)
            still = list(trial._open.values())
            trial._open = {}
        stood = _readable(still)  # read outside the lock: its owner may be writing to it
        with self.lock:
            trial._stood = stood

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        """File a span with the trial whose context started it (its trace becomes the
        trial's), else with the trial whose trace it is in."""
        spanned = span.get_span_context()
        key = (spanned.trace_id, spanned.span_id)
        trial = current.get()
        with self.lock:
            if trial is not None and trial._collector is self and not trial._closed:
                if spanned.trace_id not in self._by_trace:
                    self._by_trace[spanned.trace_id] = trial
                    trial._traces.add(spanned.trace_id)
            else:
                trial = self._by_trace.get(spanned.trace_id)
                if trial is None:
                    return
            if len(trial._ended) + len(trial._open) < MAX_SPANS:
                trial._open[key] = span
                self._started[key] = trial
            else:
                trial.dropped += 1

    def on_end(self, span: ReadableSpan) -> None:
        """Keep a span of an open trial as it ended."""
        spanned = span.context
        if spanned is None:
            return
        key = (spanned.trace_id, spanned.span_id)
        with self.lock:
            trial = self._started.pop(key, None)
            if trial is None:
                return
            trial._open.pop(key, None)
            trial._ended.append(span)

    def shutdown(self) -> None:
        """Nothing to hand on: the spans are read where they are."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every span is filed as it ends: nothing waits."""
        return True


def install() -> Collector:
    """Put the collector on the process's tracer provider; once per process, idempotent.

    The global provider, if the agent's code set an SDK one (anything that
    takes a span processor), gets it added; if none was set (the API's proxy),
    an SDK ``TracerProvider`` with the collector and no exporter becomes the
    global one, sampling every span. ``HarnessFailure`` when spans cannot be
    had: the SDK turned off (``OTEL_SDK_DISABLED``), or a provider that takes
    no processor.
    """
    global _installed
    with _install_lock:
        if _installed is not None:
            return _installed
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            raise HarnessFailure("--otel: OTEL_SDK_DISABLED=true turns the OpenTelemetry SDK "
                                 "off, so no span would be recorded; unset it")
        collector = Collector()
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            ours = TracerProvider(sampler=ALWAYS_ON)
            ours.add_span_processor(collector)
            trace.set_tracer_provider(ours)
            provider = trace.get_tracer_provider()  # another thread may have set one first
            if provider is ours:
                _installed = collector
                return collector
        add = getattr(provider, "add_span_processor", None)
        if not callable(add):
            raise HarnessFailure(f"--otel: the process's tracer provider is "
                                 f"{type(provider).__name__}, which takes no span processor: "
                                 "set an OpenTelemetry SDK TracerProvider, or none")
        add(collector)
        _installed = collector
        return collector


def open_trial() -> TrialSpans:
    """A new trial's record on the installed collector (``install`` first)."""
    if _installed is None:
        raise RuntimeError("otel_live.install() first")
    return _installed.open_trial()


@contextmanager
def collecting(trial: TrialSpans | None) -> Iterator[None]:
    """Run the body as ``trial``'s: its context variable set, its parent the current span.

    ``None`` does nothing (the run without ``--otel``).
    """
    if trial is None:
        yield
        return
    token = current.set(trial)
    attached = otel_context.attach(trace.set_span_in_context(trial.parent))
    try:
        yield
    finally:
        otel_context.detach(attached)
        current.reset(token)


def settles() -> bool:
    """Whether a framework that makes its spans later, on a thread of its own, is in use."""
    return _langsmith() is not None


def settle(timeout: float = SETTLE_S) -> None:
    """Wait, up to ``timeout`` seconds, for the spans such a framework still has to make.

    LangSmith in its ``otel`` (or ``hybrid``) mode queues each run and makes
    its span on its tracing thread; its client's ``flush`` returns when the
    queue is empty. Blocking: call it off the event loop. Never raises.
    """
    client = _langsmith()
    if client is None:
        return
    try:
        client.flush(timeout=timeout)
    except Exception:  # its own trouble: the spans it made so far are what there is
        return


def _langsmith() -> Any:
    """LangSmith's shared client, when one exists and turns its runs into spans."""
    module = sys.modules.get("langsmith.run_trees")
    client = getattr(module, "_CLIENT", None) if module is not None else None
    if client is None or getattr(client, "otel_exporter", None) is None:
        return None
    return client if callable(getattr(client, "flush", None)) else None


# --- a span as OTLP/JSON -------------------------------------------------------------------


def _readable(spans: list[Any]) -> list[dict[str, Any]]:
    """``spans`` as OTLP/JSON; a span that cannot be read is left out."""
    found = []
    for span in spans:
        try:
            found.append(otlp_span(span))
        except Exception:  # a span of someone else's making: never the trial's end
            continue
    return found


def otlp_span(span: ReadableSpan) -> dict[str, Any]:
    """``span`` as an OTLP/JSON span object (the form ``otel.resource_spans`` yields).

    Bounded and always text: a long value is cut to ``MAX_TEXT`` characters,
    text that is not valid Unicode has the bad characters replaced, a
    missing name is empty.
    """
    spanned = span.context
    if spanned is None:
        raise ValueError("a span without a context")
    found: dict[str, Any] = {
        "traceId": f"{spanned.trace_id:032x}", "spanId": f"{spanned.span_id:016x}",
        "name": _text(span.name) if isinstance(span.name, str) else "",
        "startTimeUnixNano": str(span.start_time or 0),
        "attributes": _attributes(span.attributes),
    }
    if span.end_time is not None:  # still open: no end time, as no exporter would send it
        found["endTimeUnixNano"] = str(span.end_time)
    if span.parent is not None:
        found["parentSpanId"] = f"{span.parent.span_id:016x}"
    status = span.status
    code = getattr(getattr(status, "status_code", None), "value", 0)
    found["status"] = {"code": code if isinstance(code, int) else 0}
    description = getattr(status, "description", None)
    if isinstance(description, str) and description:
        found["status"]["message"] = _text(description)
    return found


def _attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not attributes:
        return []
    return [{"key": _text(str(key)), "value": _value(value)}
            for key, value in attributes.items()]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": _text(value)}
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return {"arrayValue": {"values": [_value(item) for item in list(value)[:MAX_ITEMS]]}}
    return {"stringValue": _text(repr(value))}


def _text(value: str) -> str:
    value = value[:MAX_TEXT]
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no text can carry it
        return value.encode("utf-8", "replace").decode("utf-8")
    return value

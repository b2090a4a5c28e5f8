"""``otel:FILE`` — OTLP/JSON spans with the OpenTelemetry GenAI conventions replayed as traces.

Production traces are already recorded; this target replays them as trials
(SPEC §13). ``FILE`` holds OTLP/JSON as an exporter writes it: one
``{"resourceSpans": [...]}`` object, or one such object per line (the
Collector's file exporter). The spans of one trace id make one recorded
trial, read with the GenAI semantic conventions:

- ``execute_tool`` spans (``gen_ai.operation.name``): a ``tool_call`` event
  named by ``gen_ai.tool.name`` with ``gen_ai.tool.call.arguments``, then a
  ``tool_result`` with ``gen_ai.tool.call.result`` (an error status marks
  it an error);
- ``chat`` / ``text_completion`` / ``generate_content`` spans: a step
  each, their ``gen_ai.usage.input_tokens`` / ``output_tokens`` summed,
  the model they name (``gen_ai.response.model``, else the request's) as
  the trace's ``model`` facet, and the last one's
  ``gen_ai.output.messages`` as the output;
- the root span's error status makes the trial's status ``error``.

A trace answers the case named by an ``assay.case.id`` attribute on any of
its spans, else the case whose id is the trace id; several traces of one
case answer its trials in turn (``scripted:``'s rule). Spans say nothing of
cost: cost is unavailable, tokens, tool calls and output are observed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..errors import HarnessFailure
from .base import TargetOptions, evidence, parsed_json
from .scripted import ScriptedTarget

_MODEL_CALLS = ("chat", "text_completion", "generate_content")


class OtelTarget(ScriptedTarget):
    """Answers each trial with a trace rebuilt from the recorded spans of its case."""

    evidence = evidence(output="observed", tool_calls="observed", asks="unavailable",
                        skills="unavailable", tokens="observed", cost="unavailable",
                        steps="observed", exit_code="unavailable")

    def __init__(self, uri: str, options: TargetOptions) -> None:
        super().__init__("scripted:" + uri.removeprefix("otel:"), options)
        self.uri = uri
        self.facets = {"harness": "otel"}

    async def start(self) -> None:
        """Read every span, group them by trace and make each trace a recorded trial."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise HarnessFailure(f"target {self.uri}: cannot read {self.path}: "
                                 f"{exc.strerror}") from None
        for record in otlp_records(text, str(self.path)):
            self._lines.setdefault(record["case"], []).append(record)


def otlp_records(text: str, where: str) -> list[dict[str, Any]]:
    """Each trace of an OTLP/JSON text as a ``scripted:`` line; ``HarnessFailure`` if unreadable."""
    documents: list[Any] = []
    try:
        documents.append(json.loads(text))
    except ValueError:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                documents.append(json.loads(line))
            except ValueError:
                raise HarnessFailure(f"{where}:{number}: not OTLP/JSON (a JSON object of "
                                     "resourceSpans per line)") from None
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for document in documents:
        if not isinstance(document, dict) or not isinstance(document.get("resourceSpans"), list):
            raise HarnessFailure(f"{where}: not OTLP/JSON: no resourceSpans")
        for _, span in resource_spans(document):
            traces[span["traceId"]].append(span)
    if not traces:
        raise HarnessFailure(f"{where}: no spans in it")
    return [_record(trace_id, spans) for trace_id, spans in traces.items()]


def _record(trace_id: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    spans = sorted(spans, key=lambda s: _nanos(s.get("startTimeUnixNano")))
    events: list[dict[str, Any]] = []
    tokens_in = tokens_out = 0
    counted = False
    steps = 0
    output: Any = None
    answered = asked = None
    case_id = trace_id
    ids = {s.get("spanId") for s in spans}
    root = next((s for s in spans if s.get("parentSpanId") not in ids), spans[0])
    for span in spans:
        attrs = _attributes(span.get("attributes"))
        if isinstance(attrs.get("assay.case.id"), str):
            case_id = attrs["assay.case.id"]
        operation = _operation(span, attrs)
        if operation == "execute_tool":
            events.extend(tool_events(span, attrs))
        elif operation in _MODEL_CALLS:
            steps += 1
            for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
                if attrs.get(key) is not None:
                    counted = True
            tokens_in += int(attrs.get("gen_ai.usage.input_tokens") or 0)
            tokens_out += int(attrs.get("gen_ai.usage.output_tokens") or 0)
            # The model that answered, as the provider named it, over the one asked for.
            answered = answered or attrs.get("gen_ai.response.model")
            asked = asked or attrs.get("gen_ai.request.model")
            said = _said(attrs.get("gen_ai.output.messages"))
            if said is not None:
                output = said
                events.append({"kind": "message", "text": said})
    record: dict[str, Any] = {"case": case_id, "output": output, "events": events,
                              "steps": steps}
    if counted:
        record["usage"] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    if answered or asked:
        record["facets"] = {"model": str(answered or asked)}
    if _failed(root):
        record["status"] = "error"
        record["error"] = str((root.get("status") or {}).get("message") or "the trace failed")
    return record


def resource_spans(document: Any) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each span of an OTLP/JSON document with its resource's attributes; never raises."""
    if not isinstance(document, dict):
        return
    for resource in document.get("resourceSpans") or []:
        if not isinstance(resource, dict):
            continue
        attrs = _attributes((resource.get("resource") or {}).get("attributes")
                            if isinstance(resource.get("resource"), dict) else None)
        for scope in resource.get("scopeSpans") or []:
            for span in (scope or {}).get("spans") or [] if isinstance(scope, dict) else []:
                if isinstance(span, dict) and isinstance(span.get("traceId"), str):
                    yield attrs, span


def _operation(span: dict[str, Any], attrs: dict[str, Any]) -> str:
    return str(attrs.get("gen_ai.operation.name") or str(span.get("name", "")).split(" ")[0])


def executed_tools(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool executions among ``spans`` (GenAI ``execute_tool``), in start order, as
    ``tool_call`` and ``tool_result`` event records (what a live receiver adds to a trace)."""
    events: list[dict[str, Any]] = []
    for span in sorted(spans, key=lambda s: _nanos(s.get("startTimeUnixNano"))):
        attrs = _attributes(span.get("attributes"))
        if _operation(span, attrs) == "execute_tool":
            events.extend(tool_events(span, attrs))
    return events


def tool_events(span: dict[str, Any], attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``execute_tool`` span as its ``tool_call`` and ``tool_result`` event records.

    What the tool was given and gave back are ``gen_ai.tool.call.arguments``
    and ``.result``; where those are missing, the names of pydantic-ai's
    instrumentation version 2 (``tool_arguments``, ``tool_response``) or
    LangSmith's tool spans (the run's inputs in ``gen_ai.prompt``, its output
    in ``gen_ai.completion``). A span with no end time, result or error (one
    still open when a live trial ended) is a call with no result.
    """
    name = attrs.get("gen_ai.tool.name")
    call_id = attrs.get("gen_ai.tool.call.id")
    name = name if isinstance(name, str) else None
    call_id = call_id if isinstance(call_id, str) else None
    arguments = _first(attrs, "gen_ai.tool.call.arguments", "tool_arguments")
    result = _first(attrs, "gen_ai.tool.call.result", "tool_response")
    if attrs.get("langsmith.span.kind") == "tool":
        arguments = parsed_json(attrs.get("gen_ai.prompt")) if arguments is None else arguments
        result = _run_output(attrs.get("gen_ai.completion")) if result is None else result
    call = {"kind": "tool_call", "name": name, "call_id": call_id,
            "arguments": parsed_json(arguments)}
    if result is None and "endTimeUnixNano" not in span and not _failed(span):
        return [call]  # a span still open, with nothing yet to say it finished
    return [call, {"kind": "tool_result", "name": name, "call_id": call_id,
                   "result": parsed_json(result), "is_error": _failed(span)}]


def _first(attrs: dict[str, Any], *keys: str) -> Any:
    return next((attrs[key] for key in keys if attrs.get(key) is not None), None)


def _run_output(completion: Any) -> Any:
    """A LangSmith run's output (``{"output": …}``); a tool message as its content."""
    parsed = parsed_json(completion)
    if not isinstance(parsed, dict) or "output" not in parsed:
        return parsed
    output = parsed["output"]
    if isinstance(output, dict) and output.get("type") == "tool" and "content" in output:
        return output["content"]
    return output


def _nanos(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _attributes(items: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            found[item["key"]] = _value(item.get("value") or {})
    return found


def _value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return _nanos(value["intValue"])  # a string in OTLP/JSON; anything else: 0
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError):
            return None
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value and isinstance(value["arrayValue"], dict):
        return [_value(v) for v in value["arrayValue"].get("values") or []]
    return None


def _said(messages: Any) -> str | None:
    """The text of the assistant's parts in ``gen_ai.output.messages`` (a JSON string)."""
    parsed = parsed_json(messages)
    if not isinstance(parsed, list):
        return None
    texts = [str(part.get("content")) for message in parsed if isinstance(message, dict)
             for part in message.get("parts") or []
             if isinstance(part, dict) and part.get("type") == "text"]
    return "\n".join(texts) if texts else None


def _failed(span: dict[str, Any]) -> bool:
    status = span.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    return code in (2, "STATUS_CODE_ERROR")


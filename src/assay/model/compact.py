"""Compact JSON on the hot path: the bytes pydantic writes, made by orjson.

What the store and the report hold of a trial (its trace, its usage, the
case it folds into) is pydantic's compact JSON (docs/decisions/0017). orjson
writes the same bytes for the same values — insertion order kept, no spaces,
floats and strings written alike — about ten times faster. It refuses what
pydantic writes in its own way (integers outside 64 bits, keys that are not
strings, a lone surrogate, objects that are not JSON); ``fast_json`` then
gives None and the caller writes those values through pydantic, as before.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from .changes import WorkspaceFacts
from .conversation import SimulatorUse
from .trace import Event, Trace, Usage

#: Values orjson would write in a form of its own (dataclasses, dates, subclasses of
#: str, int, dict, list) are refused instead, and so written by pydantic.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME \
    | orjson.OPT_PASSTHROUGH_SUBCLASS


def fast_json(value: Any) -> bytes | None:
    """``value`` (dicts, lists, str, int, float, bool, None) as compact JSON, or None
    where orjson would write it otherwise than pydantic or not at all."""
    try:
        written = orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return None
    # orjson's bytes keep the 4 KiB it wrote them in, however short they are: a batch of a
    # thousand traces waiting for the writer would hold 4 MB. A copy holds its length.
    return bytes(memoryview(written)) if len(written) < 4096 else written


# --- a trace and its usage, as the store keeps them ---------------------------------------
#
# ``Trace.model_dump_json(fallback=repr)`` writes each model's fields in their
# order, leaves out the ``exclude_if`` fields that are None, writes enums by
# value and, where a field holds a value of another type than it declares
# (possible after ``model_copy(update=...)``), converts a few: an int or a bool
# in a float field is written as a float, a bool in an int field as an int.
# The dicts below are the models' own ``__dict__`` (fields in their order, as
# validation, ``model_construct``, ``model_copy`` and unpickling all leave it),
# copied only where a field is left out or replaced; a value whose type pydantic
# would convert makes the whole trace go through pydantic instead, as does
# anything orjson refuses (``fast_json``).

#: The fields each model is written with, in order, as this encoder knows them; if a
#: model's fields change, the fast path is off (``_MODELS_KNOWN``) until this is updated.
_TRACE_FIELDS = ("output", "status", "error", "events", "usage", "steps", "settled",
                 "exit_code", "duration_s", "stdout", "facets", "evidence", "partial",
                 "workspace", "state", "simulator")
_EVENT_FIELDS = ("kind", "name", "arguments", "result", "text", "call_id", "is_error", "t",
                 "turn")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cost_usd")
#: The fields left out when None (``exclude_if``), per model.
_TRACE_OPTIONAL = ("workspace", "state", "simulator")
_EVENT_OPTIONAL = ("turn",)


def _fields_are(model: type[BaseModel], fields: tuple[str, ...],
                optional: tuple[str, ...]) -> bool:
    """Whether ``model`` is written as this encoder writes it: these fields in this
    order, these left out when None, no alias, exclusion, serializer or computed field."""
    info = model.model_fields
    decorators = model.__pydantic_decorators__
    return (tuple(info) == fields
            and tuple(name for name, f in info.items() if f.exclude_if is not None) == optional
            and all(f.exclude is None and f.serialization_alias is None and f.alias is None
                    for f in info.values())
            and not model.model_computed_fields and not decorators.field_serializers
            and not decorators.model_serializers
            and model.model_config.get("ser_json_inf_nan", "null") == "null")


_MODELS_KNOWN = (_fields_are(Trace, _TRACE_FIELDS, _TRACE_OPTIONAL)
                 and _fields_are(Event, _EVENT_FIELDS, _EVENT_OPTIONAL)
                 and _fields_are(Usage, _USAGE_FIELDS, ()))


def trace_json(trace: Trace) -> bytes:
    """``trace.model_dump_json(fallback=repr).encode()``, the same bytes, mostly by orjson.

    What a trial's trace is stored as (``store.runs.trials.trial_record``) and
    its ledger entry names by digest: these bytes must not change.
    """
    if _MODELS_KNOWN and type(trace) is Trace:
        data = _trace_data(trace)
        if data is not None:
            encoded = fast_json(data)
            if encoded is not None:
                return encoded
    return trace.model_dump_json(fallback=repr).encode()


def usage_json(usage: Usage) -> str:
    """``usage.model_dump_json()``, the same text, mostly by orjson."""
    if _MODELS_KNOWN and type(usage) is Usage:
        data = _usage_data(usage)
        if data is not None:
            encoded = fast_json(data)
            if encoded is not None:
                return encoded.decode()
    return usage.model_dump_json()


def _trace_data(trace: Trace) -> dict[str, Any] | None:
    """The trace as orjson should write it, or None where pydantic would write a value
    in a form of its own (a converted number, a model where a field declares another)."""
    fields = trace.__dict__
    usage = fields["usage"]
    if len(fields) != _TRACE_WIDTH or type(fields["duration_s"]) is not float \
            or type(fields["steps"]) is bool or type(fields["exit_code"]) is bool \
            or type(usage) is not Usage:
        return None  # (a width past the fields': a key ``model_copy(update=...)`` added)
    usage = _usage_data(usage)
    events = _events_data(fields["events"])
    evidence = _evidence_json(fields["evidence"])
    if usage is None or events is None or evidence is None:
        return None
    data = fields.copy()
    data["events"] = events
    data["usage"] = usage
    data["evidence"] = evidence
    workspace, simulator = fields["workspace"], fields["simulator"]
    if workspace is None:
        del data["workspace"]
    elif type(workspace) is WorkspaceFacts:  # rare: its own dump, with its exclusions
        data["workspace"] = workspace.model_dump(mode="json", fallback=repr)
    else:
        return None
    if fields["state"] is None:
        del data["state"]
    if simulator is None:
        del data["simulator"]
    elif type(simulator) is SimulatorUse:
        data["simulator"] = simulator.model_dump(mode="json", fallback=repr)
    else:
        return None
    return data


def _evidence_json(evidence: Any) -> orjson.Fragment | None:
    """The evidence map, written apart: ``Evidence`` is a ``str`` enum, which orjson
    writes by its value slowly under ``_OPTIONS`` and fast as the string it is without
    them (a str, int, dict or list subclass as its data, as pydantic writes one it does
    not expect; dates and dataclasses are still refused)."""
    if type(evidence) is not dict:
        return None
    try:
        return orjson.Fragment(orjson.dumps(evidence, option=_PLAIN_SUBCLASS))
    except (orjson.JSONEncodeError, TypeError):
        return None


#: ``_OPTIONS`` but for subclasses of str, int, dict and list, written as their data.
_PLAIN_SUBCLASS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _events_data(events: Any) -> list[dict[str, Any]] | None:
    if type(events) is not list:
        return None
    data: list[dict[str, Any]] = []
    for event in events:
        if type(event) is not Event:
            return None
        fields = event.__dict__
        t, turn = fields["t"], fields["turn"]
        if len(fields) != _EVENT_WIDTH or (t is not None and type(t) is not float) \
                or type(turn) is bool:
            return None
        if turn is None:
            fields = fields.copy()
            del fields["turn"]
        data.append(fields)
    return data


def _usage_data(usage: Usage) -> dict[str, Any] | None:
    fields = usage.__dict__
    cost = fields["cost_usd"]
    if len(fields) != _USAGE_WIDTH or (cost is not None and type(cost) is not float) \
            or type(fields["input_tokens"]) is bool or type(fields["output_tokens"]) is bool:
        return None
    return fields


_TRACE_WIDTH, _EVENT_WIDTH, _USAGE_WIDTH = len(_TRACE_FIELDS), len(_EVENT_FIELDS), \
    len(_USAGE_FIELDS)

"""A sampled production call: what is recorded, the trace it makes, what it is graded.

The hot path only copies (a call's input before it runs, its output after:
the caller may change either later); turning the record into a ``Trace``
and grading it (``sample_trace``, ``grade_sample``) run on the grader
thread, through the pure grading core — no store, no print.

A value that is not JSON (an object a pydantic model or a dataclass cannot
stand for) is not recorded: an input part shows as ``<not recorded: …>``;
an output leaves the trace's ``output`` evidence ``unavailable``, so its
checks are inconclusive and a person sees why, rather than a check passing
on what it never read.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ..model import Assertion, Event, Evidence, Trace
from ..model.storable import NotPlain, json_copy, plain_copy
from .buffer import Outcome

#: The longest reason kept with a queued item (notes may quote the output).
MAX_REASON = 2000


@dataclass(frozen=True)
class Recorded:
    """One sampled call as the trace records it."""

    input: Any
    output: Any
    status: str
    error: str | None
    duration_s: float
    #: Why the output was not observed (not JSON, cut at a cap); None when it was.
    unseen: str | None = None
    where: str = ""


class Sample(Protocol):
    """A sampled call, as put on the buffer; made into a :class:`Recorded` off the hot path."""

    @property
    def index(self) -> int:
        """The call's number (what the sampler drew on)."""
        ...

    def recorded(self) -> Recorded:
        """The call as the trace records it."""
        ...


@dataclass(frozen=True)
class CallSample:
    """A decorated function's call: its input and output were copied when it was made."""

    index: int
    record: Recorded

    def recorded(self) -> Recorded:
        """The call as the trace records it (already made)."""
        return self.record


def sample_trace(record: Recorded, facets: dict[str, str]) -> Trace:
    """The trace of one sampled call: its input as the first event, its output, its status.

    The output is ``observed`` evidence when it was seen whole, ``unavailable``
    when it was not (``record.unseen``), so no check passes on what it did not read.
    """
    given = record.input
    event = Event(kind="message", name="input", text=given) if isinstance(given, str) \
        else Event(kind="message", name="input", arguments=given)
    events = [event]
    if record.unseen is not None:
        events.append(Event(kind="error", text=record.unseen))
    seen = Evidence.OBSERVED if record.unseen is None else Evidence.UNAVAILABLE
    return Trace(output=record.output, status=record.status,  # type: ignore[arg-type]
                 error=record.error, events=events, duration_s=record.duration_s,
                 facets=facets, evidence={"output": seen})


def grade_sample(checks: list[Assertion], trace: Trace,
                 unseen: str | None = None) -> tuple[Outcome, str | None]:
    """The sample's outcome (pass, fail, inconclusive) and, unless it passed, why."""
    from ..checks import grade_trace
    from ..grading.fold import fold_trial

    trial = fold_trial(1, grade_trace(checks, trace), trace=trace)
    if trial.outcome == "pass":
        return "pass", None
    # fold_trial calls a trial broken only when told it never ran; a sample ran.
    outcome: Outcome = "fail" if trial.outcome == "fail" else "inconclusive"
    reason = trial.reason or trial.outcome
    if unseen is not None and trial.outcome == "inconclusive":
        reason = f"{unseen}: not graded"
    if trace.error and trace.status == "error":
        reason = f"{reason} ({trace.error})"
    if len(reason) > MAX_REASON:
        reason = reason[:MAX_REASON - 1] + "…"
    return outcome, reason


class _NotJson(Exception):  # noqa: N818 - a signal
    pass


def _copy(value: Any) -> Any:
    """``value`` as plain JSON data, copied now (the caller may change it later); _NotJson."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    try:
        return plain_copy(value)
    except NotPlain:
        pass
    try:
        return json_copy(value)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        if hasattr(value, "model_dump"):  # a pydantic model
            return json_copy(value.model_dump(mode="json"))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return json_copy(dataclasses.asdict(value))
    except Exception:  # noqa: BLE001 - a value we cannot read is not recorded, that is all
        pass
    raise _NotJson(type(value).__name__)


def _unrecorded(kind: str) -> str:
    return f"<not recorded: a {kind} is not JSON>"


def call_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call's input, copied now: its one argument, else ``{"args": [...], "kwargs": {...}}``."""
    def one(value: Any) -> Any:
        try:
            return _copy(value)
        except _NotJson as kind:
            return _unrecorded(str(kind))
        except Exception as exc:  # noqa: BLE001 - recording never breaks the call
            return _unrecorded(type(exc).__name__)

    if len(args) == 1 and not kwargs:
        return one(args[0])
    return {"args": [one(a) for a in args], "kwargs": {str(k): one(v) for k, v in kwargs.items()}}


def returned(index: int, given: Any, output: Any, started: float, where: str) -> CallSample:
    """A call that returned ``output``, copied now: the caller may change it afterwards."""
    duration = time.perf_counter() - started
    unseen = None
    try:
        copied = _copy(output)
    except _NotJson as kind:
        copied, unseen = None, f"the function returned a {kind}, which is not JSON"
    except Exception as exc:  # noqa: BLE001 - recording never breaks the call
        copied, unseen = None, f"the output could not be copied ({type(exc).__name__})"
    return CallSample(index, Recorded(given, copied, "ok", None, duration, unseen, where))


def raised(index: int, given: Any, exc: Exception, started: float, where: str) -> CallSample:
    """A call that raised ``exc`` (it is re-raised to the caller; its text is recorded)."""
    duration = time.perf_counter() - started
    return CallSample(index, Recorded(given, None, "error", describe(exc), duration, None, where))


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, even one whose ``__str__`` raises."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a hostile __str__
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

"""``python:pkg.module:function`` — an agent that is a Python callable (SPEC §4)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import io
import math
import os
import platform
import sys
import time
from typing import Any

from ..errors import HarnessFailure
from ..importing import ImportFailed, resolve_function
from ..install_hints import agent_module
from ..model import Event, Evidence, Status, Trace
from ..model.storable import json_copy
from ..model.trace import harness_trace, message_event
from .agent_tools import Tools
from .base import TargetOptions, TrialBroken, TrialRequest, case_facets, evidence
from .capture import captured
from .capture import sink as _sink
from .conversation import ScriptedUser, Talk, by_turn, conversation
from .identity import identity_digest, python_identity
from .threads import AgentCrash, AgentThreads
from .wire.capture import Recorder, recording
from .wire.capture import current as wire_current


class AgentError(Exception):
    """Raise from an agent to end the trial with status ``error`` (not a crash)."""


class Refused(Exception):  # noqa: N818 - the user's word for it
    """Raise from an agent to end the trial with status ``refused``."""


_BASIC = (str, int, float, bool, type(None))

#: Why a case's model or effort pin does not reach a Python agent.
UNPINNABLE = "a python: agent picks its own model and effort"


def _json_output(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise TrialBroken(f"agent returned {value}, which is not JSON (it has no NaN or infinity)")
    if isinstance(value, _BASIC):
        return value
    try:
        return json_copy(value)
    except (TypeError, ValueError) as exc:
        raise TrialBroken(f"agent returned a value that is not JSON ({type(value).__name__}): "
                          f"{exc}") from None


def _span_collection(uri: str) -> Any:
    """``otel_live`` with its collector installed; ``HarnessFailure`` when it cannot be."""
    try:
        from . import otel_live
    except ImportError:
        from ..install_hints import extra

        raise HarnessFailure(f"target {uri}: --otel collects spans with the OpenTelemetry "
                             f"SDK, and {extra('otel', 'opentelemetry-sdk')}") from None
    otel_live.install()
    return otel_live


def _talker(uri: str, cls: type) -> tuple[str, ...]:
    """The keywords a class agent is made with (``system``, ``tools``: those its
    constructor names); one with no ``reply`` method is no agent."""
    if not callable(getattr(cls, "reply", None)):
        raise HarnessFailure(f"target {uri}: a class agent answers each message with a "
                             f"reply(message) method, and {cls.__name__} has none")
    try:
        names = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return ()
    return tuple(name for name in ("system", "tools") if name in names)


def _message(value: Any) -> str:
    """A single question as a class agent's one message: text as it is, else JSON."""
    from .conversation import reply_text

    return reply_text(value)


def _so_far(said: list[Event], recorded: list[Event], turn: int) -> list[Event]:
    """A conversation cut short: the turns done (``said``), then what the agent recorded
    in the turn under way (its tools' events ``said`` has not taken yet), in that turn."""
    taken = sum(1 for e in said if e.kind not in ("user", "reply"))
    return [*said, *(e.model_copy(update={"turn": turn}) for e in recorded[taken:])]


class PythonTarget:
    """Calls ``function(input)`` or ``function(input, tools)``; awaits it if async.

    Usage is what the agent says of itself through ``tools.usage``: inferred,
    not observed, and unavailable in a trial that never said it.
    """

    evidence = evidence(output="observed", tool_calls="observed", asks="observed",
                        tokens="inferred", cost="inferred", steps="observed")

    def __init__(self, uri: str, options: TargetOptions) -> None:
        self.uri = uri
        self.spec = uri.removeprefix("python:")
        self.options = options
        self.facets = {"harness": "python", "host_version": platform.python_version()}
        self._func: Any = None
        self._takes_tools = False
        self._is_async = False
        #: For a class with ``reply(message)`` (SPEC §16): the keywords it is made with.
        self._talker: tuple[str, ...] | None = None
        self._threads: AgentThreads | None = None
        self._capture: Any = None
        #: ``otel_live`` once started with ``--otel``: the spans of each trial are collected.
        self._spans: Any = None
        #: The price table the wire's token counts are priced by (loaded at start).
        self._prices: Any = None
        # The evidence map of a trace, by (tokens unreported, cost unreported).
        self._given = {
            (no_tokens, no_cost): {
                **self.evidence,
                **({"tokens": Evidence.UNAVAILABLE} if no_tokens else {}),
                **({"cost": Evidence.UNAVAILABLE} if no_cost else {})}
            for no_tokens in (False, True) for no_cost in (False, True)}
        # A trace's facets, by case id (a battery's cases have distinct ids).
        self._facets: dict[str, dict[str, str]] = {}
        #: Set at ``start``: whether ``run_sync`` may run this agent's single-input trials
        #: (a plain sync function, no ``--otel``): the battery's thread lane then does.
        self.sync_lane = False

    async def start(self) -> None:
        """Import the callable; a module that will not import is a harness failure."""
        try:
            self._func = resolve_function(self.spec, self.options.base_dir)
        except ValueError as exc:
            missing = exc.missing if isinstance(exc, ImportFailed) else None
            hint = "" if missing is None else f"; {agent_module(missing, sys.executable)}"
            raise HarnessFailure(f"target {self.uri}: {exc}{hint}") from None
        if inspect.isclass(self._func):
            self._talker = _talker(self.uri, self._func)
            self._is_async = inspect.iscoroutinefunction(getattr(self._func, "reply", None))
        self._is_async = self._is_async or inspect.iscoroutinefunction(self._func)
        try:
            params = [
                p for p in inspect.signature(self._func).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
            ]
        except (TypeError, ValueError):
            params = []
        self._takes_tools = len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
        # What the agent says to its model is seen on the wire, per trial (SPEC §15).
        from .wire.capture import install

        install()
        if self.options.otel:
            # After the import: a provider the agent's module set is the one to add to.
            self._spans = _span_collection(self.uri)
        from .prices import load_prices

        self._prices = load_prices()
        # The OpenAI Agents SDK uploads its traces to its vendor by default: a trial's
        # (a hidden case's) content must not leave the machine that way.
        os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
        # The agent runs in our process: its prints go to its trace, not our terminal.
        self._capture = captured()
        self._capture.__enter__()
        if not self._is_async:
            self._threads = AgentThreads(self.options.concurrency)
        self.sync_lane = not self._is_async and self._talker is None and self._spans is None

    def _args(self, request: TrialRequest, tools: Tools) -> tuple[Any, ...]:
        return (request.case.input, tools) if self._takes_tools else (request.case.input,)

    def _begin(self, request: TrialRequest,
               spans: Any = None) -> tuple[Tools, float, io.StringIO, Recorder]:
        """A trial's tools, start time, print buffer and wire recorder, with what it has
        recorded kept as its trace should it hang (``request.partial``)."""
        tools = Tools(request.tools, request.fixture, request.workspace)
        started = time.perf_counter()
        buffer = io.StringIO()
        recorder = Recorder(started)
        request.partial.keep(lambda: self._trace(request, tools, list(tools.events), None,
                                                 "timeout", None, started, buffer,
                                                 tools.tool_calls, recorder, spans))
        return tools, started, buffer, recorder

    async def run(self, request: TrialRequest) -> Trace:
        """One call of the agent; its exceptions are the trial's, not the battery's."""
        spans = self._spans.open_trial() if self._spans is not None else None
        tools, started, buffer, recorder = self._begin(request, spans)
        status: Status = "ok"
        error: str | None = None
        output: Any = None
        answered = False  # the agent returned or ended the trial itself
        talk = conversation(request)
        if talk is None and self._talker is not None:  # a single question: a one-turn talk
            talk = Talk(ScriptedUser([_message(request.case.input)]))
        said: list[Event] = []  # a conversation's turns so far, with their events
        if talk is not None:
            request.partial.keep(lambda: self._trace(
                request, tools, _so_far(said, tools.events, talk.turn), None, "timeout",
                None, started, buffer, tools.tool_calls, recorder, spans))
        try:
            with recording(recorder), self._collecting(spans):
                if talk is not None:
                    status, error, output = await self._converse(request, talk, tools, buffer,
                                                                 started, said)
                elif self._is_async:
                    token = _sink.set(buffer)
                    try:
                        output = await self._func(*self._args(request, tools))
                    finally:
                        _sink.reset(token)
                else:
                    output = await self._call_sync(request, tools, buffer)
            answered = True
        except AgentError as exc:
            status, error, answered = "error", str(exc), True
        except Refused as exc:
            status, error, answered = "refused", str(exc), True
        except AgentCrash as exc:
            raise TrialBroken(f"agent raised {exc}") from None
        except TrialBroken:
            raise  # the harness's own (a simulated user that failed), not the agent's
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the battery's own cancel: a timeout or an interrupt
            raise TrialBroken("agent raised CancelledError") from None
        except (Exception, SystemExit) as exc:
            raise TrialBroken(f"agent raised {type(exc).__name__}: {exc}") from None
        finally:
            if spans is not None and not answered:
                spans.close()  # broken, timed out or interrupted: nothing is waited for
        if spans is not None:
            await self._settled(spans)
        if talk is not None:
            replies = sum(1 for e in said if e.kind == "reply")
            return self._trace(request, tools, said, output, status, error, started, buffer,
                               tools.tool_calls + replies, recorder, spans)
        return self._answered(request, tools, output, status, error, started, buffer,
                              recorder, spans)

    def _answered(self, request: TrialRequest, tools: Tools, output: Any, status: Status,
                  error: str | None, started: float, buffer: io.StringIO, recorder: Recorder,
                  spans: Any = None) -> Trace:
        """The trace of a single input the agent answered (or ended with ``AgentError``
        or ``Refused``): its tools' events, then its final message."""
        output = _json_output(output)
        events = list(tools.events)
        if status == "ok":
            events.append(message_event(output if isinstance(output, str) else None))
        return self._trace(request, tools, events, output, status, error, started, buffer,
                           tools.tool_calls + 1, recorder, spans)

    def run_sync(self, request: TrialRequest) -> Trace:
        """The trial of ``run``, done whole in the calling thread (the battery's lane).

        Only where ``sync_lane`` says so (a plain sync function, no ``--otel``)
        and for a single input (no conversation): the battery's lane threads
        call it, and cut a hang at its timeout from outside, reading
        ``request.partial`` as it does for ``run``. The agent is called as
        ``_call_sync`` calls it — in a copy of this thread's context, its
        prints to the trial's buffer, its HTTP exchanges to the trial's
        recorder — and what it raises ends the trial as in ``run``.
        """
        tools, started, buffer, recorder = self._begin(request)
        status: Status = "ok"
        error: str | None = None
        output: Any = None
        try:
            output = contextvars.copy_context().run(self._call_here, request, tools, buffer,
                                                    recorder)
        except AgentError as exc:
            status, error = "error", str(exc)
        except Refused as exc:
            status, error = "refused", str(exc)
        except TrialBroken:
            raise
        except BaseException as exc:  # SystemExit too: the agent's crash, not assay's
            raise TrialBroken(f"agent raised {type(exc).__name__}: {exc}") from None
        return self._answered(request, tools, output, status, error, started, buffer, recorder)

    def _call_here(self, request: TrialRequest, tools: Tools, buffer: io.StringIO,
                   recorder: Recorder) -> Any:
        """The agent's call, inside the trial's own context (set here, never reset: the
        context is dropped with the call), as ``recording`` and ``_call_sync`` set it."""
        _sink.set(buffer)
        wire_current.set(recorder)
        try:
            return self._func(*self._args(request, tools))
        finally:
            recorder.close()

    async def _converse(self, request: TrialRequest, talk: Talk, tools: Tools,
                        buffer: io.StringIO, started: float,
                        said: list[Event]) -> tuple[Status, str | None, Any]:
        """The turns of a conversation (SPEC §16): the callable is handed the conversation
        so far each turn, or one instance of the class answers each message. Returns the
        status, the error and the last reply; ``said`` gets each turn's events."""
        agent: Any = None
        if self._talker is not None:
            given = {"system": talk.system, "tools": tools}
            agent = await self._invoke(lambda: self._func(
                **{name: given[name] for name in self._talker}), buffer, sync=True)
        output: Any = None
        message = await talk.next()
        while message is not None:
            said.append(talk.opened(t=time.perf_counter() - started))
            seen = len(tools.events)
            try:
                if agent is not None:
                    reply = await self._invoke(functools.partial(agent.reply, message), buffer)
                else:
                    history = talk.messages()
                    args = (history, tools) if self._takes_tools else (history,)
                    reply = await self._invoke(functools.partial(self._func, *args), buffer)
            except (AgentError, Refused) as exc:
                said.extend(tools.events[seen:])
                talk.stamp(said, 0)
                return ("refused" if isinstance(exc, Refused) else "error"), str(exc), None
            except (AgentCrash, Exception, SystemExit) as exc:
                if talk.turn == 1:
                    raise
                # A later turn's crash keeps the turns before it: a breach made in them
                # still fails the case (docs/decisions/0076).
                said.extend(tools.events[seen:])
                talk.stamp(said, 0)
                why = str(exc) if isinstance(exc, AgentCrash) else \
                    f"{type(exc).__name__}: {exc}"
                return "error", f"turn {talk.turn}: agent raised {why}", None
            output = _json_output(reply)
            said.extend(tools.events[seen:])
            said.append(talk.replied(output, t=time.perf_counter() - started))
            talk.stamp(said, 0)
            message = await talk.next()
        return "ok", None, output

    async def _invoke(self, call: Any, buffer: io.StringIO, *, sync: bool = False) -> Any:
        """``call()`` as the agent's: awaited when it gives an awaitable, else in an agent
        thread (or here, for a quick constructor: ``sync``), its prints to ``buffer``."""
        if self._is_async or sync:
            token = _sink.set(buffer)
            try:
                value = call()
                return await value if inspect.isawaitable(value) else value
            finally:
                _sink.reset(token)

        def run() -> Any:
            _sink.set(buffer)
            return call()

        assert self._threads is not None, "start() first"
        context = contextvars.copy_context()
        return await self._threads.run(lambda: context.run(run))

    def _collecting(self, spans: Any) -> Any:
        """The trial's span collection (``--otel``), else nothing."""
        if spans is None:
            return contextlib.nullcontext()
        return self._spans.collecting(spans)

    async def _settled(self, spans: Any) -> None:
        """Close the trial's span record, once what a framework makes later has come."""
        try:
            if self._spans.settles():
                await asyncio.to_thread(self._spans.settle)
        finally:
            spans.close()

    def _trace(self, request: TrialRequest, tools: Tools, events: list[Event], output: Any,
               status: Status, error: str | None, started: float, buffer: io.StringIO,
               steps: int, recorder: Recorder, spans: Any = None) -> Trace:
        spent = tools.spent
        # The Trace copies both maps as it validates them: shared ones are safe here.
        given = self._given[(spent.tokens is None, spent.cost_usd is None)]
        case = request.case
        # A case with no invocation and no pins adds no facets (``case_facets``): the
        # target's own, shared (``harness_trace`` copies them), for most cases of a suite.
        facets = self.facets if case.invocation is None and case.model is None \
            and case.effort is None else self._facets.get(case.id)
        if facets is None:
            if len(self._facets) >= 1024:  # the cases in flight, not the suite's
                self._facets.clear()
            facets = self._facets[case.id] = {
                **self.facets, **case_facets(case, "python", unpinnable=UNPINNABLE)}
        state = tools.state
        if state.broken is not None:
            raise TrialBroken(state.broken)
        if state.present:  # the final state is a fact assay saw (SPEC §14)
            given = {**given, "state": Evidence.OBSERVED}
        # Made as Trace(...) would make it, without validating what the harness made.
        trace = harness_trace(
            output=output, status=status, error=error, events=events, usage=spent,
            # A refusal is a final answer (settled), as it is from every other target.
            steps=steps, settled=status in ("ok", "refused"),
            duration_s=time.perf_counter() - started,
            stdout=buffer.getvalue(), facets=facets, evidence=given, state=state.value,
        )
        exchanges = recorder.exchanges()
        ran: list[dict[str, Any]] = []
        if spans is not None:
            try:
                from .otel import executed_tools

                ran = executed_tools(spans.spans())
                for record in ran:
                    Event(**record)  # what with_wire makes of it: checked here
            except Exception as exc:  # a reader's bug must not cost the trial its record
                note = f"the trial's spans could not be read ({type(exc).__name__})"
                trace = trace.model_copy(update={"facets": {**trace.facets, "otel": note}})
        if not exchanges and not ran:
            return trace
        # What its model said, seen on the wire, and the tools its spans say it ran,
        # merged once with its own record (docs/decisions/0070, 0071).
        from .wire.fold import read_exchanges
        from .wire.observed import with_wire

        facts = read_exchanges(exchanges, ask_tools=self.options.ask_tools,
                               prices=self._prices) if exchanges else None
        turns = [e for e in trace.events if e.kind in ("user", "reply")]
        if not turns:
            return with_wire(trace, facts, ran, self.options.ask_tools)
        # A conversation: the wire's events go to the turns they happened in.
        own = trace.model_copy(update={"events": [e for e in trace.events
                                                  if e.kind not in ("user", "reply")]})
        merged = with_wire(own, facts, ran, self.options.ask_tools)
        return merged.model_copy(update={"events": by_turn([*turns, *merged.events])})

    async def _call_sync(self, request: TrialRequest, tools: Tools, buffer: io.StringIO) -> Any:
        def call() -> Any:
            _sink.set(buffer)
            return self._func(*self._args(request, tools))

        assert self._threads is not None, "start() first"
        context = contextvars.copy_context()
        return await self._threads.run(lambda: context.run(call))

    async def close(self) -> None:
        """Stop taking work; an agent thread stuck in a hang is left behind, not waited for."""
        if self._threads is not None:
            self._threads.close()
        if self._capture is not None:
            self._capture.__exit__(None, None, None)
            self._capture = None

    def identity(self) -> dict[str, str]:
        """The URI and the source of the agent's module and the local modules it imports.

        Taken after ``start`` (the module is imported then); before it, the URI alone.
        """
        module = sys.modules.get(self.spec.partition(":")[0])
        if self._func is None or module is None:
            return {"uri": self.uri}
        return python_identity(self.uri, module)

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())

"""The ``tools`` object a Python agent is handed: every call is recorded (SPEC §4)."""

from __future__ import annotations

import copy
import inspect
import math
import time
from pathlib import Path
from typing import Any

from ..importing import resolve_function
from ..model import Event, Usage
from ..model.fixture import FixtureTool, ToolFixture
from ..model.storable import json_copy
from ..model.trace import no_usage
from ..model.values import same


def json_value(value: Any, what: str) -> Any:
    """``value`` as plain JSON data, or ``TypeError``: a trace must stay storable."""
    if isinstance(value, str | int | bool) or value is None:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    try:
        return json_copy(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be JSON values, not {type(value).__name__}") from None


def takes_state(handler: Any) -> bool:
    """Whether a handler takes a second parameter: the fixture's state (SPEC §14)."""
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


class FixtureState:
    """One trial's copy of a tool fixture's ``state`` (SPEC §14).

    A handler with a second parameter is called with ``(arguments, state)``
    and may change the state in place. After each such call the state must
    still be JSON; if it is not, ``broken`` says why and the trial is broken
    (its final state could be neither stored nor checked).
    """

    def __init__(self, fixture: ToolFixture | None) -> None:
        self.present = fixture is not None and fixture.has_state
        self.value: Any = copy.deepcopy(fixture.state) if fixture is not None and \
            self.present else None
        self.broken: str | None = None

    def answer(self, tool: FixtureTool, arguments: Any, base_dir: Path | None) -> Any:
        """What ``tool`` answers, its handler given this state when it takes one."""
        if tool.handler is None:
            return fixture_result(tool, arguments, base_dir)
        handler = resolve_function(tool.handler, base_dir)
        if not takes_state(handler):
            return handler(arguments)
        try:
            return handler(arguments, self.value)
        finally:
            self._still_json(tool.name)

    def _still_json(self, name: str) -> None:
        if self.broken is not None:
            return
        try:
            json_copy(self.value)
        except (TypeError, ValueError, RecursionError) as exc:
            self.broken = (f"the tool fixture's state is not JSON after tool {name!r} changed "
                           f"it: {exc}")


def fixture_result(tool: FixtureTool, arguments: Any, base_dir: Path | None) -> Any:
    """What a fixture tool answers to ``arguments``: handler, first matching ``when``, or result."""
    if tool.handler is not None:
        return resolve_function(tool.handler, base_dir)(arguments)
    if tool.results is not None:
        for entry in tool.results:
            if entry.when is None or _matches(entry.when, arguments):
                return entry.result
        return None
    return tool.result


def _matches(when: dict[str, Any], arguments: Any) -> bool:
    if not isinstance(arguments, dict):
        return False
    return all(key in arguments and same(arguments[key], value) for key, value in when.items())


class Tools:
    """Records what an agent does through it; answers from the case's fixture.

    ``call(name, arguments)`` records a tool call and returns the fixture's
    result (None without one); ``ask(question)`` records an ask and returns
    the fixture's answer; ``usage(...)`` adds tokens and cost. ``workspace``
    is the folder the trial works in, when its case has one: trials share
    the process, so it is here and not in the environment.
    """

    def __init__(self, fixture: ToolFixture | None = None, fixture_path: Path | None = None,
                 workspace: Path | None = None):
        self._fixture = fixture
        self.fixture = fixture_path
        #: The trial's own copy of the case's workspace folder (SPEC §14), or None.
        self.workspace = workspace
        #: The trial's copy of the fixture's state, which handlers change (SPEC §14).
        self.state = FixtureState(fixture)
        self.events: list[Event] = []
        self.spent = no_usage()
        self._start = time.perf_counter()
        self._calls = 0

    def _t(self) -> float:
        return round(time.perf_counter() - self._start, 6)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """Call tool ``name`` with ``arguments``; the call and its result are recorded."""
        self._calls += 1
        call_id = f"call-{self._calls}"
        arguments = json_value({} if arguments is None else arguments, "tool arguments")
        self.events.append(Event(kind="tool_call", name=name, arguments=arguments,
                                 call_id=call_id, t=self._t()))
        tool = self._fixture.tool(name) if self._fixture is not None else None
        base = self.fixture.parent if self.fixture is not None else None
        try:
            result = self.state.answer(tool, arguments, base) if tool is not None else None
            result = json_value(result, f"the result of tool {name!r}")
        except Exception as exc:
            self.events.append(Event(kind="tool_result", name=name, call_id=call_id,
                                     result=f"{type(exc).__name__}: {exc}", is_error=True,
                                     t=self._t()))
            raise
        self.events.append(Event(kind="tool_result", name=name, call_id=call_id,
                                 result=result, t=self._t()))
        return result

    def ask(self, question: str, tool: str = "ask_user") -> Any:
        """Ask a person; recorded as an ask, answered from the fixture's ``answers``."""
        self.events.append(Event(kind="ask", name=tool, text=question, t=self._t()))
        answers = self._fixture.answers if self._fixture is not None else {}
        answer = answers.get(tool)
        self.events.append(Event(kind="answer", name=tool, result=answer, t=self._t()))
        return answer

    def usage(self, input_tokens: int | None = None, output_tokens: int | None = None,
              cost_usd: float | None = None) -> None:
        """Add what a model call cost, as the agent says (its evidence is ``inferred``).

        Tokens and cost are separate facts: a call that gives either token
        count reports tokens (the other counting 0), one that gives
        ``cost_usd`` reports cost; what no call gave stays unreported.
        """
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                raise TypeError(f"tools.usage: {name} must be a whole number ≥ 0, not {value!r}")
        if cost_usd is not None and (isinstance(cost_usd, bool)
                                     or not isinstance(cost_usd, int | float)
                                     or not math.isfinite(cost_usd) or cost_usd < 0):
            raise TypeError(f"tools.usage: cost_usd must be a number ≥ 0, not {cost_usd!r}")
        counted = input_tokens is not None or output_tokens is not None
        self.spent = self.spent.add(Usage(
            input_tokens=(input_tokens or 0) if counted else None,
            output_tokens=(output_tokens or 0) if counted else None,
            cost_usd=None if cost_usd is None else float(cost_usd)))

    @property
    def tool_calls(self) -> int:
        """How many tool calls were made."""
        return self._calls

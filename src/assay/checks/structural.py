"""Structural checks: rules on what the agent did, read from its trace (SPEC §3).

Which tool it called with which arguments, in what order, whether it asked
first, how many steps and how much money it took: these are facts in the
trace, so they are asserted exactly (PRINCIPLES 1) and are binary over trials
(SPEC §5: one breach in any trial fails the case).

A fact the target did not report (steps, whether the trial settled, an exit
code) makes the verdict ``inconclusive``, never a pass (PRINCIPLES 3). How
strongly the target vouches for each kind of fact is weighed before any of
these rules runs (``apply.verdict``); each check names the fact it reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any

from ..model import Assertion, Trace
from ..model.values import is_number, is_whole, one_line, short, type_name
from .apply import required_evidence
from .arguments import (
    Call,
    assign,
    call_matches,
    calls_of,
    describe_call,
    describe_miss,
    describe_pattern,
    fate_miss,
    first_miss,
    prepare_call,
    unreadable,
)
from .registry import Check, Judgement, LoadContext, register


def _calls(trace: Trace) -> list[Call]:
    return calls_of(trace.events)


def _first(pattern: dict[str, Any], calls: list[Call]) -> Call | None:
    return next((c for c in calls if call_matches(pattern, c)), None)


def _nearest(pattern: dict[str, Any], calls: list[Call]) -> str:
    """Why no call fits: the first call of the right name and what was wrong with it."""
    named = [c for c in calls if fnmatchcase(c.event.name or "", pattern["tool"])]
    # Nearest is a call with the right arguments and the wrong fate, else the first of
    # the right name.
    for call in named:
        if first_miss(pattern, call.event.arguments) is None:
            why = fate_miss(pattern, call)
            if why is not None:
                return f"; nearest: {describe_call(call.event, call.number)}: {why}"
    for call in named:
        miss = first_miss(pattern, call.event.arguments)
        if miss is not None:
            return f"; nearest: {describe_call(call.event, call.number)}: {describe_miss(miss)}"
    if not calls:
        return "; no tool was called"
    names = list(dict.fromkeys(c.event.name or "?" for c in calls))
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"; tools called: {', '.join(names[:5])}{more}"


# --- never_calls, calls, calls_before ----------------------------------------------------


def _prepare_forbidden(arg: Any, ctx: LoadContext) -> Any:
    items = arg if isinstance(arg, list) else [arg]
    if not items or arg is None:
        raise ValueError("expects a tool-name glob, {tool, args}, or a list of these")
    return [prepare_call(item) for item in items]


def _never_calls(assertion: Assertion, trace: Trace) -> Judgement:
    patterns: list[dict[str, Any]] = assertion.arg
    calls = _calls(trace)
    breaches = [c for c in calls if any(call_matches(p, c) for p in patterns)]
    if breaches:
        first = breaches[0]
        more = f" (and {len(breaches) - 1} more forbidden)" if len(breaches) > 1 else ""
        asked = any(("denied" in p or "result" in p) and call_matches(p, first)
                    for p in patterns)
        return Judgement("fail", f"called {describe_call(first.event, first.number)}"
                         f"{_fate(first) if asked else ''}{more}", breach=True)
    unsure = [(c.number, c.event) for c in calls if any(unreadable(p, c.event) for p in patterns)]
    if unsure:
        number, event = unsure[0]
        return Judgement("inconclusive", f"call {number} to {event.name} has arguments that are "
                         f"{type_name(event.arguments)}, not an object: cannot tell if forbidden")
    return Judgement("pass", "no call to " + " or ".join(describe_pattern(p) for p in patterns))


def _prepare_times(value: Any) -> int:
    if not is_whole(value, 0):
        raise ValueError(f"times is a whole number ≥ 0, not {short(value)}")
    return value


def _prepare_calls(arg: Any, ctx: LoadContext) -> Any:
    if isinstance(arg, list):
        if not arg:
            raise ValueError("expects at least one call in the list")
        for item in arg:
            if isinstance(item, dict) and "times" in item:
                raise ValueError("times counts the calls of one pattern; in a list of "
                                 "parallel calls, write the call as many times as expected")
        return [prepare_call(item) for item in arg]
    if arg is None:
        raise ValueError("expects a tool-name glob, {tool, args, times, strict} or a list")
    pattern = prepare_call(arg, extra=("times",))
    if isinstance(arg, dict) and "times" in arg:
        pattern["times"] = _prepare_times(arg["times"])
    return pattern


def _calls_check(assertion: Assertion, trace: Trace) -> Judgement:
    calls = _calls(trace)
    if isinstance(assertion.arg, list):
        return _parallel(assertion.arg, calls)
    pattern: dict[str, Any] = assertion.arg
    matched = [c for c in calls if call_matches(pattern, c)]
    found = [c.number for c in matched]
    times = pattern.get("times")
    what = describe_pattern(pattern)
    # The evidence of a denial or a result the pattern asked about: the first match's.
    fate = _fate(matched[0]) if matched and ("denied" in pattern or "result" in pattern) else ""
    if times is None:
        if found:
            return Judgement("pass", f"{len(found)} call(s) to {what}{fate}")
        return Judgement("fail", f"no call to {what}{_nearest(pattern, calls)}")
    if len(found) == times:
        return Judgement("pass", f"{times} call(s) to {what}{fate}")
    where = f" (calls {', '.join(map(str, found[:10]))})" if found else _nearest(pattern, calls)
    return Judgement("fail", f"{len(found)} call(s) to {what}, expected exactly {times}{where}")


def _fate(call: Call) -> str:
    """What became of a call, for a note: the denial's words or the result."""
    if call.denial is not None:
        return f"; call {call.number} was denied: {one_line(call.denial, 160)}"
    if call.answer is not None:
        return f"; call {call.number} answered {short(call.answer.result, 120)}"
    return f"; no result was recorded for call {call.number}"


def _parallel(patterns: list[dict[str, Any]], calls: list[Call]) -> Judgement:
    pairing = assign(patterns, calls, call_matches)
    if pairing.complete:
        return Judgement("pass", f"all {len(patterns)} expected calls made, one call each")
    i = pairing.partner.index(None)
    head = f"expected call {i + 1} of {len(patterns)}, {describe_pattern(patterns[i])}"
    taken = pairing.candidates[i]
    if not taken:
        return Judgement("fail", f"{head}: no call fits{_nearest(patterns[i], calls)}")
    numbers = ", ".join(str(calls[j].number) for j in taken[:10])
    return Judgement("fail", f"{head}: the calls that fit it ({numbers}) are each needed by "
                     "another expected call")


def _prepare_before(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, list) or len(arg) != 2:
        raise ValueError("expects [A, B]: two calls (globs or {tool, args}), A before B")
    return [prepare_call(item) for item in arg]


def _calls_before(assertion: Assertion, trace: Trace) -> Judgement:
    first, then = assertion.arg
    calls = _calls(trace)
    b = _first(then, calls)
    if b is None:
        return Judgement("pass", f"{describe_pattern(then)} never called")
    a = _first(first, calls)
    if a is None:
        return Judgement("fail", f"{describe_call(b.event, b.number)} with no "
                         f"{describe_pattern(first)} before it")
    if a.number < b.number:
        return Judgement("pass", f"{first['tool']} (call {a.number}) before {then['tool']} "
                         f"(call {b.number})")
    # Both were seen, in the wrong order: a breach. B with no A seen at all (above) is
    # not one: weaker evidence than the check needs may have missed the A.
    return Judgement("fail", f"{describe_call(b.event, b.number)} came before the first "
                     f"{describe_pattern(first)} (call {a.number})", breach=True)


# --- asks, settles, steps, cost, exit code -----------------------------------------------


def _prepare_asks(arg: Any, ctx: LoadContext) -> Any:
    if arg is None or arg is True:
        return True
    if isinstance(arg, dict) and set(arg) == {"before"}:
        return {"before": prepare_call(arg["before"])}
    raise ValueError("expects true or {before: TOOL}")


def _asks(assertion: Assertion, trace: Trace) -> Judgement:
    asks = [i for i, e in enumerate(trace.events) if e.kind == "ask"]
    if assertion.arg is True:
        if asks:
            return Judgement("pass", f"asked {len(asks)} time(s)")
        return Judgement("fail", "never asked")
    before: dict[str, Any] = assertion.arg["before"]
    have, need = trace.evidence_for("tool_calls"), required_evidence(assertion, "tool_calls")
    if not have.satisfies(need):
        return Judgement("inconclusive", f"tool_calls evidence is {have.value}; asks before a "
                         f"call needs {need.value}")
    call = _first(before, _calls(trace))
    if call is None:
        return Judgement("pass", f"{describe_pattern(before)} never called")
    number, index, event = call.number, call.at, call.event
    if asks and asks[0] < index:
        return Judgement("pass", f"asked before {event.name} (call {number})")
    return Judgement("fail", f"{describe_call(event, number)} before any ask")


def _prepare_true(arg: Any, ctx: LoadContext) -> Any:
    if arg is None or arg is True:
        return True
    raise ValueError(f"takes no argument (or true), not {short(arg)}")


def _settles(assertion: Assertion, trace: Trace) -> Judgement:
    if trace.settled is None:
        return Judgement("inconclusive", "the target did not say whether the trial settled")
    if trace.settled:
        return Judgement("pass", "ended with a final answer")
    why = f": {trace.error}" if trace.error else ""
    return Judgement("fail", f"did not settle: ended with status {trace.status}{why}")


def _count(what: str) -> Callable[[Any, LoadContext], Any]:
    def prepare(arg: Any, ctx: LoadContext) -> Any:
        if not is_whole(arg, 0):
            raise ValueError(f"expects {what}, not {short(arg)}")
        return arg

    return prepare


def _within_steps(assertion: Assertion, trace: Trace) -> Judgement:
    if trace.steps is None:
        return Judgement("inconclusive", "the target did not count steps")
    if trace.steps <= assertion.arg:
        return Judgement("pass", f"{trace.steps} step(s)")
    return Judgement("fail", f"{trace.steps} steps, more than {assertion.arg}", breach=True)


def _prepare_cost(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, dict) or not arg or set(arg) - {"usd", "tokens"}:
        raise ValueError("expects {usd: X} and/or {tokens: N}")
    usd, tokens = arg.get("usd"), arg.get("tokens")
    if usd is not None and (not is_number(usd) or not math.isfinite(usd) or usd < 0):
        raise ValueError(f"usd is a number ≥ 0, not {short(usd)}")
    if tokens is not None and not is_whole(tokens, 0):
        raise ValueError(f"tokens is a whole number ≥ 0, not {short(tokens)}")
    return arg


def _costs_at_most(assertion: Assertion, trace: Trace) -> Judgement:
    # Tokens and cost are separate facts; the evidence of each was weighed
    # before this runs, so an unreported figure does not get here as 0.
    usage = trace.usage
    usd, tokens = assertion.arg.get("usd"), assertion.arg.get("tokens")
    spent_usd, spent_tokens = usage.cost_usd, usage.tokens
    if (usd is not None and spent_usd is None) or (tokens is not None and spent_tokens is None):
        return Judgement("inconclusive", "the usage this budget reads was not reported")
    over, spent = [], []
    if usd is not None and spent_usd is not None:
        spent.append(_usd(spent_usd))
        # Summed prices carry float noise: $0.1 + $0.2 is within a $0.3 budget.
        if spent_usd > usd and not math.isclose(spent_usd, usd, rel_tol=1e-9):
            over.append(f"{_usd(spent_usd)} > {_usd(usd)}")
    if tokens is not None and spent_tokens is not None:
        spent.append(f"{spent_tokens} tokens")
        if spent_tokens > tokens:
            over.append(f"{spent_tokens} tokens > {tokens}")
    if over:
        return Judgement("fail", "over budget: " + ", ".join(over), breach=True)
    return Judgement("pass", ", ".join(spent))


def _usd(value: float) -> str:
    """Dollars to six significant digits, never in exponent form: $0.000069, not $6.9e-05."""
    return "$" + format(Decimal(f"{value:.6g}"), "f")


def _cost_facts(arg: Any) -> tuple[str, ...]:
    """A token budget reads tokens, a USD budget cost; both, both."""
    if not isinstance(arg, dict):
        return ("cost",)
    return tuple(f for f, key in (("tokens", "tokens"), ("cost", "usd")) if key in arg) or ("cost",)


def _prepare_exit(arg: Any, ctx: LoadContext) -> Any:
    if not is_whole(arg):
        raise ValueError(f"expects a whole number, not {short(arg)}")
    return arg


def _exit_code(assertion: Assertion, trace: Trace) -> Judgement:
    if trace.exit_code is None:
        return Judgement("inconclusive", "the target reported no exit code")
    if trace.exit_code == assertion.arg:
        return Judgement("pass", f"exit code {trace.exit_code}")
    return Judgement("fail", f"exit code {trace.exit_code}, expected {assertion.arg}")


# --- skills ------------------------------------------------------------------------------


def _globs(arg: Any, *, many: bool) -> list[str]:
    items = arg if many and isinstance(arg, list) else [arg]
    if not items or not all(isinstance(g, str) and g for g in items):
        raise ValueError("expects a skill name or glob" + (", or a list of them" if many else ""))
    return list(items)


def _skills(trace: Trace) -> list[str]:
    return [e.name or "" for e in trace.events if e.kind == "skill"]


def _activates_skill(assertion: Assertion, trace: Trace) -> Judgement:
    glob: str = assertion.arg
    used = [s for s in _skills(trace) if fnmatchcase(s, glob)]
    if used:
        return Judgement("pass", f"activated {used[0]}")
    seen = ", ".join(dict.fromkeys(_skills(trace))) or "none"
    return Judgement("fail", f"no skill matching {glob} was activated (activated: {seen})")


def _never_activates_skill(assertion: Assertion, trace: Trace) -> Judgement:
    globs: list[str] = assertion.arg
    used = [s for s in _skills(trace) if any(fnmatchcase(s, g) for g in globs)]
    if used:
        return Judgement("fail", f"activated {used[0]}", breach=True)
    return Judgement("pass", "no skill matching " + " or ".join(globs))


def _register_all() -> None:
    def structural(name: str, fact: str, evaluate: Any, prepare: Any,
                   facts_of: Any = None, *, breaches: bool = False) -> None:
        register(Check(name, "structural", fact, evaluate, prepare, takes_path=False,
                       facts_of=facts_of, breaches=breaches))

    # The negative checks (breaches=True) fail on what they see, at any evidence but
    # unavailable (SPEC §5): a forbidden call or skill, a call out of order, a limit passed.
    structural("never_calls", "tool_calls", _never_calls, _prepare_forbidden, breaches=True)
    structural("calls", "tool_calls", _calls_check, _prepare_calls)
    structural("calls_before", "tool_calls", _calls_before, _prepare_before, breaches=True)
    structural("asks", "asks", _asks, _prepare_asks)
    structural("settles", "steps", _settles, _prepare_true)
    structural("within_steps", "steps", _within_steps, _count("a whole number of steps ≥ 0"),
               breaches=True)
    structural("costs_at_most", "cost", _costs_at_most, _prepare_cost, _cost_facts,
               breaches=True)
    structural("exit_code", "exit_code", _exit_code, _prepare_exit)
    structural("activates_skill", "skills", _activates_skill,
               lambda a, c: _globs(a, many=False)[0])
    structural("never_activates_skill", "skills", _never_activates_skill,
               lambda a, c: _globs(a, many=True), breaches=True)


_register_all()

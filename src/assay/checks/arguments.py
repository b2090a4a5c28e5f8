"""Which recorded call a pattern describes: tool-name globs and argument matching (SPEC §3).

A structural check names calls by pattern, ``{tool, args, strict}``: the tool
is a glob (``erp.*``) and each named argument is a literal or a *matcher*.
Literals compare as JSON values do everywhere in assay (``values.same``:
numbers as numbers, strings exactly, objects and lists exactly and in full).

A list argument is matched by membership with ``{includes: M}``: some item
of the list meets M, itself a literal or a matcher; ``{icase: [...]}``
compares a whole list with the strings inside it folded to one case.

A mapping in an argument's place is always a matcher with exactly one key;
an object is compared literally only through ``{equals: {...}}``. That costs a
few characters and buys safety: a misspelt matcher (``{regexp: ATTACKER}``)
is refused at load time instead of silently becoming an object that no call
ever equals, which would make a ``never_calls`` pass forever.

A pattern may also name what became of the call: ``result: M`` (the value
the tool answered meets M, a literal or a matcher) and ``denied: true|false``
(the host, a sandbox, a permission rule or the tool itself refused the call:
its result is an error, or the host recorded a denial for it). A call's
result is found by its ``call_id``, else as the next result of the same tool
(:func:`calls_of`); a call with no result recorded was not *seen* denied, so
``denied: false`` counts it — the safe reading for ``never_calls``
(docs/decisions/0064-call-results.md).

Expected parallel calls are paired with actual calls by a maximum one-to-one
assignment (Kuhn's augmenting paths), not greedily: a greedy pairing can hand
the one call that suits a strict pattern to a loose one and reject a correct
answer.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from ..model import Event
from ..model.values import JSON_TYPES, json_type_matches, one_line, same, short, type_name

E = TypeVar("E")
A = TypeVar("A")

MATCHERS = ("any_of", "regex", "type", "absent", "icase", "includes", "equals")

#: Keys of a call pattern; ``times`` only where a check counts calls.
PATTERN_KEYS = ("tool", "args", "strict", "result", "denied")

#: Stands for an argument the call did not pass (``None`` is a value: JSON null).
MISSING: Any = object()


# --- load time ---------------------------------------------------------------------------


def prepare_call(spec: Any, *, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """A call pattern from a glob or ``{tool, args, strict}``; raises ``ValueError``."""
    if isinstance(spec, str):
        spec = {"tool": spec}
    if not isinstance(spec, dict):
        raise ValueError(f"a call is a tool-name glob or {{tool, args}}, not {type_name(spec)}")
    unknown = [str(k) for k in spec if k not in PATTERN_KEYS + extra]
    if unknown:
        allowed = ", ".join(PATTERN_KEYS + extra)
        raise ValueError(f"unknown key {unknown[0]!r} in a call (allowed: {allowed})")
    tool = spec.get("tool")
    if not isinstance(tool, str) or not tool:
        raise ValueError("a call needs tool: a tool-name glob such as erp.*")
    pattern: dict[str, Any] = {"tool": tool}
    if "args" in spec:
        pattern["args"] = prepare_args(spec["args"])
    strict = spec.get("strict", False)
    if not isinstance(strict, bool):
        raise ValueError(f"strict is true or false, not {short(strict)}")
    if strict:
        pattern["strict"] = True
    if "result" in spec:
        _check_expected(spec["result"], "result")
        pattern["result"] = spec["result"]
    if "denied" in spec:
        if not isinstance(spec["denied"], bool):
            raise ValueError(f"denied is true or false, not {short(spec['denied'])}")
        pattern["denied"] = spec["denied"]
    return pattern


def prepare_args(args: Any) -> dict[str, Any]:
    """Validate an ``args`` mapping: argument names to literals or matchers."""
    if not isinstance(args, dict):
        raise ValueError(f"args is a mapping of argument names to expected values, "
                         f"not {type_name(args)}")
    for name, expected in args.items():
        if not isinstance(name, str):
            raise ValueError(f"argument names are strings, not {short(name)}")
        _check_expected(expected, f"argument {name!r}")
    return args


def _check_literal(value: Any, where: str) -> None:
    # YAML reads an unquoted 2024-05-01 as a date, which no JSON argument ever equals:
    # in a never_calls pattern that would be a rule that can never be broken.
    if isinstance(value, list):
        for item in value:
            _check_literal(item, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: object keys are strings, not {short(key)}")
            _check_literal(item, where)
    elif not isinstance(value, str | int | float | bool) and value is not None:
        raise ValueError(f"{where}: {value!s} is a {type(value).__name__}, not a JSON value "
                         "(quote it to compare a string)")


def _check_expected(expected: Any, where: str, *, item: bool = False) -> None:
    # ``item``: ``expected`` describes an item of a list (inside ``includes``),
    # where ``absent`` has no meaning: an item is never left out.
    if not isinstance(expected, dict):
        _check_literal(expected, where)
        return
    keys = [str(k) for k in expected]
    unknown = [k for k in keys if k not in MATCHERS]
    if unknown:
        raise ValueError(
            f"{where}: unknown matcher {unknown[0]!r} (a mapping here is one of "
            f"{', '.join(MATCHERS)}; to compare an object, write {{equals: {{...}}}})")
    if len(keys) != 1:
        raise ValueError(f"{where}: a matcher has exactly one key, found {', '.join(keys)}")
    key = keys[0]
    value = expected[key]
    if key == "any_of":
        if not isinstance(value, list) or not value:
            raise ValueError(f"{where}: any_of is a non-empty list")
        for option in value:
            _check_expected(option, where, item=item)
    elif key == "includes":
        _check_expected(value, where, item=True)
    elif key == "absent" and item:
        raise ValueError(f"{where}: absent has no meaning for an item of a list (an item is "
                         "never left out); write absent beside includes, in any_of")
    elif key == "regex":
        if not isinstance(value, str):
            raise ValueError(f"{where}: regex is a string, not {type_name(value)}")
        try:
            _compiled(value)
        except re.error as exc:
            raise ValueError(f"{where}: bad regular expression {value!r}: {exc}") from None
    elif key == "type" and value not in JSON_TYPES:
        raise ValueError(f"{where}: type is one of {', '.join(JSON_TYPES)}, not {short(value)}")
    elif key == "absent" and not isinstance(value, bool):
        raise ValueError(f"{where}: absent is true or false, not {short(value)}")
    elif key == "icase":
        if not isinstance(value, str | list):
            raise ValueError(f"{where}: icase is a string or a list, not {type_name(value)}")
        _check_literal(value, where)
    elif key == "equals":
        _check_literal(value, where)


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# --- grade time --------------------------------------------------------------------------


class Call(NamedTuple):
    """One recorded tool call and what became of it."""

    #: The call's number among the trial's calls, from 1.
    number: int
    #: Its index in ``trace.events``.
    at: int
    event: Event
    #: The ``tool_result`` event that answered it, when one was recorded.
    answer: Event | None = None
    #: Why it was denied (the error result's or the host's own words), when it was.
    denial: str | None = None

    @property
    def denied(self) -> bool:
        """Whether the call was recorded as refused by the host, a rule or the tool."""
        return self.denial is not None


def calls_of(events: Sequence[Event]) -> list[Call]:
    """The tool calls among ``events``, each with its result and denial, in order.

    A result goes to the newest call with its ``call_id`` (a model may reuse
    ids across turns), else to the oldest unanswered call of the same tool.
    A call is denied when its result is an error, or, with no result, when
    an ``error`` event names its ``call_id`` (a host's permission denial).
    """
    calls: list[Call] = []
    by_id: dict[str, int] = {}
    waiting: defaultdict[str | None, deque[int]] = defaultdict(deque)
    for index, event in enumerate(events):
        if event.kind == "tool_call":
            if event.call_id is not None:
                by_id[event.call_id] = len(calls)
            waiting[event.name].append(len(calls))
            calls.append(Call(len(calls) + 1, index, event))
            continue
        if event.kind not in ("tool_result", "error"):
            continue
        at = by_id.get(event.call_id) if event.call_id is not None else None
        if at is None and event.kind == "tool_result":
            queue = waiting[event.name]
            while queue and calls[queue[0]].answer is not None:
                queue.popleft()
            at = queue.popleft() if queue else None
        if at is None:
            continue
        call = calls[at]
        if event.kind == "tool_result" and call.answer is None:
            # A host's own denial, recorded before the error result it caused, stands.
            denial = call.denial or (_error_text(event.result, "the tool answered an error")
                                     if event.is_error else None)
            calls[at] = call._replace(answer=event, denial=denial)
        elif event.kind == "error" and call.answer is None and call.denial is None:
            # An error with no result yet is the host refusing the call (Claude Code's
            # permission denial comes before the error result); after a result, an error
            # event adds nothing (codex notes a call it found only in its session record).
            calls[at] = call._replace(denial=event.text or "an error was recorded for it")
    return calls


def _error_text(result: Any, default: str) -> str:
    if isinstance(result, str):
        return result or default
    return default if result is None else short(result, 200)


def value_matches(expected: Any, value: Any) -> bool:
    """Whether an argument's ``value`` (or ``MISSING``) meets ``expected``."""
    if not isinstance(expected, dict):
        return value is not MISSING and same(value, expected)
    ((key, arg),) = expected.items()
    if key == "any_of":
        return any(value_matches(item, value) for item in arg)
    if key == "absent":
        return (value is MISSING) is arg
    if value is MISSING:
        return False
    if key == "regex":
        return isinstance(value, str) and _compiled(arg).search(value) is not None
    if key == "type":
        return json_type_matches(value, arg)
    if key == "icase":
        return isinstance(value, type(arg)) and same(_folded(value), _folded(arg))
    if key == "includes":
        return isinstance(value, list) and any(value_matches(arg, item) for item in value)
    return same(value, arg)  # equals


def _folded(value: Any) -> Any:
    """``value`` with every string in it (inside lists and objects too) case-folded."""
    if isinstance(value, str):
        return value.casefold()
    if isinstance(value, list):
        return [_folded(item) for item in value]
    if isinstance(value, dict):
        return {key: _folded(item) for key, item in value.items()}
    return value


class Miss(NamedTuple):
    """Why a call's arguments do not fit: the argument, what was expected, what came."""

    name: str
    expected: Any
    value: Any


_EXTRA: Any = object()
_NOT_AN_OBJECT = "(arguments)"


def first_miss(pattern: dict[str, Any], arguments: Any) -> Miss | None:
    """The first argument of ``arguments`` that does not fit ``pattern``, or None."""
    args: dict[str, Any] = pattern.get("args", {})
    strict = pattern.get("strict", False)
    if not args and not strict:
        return None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return Miss(_NOT_AN_OBJECT, None, arguments)
    for name, expected in args.items():
        value = arguments.get(name, MISSING)
        if not value_matches(expected, value):
            return Miss(name, expected, value)
    if strict:
        for name in arguments:
            if name not in args:
                return Miss(name, _EXTRA, arguments[name])
    return None


def call_matches(pattern: dict[str, Any], call: Call) -> bool:
    """Whether a call fits a pattern: name by glob, then arguments, then what became of it."""
    return (fnmatchcase(call.event.name or "", pattern["tool"])
            and first_miss(pattern, call.event.arguments) is None
            and fate_miss(pattern, call) is None)


def fate_miss(pattern: dict[str, Any], call: Call) -> str | None:
    """Why what became of ``call`` does not fit the pattern's ``result``/``denied``, or None."""
    denied = pattern.get("denied")
    if denied is not None and call.denied != denied:
        if denied:
            return "it was not denied" if call.answer is not None else \
                "no result or denial was recorded for it"
        return f"it was denied ({one_line(call.denial or '', 120)})"
    if "result" in pattern:
        value = call.answer.result if call.answer is not None else MISSING
        if not value_matches(pattern["result"], value):
            if value is MISSING:
                return "no result was recorded for it"
            return (f"its result is {short(value, 60)}, expected "
                    f"{describe_expected(pattern['result'])}")
    return None


def unreadable(pattern: dict[str, Any], event: Event) -> bool:
    """A call of the right name whose arguments are not an object the pattern could read."""
    return (
        ("args" in pattern or "strict" in pattern)
        and fnmatchcase(event.name or "", pattern["tool"])
        and event.arguments is not None
        and not isinstance(event.arguments, dict)
    )


# --- notes -------------------------------------------------------------------------------


def describe_expected(expected: Any) -> str:
    """An expected argument in a few words: ``"A-1"``, ``/^ATT/``, ``a string``."""
    if not isinstance(expected, dict):
        return short(expected, 60)
    ((key, arg),) = expected.items()
    if key == "any_of":
        return "any of " + ", ".join(describe_expected(item) for item in arg)
    if key == "regex":
        return f"/{arg}/"
    if key == "type":
        return f"a value of type {arg}"
    if key == "absent":
        return "absent" if arg else "present"
    if key == "icase":
        return f"{short(arg, 60)} in any case"
    if key == "includes":
        return f"a list including {describe_expected(arg)}"
    return short(arg, 60)


def describe_miss(miss: Miss) -> str:
    """Why one call did not fit, for a note."""
    if miss.name == _NOT_AN_OBJECT:
        return f"its arguments are {type_name(miss.value)}, not an object"
    if miss.expected is _EXTRA:
        return f"unexpected argument {miss.name!r} (strict)"
    if miss.value is MISSING:
        return f"argument {miss.name!r} is missing (expected {describe_expected(miss.expected)})"
    return (f"argument {miss.name!r} is {short(miss.value, 60)}, expected "
            f"{describe_expected(miss.expected)}")


def describe_pattern(pattern: dict[str, Any]) -> str:
    """A call pattern for a note: ``erp.refund {order: "A-1"}``."""
    args = pattern.get("args")
    tool: str = pattern["tool"]
    if not args:
        text = tool + (" with no arguments" if pattern.get("strict") else "")
    else:
        inner = ", ".join(f"{name}: {describe_expected(e)}" for name, e in args.items())
        text = f"{tool} {{{inner}}}"
    if "result" in pattern:
        text += f" answering {describe_expected(pattern['result'])}"
    if pattern.get("denied") is True:
        text += ", denied"
    elif pattern.get("denied") is False:
        text += ", not denied"
    return text


def describe_call(event: Event, number: int | None = None) -> str:
    """A recorded call for a note, arguments shortened: ``erp.transfer {"to": …} (call 3)``."""
    text = f"{event.name} {short(event.arguments, 120)}"
    return f"{text} (call {number})" if number is not None else text


# --- one-to-one assignment ---------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """A maximum pairing of expected items with actual ones.

    ``partner[i]`` is the actual index given to expected item ``i`` (or None);
    ``candidates[i]`` lists every actual index that item could take.
    """

    partner: list[int | None]
    candidates: list[list[int]]

    @property
    def complete(self) -> bool:
        """Every expected item has its own partner."""
        return all(p is not None for p in self.partner)


def assign(
    expected: Sequence[E], actual: Sequence[A], fits: Callable[[E, A], bool]
) -> Assignment:
    """Pair each expected item with a distinct actual one, as many as possible (Kuhn).

    For every expected item in turn, an augmenting path may move earlier
    pairs to other partners to make room; so the result is a maximum
    matching whatever the order of either list.
    """
    candidates = [[j for j, a in enumerate(actual) if fits(e, a)] for e in expected]
    owner: list[int | None] = [None] * len(actual)

    def augment(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            holder = owner[j]
            if holder is None or augment(holder, seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    partner: list[int | None] = [None] * len(expected)
    for j, holder in enumerate(owner):
        if holder is not None:
            partner[holder] = j
    return Assignment(partner, candidates)

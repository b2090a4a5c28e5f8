"""The reference-free checks of a suite: what can grade traffic no case was written for.

Online sampling and the MCP proxy grade calls that real users made, not the
cases of a suite. Only an assertion whose verdict does not depend on the
case it was written for can judge such a call: a prohibition (``never_calls``,
``not_contains``, ``never_activates_skill``), a bound (``within_steps``,
``costs_at_most``), a shape (``status: ok``, ``type``, ``schema``), whether the
agent finished (``settles``), or the author's own ``grader``. An expected
value (``equals``, ``contains``, ``approx``, ``one_of`` …), a call the case
requires (``calls``, ``calls_before``, ``asks``), a status one input was
meant to provoke (``status: refused``) or a judge's reading against a
reference (``judge``, ``rubric``, ``similar``) says nothing about an input
nobody anticipated, so it is left out (``why_not`` says why, per check).
Of a suite's budgets (``within_steps``, ``costs_at_most``) the loosest is
kept: a case's budget is its own; the loosest is the one every input had.

Pure: it reads a loaded suite and returns assertions. Only public cases are
read: a hidden case's assertions may quote its content (PRINCIPLES 5), and a
check that only a hidden case holds would turn a sampled call's verdict into
a hint about the hidden set. Shared by the proxy (``sampling.proxy``,
docs/decisions/0040-mcp-proxy.md) and online sampling (``sampling.online``,
docs/decisions/0039-online.md).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..model import Assertion, Suite

#: Checks whose verdict holds for any input: they may grade traffic no case anticipated.
REFERENCE_FREE = frozenset({
    "status", "type", "schema", "not_contains",
    "never_calls", "never_activates_skill", "settles", "within_steps", "costs_at_most",
    "grader",
})
#: The one ``status`` every call should end in; ``error``, ``refused`` and ``timeout``
#: are what one case's input was meant to provoke.
STATUS_ANY_INPUT = "ok"
#: Budgets: of a suite's (per check, path, units, ``min_evidence`` and ``breach_evidence``)
#: the loosest is kept.
BUDGETS = frozenset({"within_steps", "costs_at_most"})

#: Why the other checks do not grade traffic, by name.
WHY_NOT: dict[str, str] = {
    "equals": "compares with one case's answer",
    "one_of": "compares with one case's answers",
    "approx": "compares with one case's number",
    "contains": "looks for one case's answer in the output",
    "icontains": "looks for one case's answer in the output",
    "regex": "usually matches one case's answer (a format rule is a schema with a pattern)",
    "min_rows": "counts the rows one case's input has",
    "max_rows": "counts the rows one case's input has",
    "calls": "asks for the calls one case's task needs",
    "calls_before": "asks for an order one case's task needs",
    "asks": "asks for a question one case's task needs",
    "activates_skill": "asks for the skill one case's task needs",
    "exit_code": "an exit code is a process's; a call has none",
    "judge": "judged checks do not grade traffic in this version (a judge call per sample "
             "costs money, and its criteria are usually written for one case)",
    "rubric": "judged checks do not grade traffic in this version",
    "similar": "compares with one case's reference text",
}


def why_not(assertion: Assertion) -> str | None:
    """Why ``assertion`` cannot grade a call no case was written for (None: it can)."""
    if assertion.check == "status" and assertion.arg != STATUS_ANY_INPUT:
        return (f"status: {assertion.arg} is what one case's input was meant to provoke; "
                f"only status: {STATUS_ANY_INPUT} holds for every call")
    if assertion.check in REFERENCE_FREE:
        return None
    return WHY_NOT.get(assertion.check, "not known to hold for every input")


def is_reference_free(assertion: Assertion) -> bool:
    """Whether ``assertion`` can judge a call no case of its suite was written for."""
    return why_not(assertion) is None


def reference_free(suite: Suite) -> list[Assertion]:
    """The suite's reference-free assertions over its public cases, each once, in the
    order they first appear; of its budgets, the loosest.

    Two assertions are the same when they name the same check with the same
    argument and modifiers, written in the same file (a grader's module is
    found beside the file that names it).
    """
    return _unique(_loosest(a for case in suite.public_cases() for a in case.expect
                            if is_reference_free(a)))


def left_out(suite: Suite) -> list[str]:
    """The checks of the suite's public cases that ``reference_free`` leaves out, by name,
    each once (to say why a suite has nothing to grade traffic with)."""
    names = (a.check for case in suite.public_cases() for a in case.expect
             if not is_reference_free(a))
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class SetAside:
    """A public check that does not grade traffic, and why (its label only: public content)."""

    assertion: str
    case: str
    why: str


@dataclass(frozen=True)
class Selection:
    """The checks that grade traffic, and the public ones that do not (with why)."""

    checks: list[Assertion]
    set_aside: list[SetAside] = field(default_factory=list)


def select(suite: Suite, observed: Collection[str]) -> Selection:
    """``reference_free(suite)`` less the checks that read a fact the recording does not
    observe, and every public check left out, each with why.

    ``observed``: the kinds of fact (``model.FACTS``) the recording vouches
    for. A decorated function shows its return value (``output``), not the
    tool calls, steps or cost inside it: a ``never_calls`` would be
    inconclusive on every sample, so it is set aside instead.
    """
    from ..checks import lookup

    def unseen(assertion: Assertion) -> list[str]:
        check = lookup(assertion.check)
        facts = check.facts(assertion.arg) if check is not None else ()
        return [fact for fact in facts if fact not in observed]

    aside: list[SetAside] = []
    for case in suite.public_cases():
        for assertion in case.expect:
            reason = why_not(assertion)
            missing = unseen(assertion) if reason is None else []
            if missing:
                reason = f"reads {', '.join(missing)}, which the recording does not observe"
            if reason is not None:
                aside.append(SetAside(assertion.label(), case.id, reason))
    checks = [a for a in reference_free(suite) if not unseen(a)]
    return Selection(checks, aside)


def _unique(assertions: Iterable[Assertion]) -> list[Assertion]:
    seen: set[tuple[str, str | None]] = set()
    kept: list[Assertion] = []
    for assertion in assertions:
        # ``model_dump`` leaves out the line and file (they are excluded fields);
        # the file is kept apart since a grader's meaning depends on it.
        key = (json.dumps(assertion.model_dump(mode="json"), sort_keys=True, default=repr),
               assertion.file)
        if key not in seen:
            seen.add(key)
            kept.append(assertion)
    return kept


def _loosest(assertions: Iterable[Assertion]) -> list[Assertion]:
    """``assertions`` with each group of like budgets as its loosest, where the first was."""
    given = list(assertions)
    loosest: dict[str, Assertion] = {}
    for assertion in given:
        if assertion.check in BUDGETS:
            key = _budget_key(assertion)
            held = loosest.get(key)
            loosest[key] = assertion if held is None else _looser(held, assertion)
    kept: list[Assertion] = []
    placed: set[str] = set()
    for assertion in given:
        if assertion.check not in BUDGETS:
            kept.append(assertion)
            continue
        key = _budget_key(assertion)
        if key not in placed:
            placed.add(key)
            kept.append(loosest[key])
    return kept


def _budget_key(assertion: Assertion) -> str:
    units = sorted(assertion.arg) if isinstance(assertion.arg, dict) else None
    evidence = assertion.min_evidence.value if assertion.min_evidence else None
    breach = assertion.breach_evidence.value if assertion.breach_evidence else None
    return json.dumps({"check": assertion.check, "path": assertion.path, "units": units,
                       "min_evidence": evidence, "breach_evidence": breach}, sort_keys=True)


def _looser(held: Assertion, other: Assertion) -> Assertion:
    """``held`` with each limit raised to ``other``'s where that is larger (same units)."""
    arg: Any
    if isinstance(held.arg, dict) and isinstance(other.arg, dict):
        arg = {unit: max(held.arg[unit], other.arg[unit]) for unit in held.arg}
    else:
        arg = max(held.arg, other.arg)
    return held if arg == held.arg else held.model_copy(update={"arg": arg})

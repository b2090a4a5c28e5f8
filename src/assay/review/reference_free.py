"""The checks a suite can apply to a production call: the reference-free ones (SPEC §10).

A production call has no case: nobody wrote down its expected answer. A
check can grade it only if its verdict does not depend on the case it was
written for — a rule that holds for any input (the output is valid against
a schema, never says "Traceback", the agent never calls ``erp.transfer``),
not an answer to one input (the total is "42.00"). Which checks are of that
kind is decided here, by name and, for ``status``, by argument; the reasons
are in docs/decisions/0039-online.md. Pure: no store, no thread, no print.

Only public cases are read. A hidden case's checks are not used, whatever
they are: their arguments are secret (a ``not_contains`` would put its text
in every queued reason), and grading production traffic with them would let
whoever sees the queue learn what the hidden set tests.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..canonical import canonical
from ..model import Assertion, Suite

#: Checks whose verdict holds for any input, with the argument they need to be so
#: (None: any argument). ``status`` only as ``ok``: ``error``, ``refused`` and
#: ``timeout`` are what one input was meant to provoke.
REFERENCE_FREE: dict[str, frozenset[Any] | None] = {
    "status": frozenset({"ok"}),
    "type": None,
    "schema": None,
    "not_contains": None,
    "never_calls": None,
    "never_activates_skill": None,
    "settles": None,
    "within_steps": None,
    "costs_at_most": None,
    "grader": None,
}

#: Why the other checks are not used online, by name.
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
    "exit_code": "an exit code is a process's; a production call has none",
    "judge": "judged checks are not graded online in this version (a judge call per sample "
             "costs money and its criteria are usually written for one case)",
    "rubric": "judged checks are not graded online in this version",
    "similar": "compares with one case's reference text",
}

#: Budgets: the loosest of a suite's (per check, path and unit) is the one every input had.
BUDGETS = ("within_steps", "costs_at_most")


@dataclass(frozen=True)
class SetAside:
    """A public check not used online, and why (its label only: public content)."""

    assertion: str
    case: str
    why: str


@dataclass(frozen=True)
class Selection:
    """The checks an online wrapper grades with, and the public ones it does not use."""

    checks: list[Assertion]
    set_aside: list[SetAside] = field(default_factory=list)


def why_not(assertion: Assertion) -> str | None:
    """Why ``assertion`` is not reference-free (None: it is)."""
    if assertion.check in REFERENCE_FREE:
        allowed = REFERENCE_FREE[assertion.check]
        if allowed is None or assertion.arg in allowed:
            return None
        return (f"{assertion.check}: {assertion.arg} is what one case's input was meant to "
                "provoke; only status: ok holds for every call")
    return WHY_NOT.get(assertion.check, "not known to hold for every input")


def select(suite: Suite, observed: Collection[str]) -> Selection:
    """The reference-free checks of ``suite``'s public cases that read only ``observed`` facts.

    ``observed``: the kinds of fact (``model.FACTS``) the online recording vouches
    for — a function's return value is ``output``; tool calls, steps and cost
    a decorator does not see. Checks are deduplicated across cases; of
    budgets, the loosest is kept. Order: first appearance in the suite.
    """
    from ..checks import lookup

    kept: dict[str, Assertion] = {}
    budgets: dict[str, Assertion] = {}
    aside: list[SetAside] = []
    for case in suite.public_cases():
        for assertion in case.expect:
            reason = why_not(assertion)
            check = lookup(assertion.check)
            if reason is None and check is not None:
                unseen = [f for f in check.facts(assertion.arg) if f not in observed]
                if unseen:
                    reason = (f"reads {', '.join(unseen)}, which the online recording does "
                              "not observe")
            if reason is not None:
                aside.append(SetAside(assertion.label(), case.id, reason))
                continue
            if assertion.check in BUDGETS:
                key = _budget_key(assertion)
                held = budgets.get(key)
                budgets[key] = assertion if held is None else _loosest(held, assertion)
                kept.setdefault(key, assertion)
            else:
                kept.setdefault(_key(assertion), assertion)
    checks = [budgets.get(key, assertion) for key, assertion in kept.items()]
    return Selection(checks, aside)


def _key(assertion: Assertion) -> str:
    body = assertion.model_dump(mode="json")
    if assertion.check == "grader":  # resolved beside the file that names it
        body["base"] = str(Path(assertion.file).parent) if assertion.file else None
    return canonical(body).decode()


def _budget_key(assertion: Assertion) -> str:
    units = sorted(assertion.arg) if isinstance(assertion.arg, dict) else None
    evidence = assertion.min_evidence.value if assertion.min_evidence else None
    return canonical({"check": assertion.check, "path": assertion.path, "units": units,
                      "min_evidence": evidence}).decode()


def _loosest(held: Assertion, other: Assertion) -> Assertion:
    """``held`` with each limit raised to ``other``'s where that is larger (same units)."""
    if isinstance(held.arg, dict) and isinstance(other.arg, dict):
        arg: Any = {unit: max(held.arg[unit], other.arg[unit]) for unit in held.arg}
    else:
        arg = max(held.arg, other.arg)
    return held if arg == held.arg else held.model_copy(update={"arg": arg})

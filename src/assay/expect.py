"""Assertion helpers for suites written in Python (``*_eval.py``).

Each helper returns the same ``Assertion`` the YAML form produces, and
remembers the line it was written on so that a bad argument is reported
there::

    from assay import Case, Suite, expect

    suite = Suite(id="demo/arith@1", target="python:agent:add", cases=[
        Case(id="two", input=[1, 1], expect=[expect.equals(2), expect.type("integer")]),
    ])
"""

from __future__ import annotations

import sys
from typing import Any

from .model import Assertion, Evidence


def check(
    name: str,
    arg: Any = None,
    *,
    path: str | None = None,
    min_evidence: Evidence | str | None = None,
    threshold: float | None = None,
    breach_evidence: Evidence | str | None = None,
    _depth: int = 1,
) -> Assertion:
    """Any assertion by its SPEC §3 name, e.g. ``check("never_calls", ["erp.*"])``."""
    frame = sys._getframe(_depth)
    return Assertion(
        check=name,
        arg=arg,
        path=path,
        min_evidence=Evidence(min_evidence) if min_evidence is not None else None,
        threshold=threshold,
        breach_evidence=Evidence(breach_evidence) if breach_evidence is not None else None,
        line=frame.f_lineno,
        file=frame.f_code.co_filename,
    )


def status(value: str) -> Assertion:
    """The trace's status is ``ok``, ``error``, ``refused`` or ``timeout``."""
    return check("status", value, _depth=2)


def equals(value: Any, *, path: str | None = None) -> Assertion:
    """The output (or the value at ``path``) equals ``value``; numbers compare as numbers."""
    return check("equals", value, path=path, _depth=2)


def type(name: str, *, path: str | None = None) -> Assertion:  # noqa: A001 - SPEC's name
    """The value is of JSON type ``name`` (string number integer boolean object array null)."""
    return check("type", name, path=path, _depth=2)


def min_rows(n: int, *, path: str | None = None) -> Assertion:
    """The array has at least ``n`` items."""
    return check("min_rows", n, path=path, _depth=2)


def max_rows(n: int, *, path: str | None = None) -> Assertion:
    """The array has at most ``n`` items."""
    return check("max_rows", n, path=path, _depth=2)


def contains(text: str, *, path: str | None = None) -> Assertion:
    """The text (or JSON text of the value) contains ``text``."""
    return check("contains", text, path=path, _depth=2)


def icontains(text: str, *, path: str | None = None) -> Assertion:
    """Like ``contains``, ignoring case."""
    return check("icontains", text, path=path, _depth=2)


def not_contains(text: str, *, path: str | None = None) -> Assertion:
    """The text (or JSON text of the value) does not contain ``text``."""
    return check("not_contains", text, path=path, _depth=2)


def regex(pattern: str, *, path: str | None = None) -> Assertion:
    """The text matches ``pattern`` somewhere (``re.search``)."""
    return check("regex", pattern, path=path, _depth=2)


def schema(json_schema: dict[str, Any], *, path: str | None = None) -> Assertion:
    """The value is valid against a JSON Schema."""
    return check("schema", json_schema, path=path, _depth=2)


def one_of(values: list[Any], *, path: str | None = None) -> Assertion:
    """The value equals one of ``values``."""
    return check("one_of", values, path=path, _depth=2)


def approx(value: float, tol: float = 1e-9, *, path: str | None = None) -> Assertion:
    """The number is within ``tol`` of ``value``."""
    return check("approx", {"value": value, "tol": tol}, path=path, _depth=2)


def grader(spec: str) -> Assertion:
    """A grader: ``module:function`` or ``./graders/x.py`` (relative to the suite file)."""
    return check("grader", spec, _depth=2)


# --- structural checks (SPEC §3): what the agent did, read from the trace ---


def never_calls(*tools: str | dict[str, Any]) -> Assertion:
    """No call of these tools (globs), or of ``{tool, args}`` with matching arguments.

    ``args`` values are literals or matchers, as in YAML:
    ``never_calls({"tool": "send_email", "args": {"to": {"includes": "x@evil.com"}}})``.
    """
    return check("never_calls", list(tools), _depth=2)


#: Stands for "not given" where ``None`` is a value someone may mean (a result of null).
_UNSET: Any = object()


def calls(tool: str | list[dict[str, Any]], *, args: dict[str, Any] | None = None,
          times: int | None = None, strict: bool | None = None, result: Any = _UNSET,
          denied: bool | None = None) -> Assertion:
    """A call of ``tool`` (glob) with matching ``args``; a list is a set of parallel calls.

    ``result`` names only calls whose result meets it (a value or a matcher);
    ``denied=True`` only calls the host, a rule or the tool refused.
    """
    if isinstance(tool, list):
        return check("calls", tool, _depth=2)
    spec: dict[str, Any] = {"tool": tool}
    for key, value in (("args", args), ("times", times), ("strict", strict),
                       ("denied", denied)):
        if value is not None:
            spec[key] = value
    if result is not _UNSET:
        spec["result"] = result
    return check("calls", spec if len(spec) > 1 else tool, _depth=2)


def calls_before(first: str | dict[str, Any], then: str | dict[str, Any]) -> Assertion:
    """The first call matching ``first`` precedes the first call matching ``then``."""
    return check("calls_before", [first, then], _depth=2)


def asks(*, before: str | None = None) -> Assertion:
    """The agent asked a person (before calling ``before``, when given)."""
    return check("asks", {"before": before} if before else True, _depth=2)


def settles() -> Assertion:
    """The agent ended with a final answer, not on a limit."""
    return check("settles", True, _depth=2)


def within_steps(n: int) -> Assertion:
    """The agent took at most ``n`` steps."""
    return check("within_steps", n, _depth=2)


def costs_at_most(*, usd: float | None = None, tokens: int | None = None) -> Assertion:
    """The trial cost at most ``usd`` dollars and/or ``tokens`` tokens (input + output)."""
    budget = {k: v for k, v in (("usd", usd), ("tokens", tokens)) if v is not None}
    return check("costs_at_most", budget, _depth=2)


def exit_code(code: int) -> Assertion:
    """The host process exited with ``code``."""
    return check("exit_code", code, _depth=2)


def activates_skill(name: str) -> Assertion:
    """The agent activated a skill matching ``name`` (glob)."""
    return check("activates_skill", name, _depth=2)


def never_activates_skill(*names: str) -> Assertion:
    """The agent activated no skill matching any of ``names`` (globs)."""
    return check("never_activates_skill", list(names), _depth=2)

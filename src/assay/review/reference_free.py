"""The reference-free checks of a suite: what can grade traffic no case was written for.

Online sampling and the MCP proxy grade calls that real users made, not the
cases of a suite. Only an assertion whose verdict does not depend on the
case it was written for can judge such a call: a prohibition (``never_calls``,
``not_contains``, ``never_activates_skill``), a bound (``within_steps``,
``costs_at_most``), a shape (``status``, ``type``, ``schema``), whether the
agent finished (``settles``), or the author's own ``grader``. An expected
value (``equals``, ``contains``, ``approx``, ``one_of`` …), a call the case
requires (``calls``, ``calls_before``, ``asks``) or a judge's reading against a
reference (``judge``, ``rubric``, ``similar``) says nothing about an input
nobody anticipated, so it is left out.

Pure: it reads a loaded suite and returns assertions. Only public cases are
read: a hidden case's assertions may quote its content (PRINCIPLES 5), and a
check that only a hidden case holds would turn a sampled call's verdict into
a hint about the hidden set. Written for the proxy (``review.proxy``) and
meant to be shared with online sampling (docs/decisions/0040-mcp-proxy.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..model import Assertion, Suite

#: Checks whose verdict holds for any input: they may grade traffic no case anticipated.
REFERENCE_FREE = frozenset({
    "status", "type", "schema", "not_contains",
    "never_calls", "never_activates_skill", "settles", "within_steps", "costs_at_most",
    "grader",
})


def is_reference_free(assertion: Assertion) -> bool:
    """Whether ``assertion`` can judge a call no case of its suite was written for."""
    return assertion.check in REFERENCE_FREE


def reference_free(suite: Suite) -> list[Assertion]:
    """The suite's reference-free assertions over its public cases, each once, in the
    order they first appear.

    Two assertions are the same when they name the same check with the same
    argument and modifiers, written in the same file (a grader's module is
    found beside the file that names it).
    """
    return _unique(a for case in suite.public_cases() for a in case.expect
                   if is_reference_free(a))


def left_out(suite: Suite) -> list[str]:
    """The checks of the suite's public cases that ``reference_free`` leaves out, by name,
    each once (to say why a suite has nothing to grade traffic with)."""
    names = (a.check for case in suite.public_cases() for a in case.expect
             if not is_reference_free(a))
    return list(dict.fromkeys(names))


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

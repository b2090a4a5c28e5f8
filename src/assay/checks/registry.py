"""The named assertions and what each needs (SPEC §3).

Each check family registers its checks here. A check has a name (the key a
suite writes), a family (binary ``output``/``structural`` or rate-based
``quality``), the kind of fact it reads (for evidence, SPEC §5), a
``prepare`` step that validates and normalises its argument when the suite
is loaded, and an ``evaluate`` step that judges one trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import Assertion, Trace
from ..model.result import Family, Outcome


@dataclass(frozen=True)
class LoadContext:
    """What a check may need when its argument is validated at load time."""

    base_dir: Path


@dataclass(frozen=True)
class Judgement:
    """What a check decided of one trace, before evidence is weighed."""

    outcome: Outcome
    note: str = ""
    provenance: str = ""
    #: A number the opinion gave (a rubric's weighted mean, a similarity), else None.
    score: float | None = None
    #: A ``fail`` that is a breach: something forbidden seen in the trace (a call, a
    #: skill, a call out of order, a limit passed), not something missing from it. A
    #: breach fails at any evidence but ``unavailable`` (SPEC §5, ``apply.verdict``).
    breach: bool = False


Prepare = Callable[[Any, LoadContext], Any]
Evaluate = Callable[[Assertion, Trace], Judgement]


def _keep(arg: Any, ctx: LoadContext) -> Any:
    return arg


@dataclass(frozen=True)
class Check:
    """One named assertion."""

    name: str
    family: Family
    fact: str
    evaluate: Evaluate
    prepare: Prepare = field(default=_keep)
    takes_path: bool = True
    #: Runs user code or a subprocess: the engine grades such suites off the loop.
    blocking: bool = False
    #: The facts one assertion reads when they depend on its argument
    #: (``costs_at_most: {tokens: N}`` reads tokens, ``{usd: X}`` cost); else ``fact``.
    facts_of: Callable[[Any], tuple[str, ...]] | None = None
    #: Judged on opinions (a judge's, a local model's) the battery asks for: ``judge``,
    #: ``rubric``, ``similar``. Their verdicts are read from those opinions.
    opinions: bool = False
    #: Its failures can be breaches (``Judgement.breach``): a negative check, which
    #: ``breach_evidence`` applies to.
    breaches: bool = False

    def facts(self, arg: Any) -> tuple[str, ...]:
        """The kinds of fact an assertion with this argument reads."""
        return self.facts_of(arg) if self.facts_of is not None else (self.fact,)


REGISTRY: dict[str, Check] = {}

#: Named in SPEC §3 but not available in this version: refused at load time
#: with a message that says so rather than "unknown" (none at present).
PLANNED: dict[str, str] = {}


def register(check: Check) -> Check:
    """Add ``check`` to the registry (a name is registered once)."""
    if check.name in REGISTRY:
        raise ValueError(f"check {check.name!r} registered twice")
    REGISTRY[check.name] = check
    return check


def lookup(name: str) -> Check | None:
    """The check called ``name``, or None."""
    return REGISTRY.get(name)


def reads_opinions(assertion: Assertion) -> bool:
    """Whether the assertion's verdict is read from opinions (``Check.opinions``)."""
    check = REGISTRY.get(assertion.check)
    return check is not None and check.opinions

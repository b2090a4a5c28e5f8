"""Suites, cases and assertions as validated data (SPEC §1–§3).

Both suite forms (YAML and Python) end up as these objects. Whether an
assertion's *name and argument* are known is checked by the loader against
the checks registry, so this module stays free of grading logic.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    WrapSerializer,
    field_validator,
    model_validator,
)

from .conversation import Message, SimulatedUser, check_user_model
from .evidence import Evidence
from .invocation import Invocation, Mode, parse_invocation
from .values import one_line

#: Why a case may not hold an infinity or a NaN: JSON has neither, so the case's
#: JSON (its digest, the report) would show ``null`` and two different cases would
#: be one case on record.
NOT_FINITE = ("holds an infinity or a NaN, which JSON has no way to write (its digest "
              "and the report would show null); write the number out or use a string")


def finite(value: Any, depth: int = 0) -> Any:
    """``value`` as it is, if no float in it (nested lists and mappings, keys too) is an
    infinity or a NaN; else ``ValueError``. Deep nesting is left to the digest, which
    refuses it anyway."""
    if isinstance(value, float):
        if value - value != 0.0:
            raise ValueError(NOT_FINITE)
    elif depth < 256:
        if isinstance(value, dict):
            for key, item in value.items():
                finite(key, depth + 1)
                finite(item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for item in value:
                finite(item, depth + 1)
    return value

SUITE_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*@[0-9]+$")
#: Longest case id: what every store holds (its column is 200 characters).
MAX_CASE_ID = 200
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

#: Keys that modify an assertion rather than name it.
MODIFIERS = ("path", "min_evidence", "threshold", "breach_evidence", "turn")

#: Checks that take the assertion's other keys as their own (SPEC §14): ``{file: F,
#: contains: x}`` is one ``file`` check whose argument holds ``contains``, and
#: ``{command: C, exit_code: 0, timeout_s: 60}`` one ``command`` check.
HEADED = ("file", "command")


def assertion_name(names: list[Any]) -> tuple[str, bool] | None:
    """The check an assertion's keys (modifiers left out) name, and whether it is headed;
    None when they name no single check."""
    heads = [k for k in names if k in HEADED]
    if len(heads) == 1:
        return str(heads[0]), True
    if len(names) == 1 and not heads:
        return str(names[0]), False
    return None

Split = Literal["public", "hidden"]

#: The targets a per-host pin map may name (``model: {claude: …, codex: …}``):
#: the ones that choose a model on a case's word.
PIN_HOSTS = ("claude", "codex", "openai")


def pin_problem(value: Any) -> tuple[str | None, str] | None:
    """What is wrong with a ``model``/``effort`` pin: (the map key at fault, why), or None.

    A pin is a name for every target, or a map from host to name, so one case
    can pin the model each host calls by its own name.
    """
    if value is None or (isinstance(value, str) and value):
        return None
    if not isinstance(value, dict):
        return None, "is a name, or a map from host to name such as {claude: …, codex: …}"
    if not value:
        return None, "an empty map pins nothing; give a name per host, e.g. {codex: …}"
    for key, name in value.items():
        if key not in PIN_HOSTS:
            return str(key), (f"{key!r} is not a host a pin map can name "
                              f"(hosts: {', '.join(PIN_HOSTS)})")
        if not isinstance(name, str) or not name:
            return str(key), f"the pin for {key} must be a non-empty name"
    return None


def pin_for(value: str | dict[str, str] | None, harness: str) -> str | None:
    """The pin a target with this harness takes: the name, or its host's entry in a map."""
    if isinstance(value, dict):
        return value.get(harness)
    return value


class Assertion(BaseModel):
    """One rule that turns a trace into a verdict.

    ``check`` is the assertion's name (``equals``, ``never_calls`` …) and
    ``arg`` its value. ``line`` and ``file`` mark where it was written, for
    error messages; they take no part in digests.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    check: str
    arg: Any = None
    path: str | None = None
    min_evidence: Evidence | None = None
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    #: The evidence a breach must be seen at to fail (SPEC §5). None (or ``inferred``): any
    #: level but ``unavailable``; ``observed``: a breach seen only at ``inferred`` is
    #: inconclusive instead.
    breach_evidence: Evidence | None = None
    #: The reply of a conversation an output check reads (SPEC §16), from 1; ``any``: each
    #: reply, and the check passes when one does (docs/decisions/0079); None: the last (the
    #: trial's output).
    turn: int | Literal["any"] | None = Field(default=None,
                                              exclude_if=lambda value: value is None)
    line: int | None = Field(default=None, exclude=True)
    file: str | None = Field(default=None, exclude=True)

    @classmethod
    def from_mapping(
        cls, data: Any, *, line: int | None = None, file: str | None = None
    ) -> Assertion:
        """Read the one-key form ``{equals: 3, path: $.x}`` of SPEC §3.

        A bare string (``- settles``) names a check with no argument.
        Raises ``ValueError`` with a user-facing message when the form is wrong.
        """
        if isinstance(data, Assertion):
            return data
        if isinstance(data, str):
            return cls(check=data, line=line, file=file)
        if not isinstance(data, dict):
            raise ValueError(
                f"an assertion is a mapping such as {{equals: 3}}, not {type(data).__name__}"
            )
        names = [k for k in data if k not in MODIFIERS]
        if not names:
            raise ValueError("the assertion names no check (only modifiers: "
                             + ", ".join(str(k) for k in data) + ")")
        named = assertion_name(names)
        if named is None:
            raise ValueError("one assertion names one check; found "
                             + ", ".join(str(k) for k in names))
        name, headed = named
        kwargs: dict[str, Any] = {k: data[k] for k in MODIFIERS if k in data}
        arg = {k: data[k] for k in names} if headed else data[name]
        return cls(check=name, arg=arg, line=line, file=file, **kwargs)

    @field_validator("turn", mode="before")
    @classmethod
    def _turn(cls, value: Any) -> Any:
        if value is None or value == "any" or (
                isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError(f"a reply's number, from 1, or any (each reply, one "
                         f"passing enough), not {value!r}")

    def label(self) -> str:
        """A short human name: ``equals $.rows[2].total``, ``file shop/total.py``."""
        name = self.check
        if name in HEADED and isinstance(self.arg, dict):
            head = self.arg.get(name)
            name = f"{name} {one_line(' '.join(head) if isinstance(head, list) else str(head), 60)}"
        elif name == "state" and isinstance(self.arg, dict) and \
                isinstance(self.arg.get("path"), str):
            name = f"state {self.arg['path']}"
        name = f"{name} {self.path}" if self.path else name
        return f"{name} (turn {self.turn})" if self.turn is not None else name


class Case(BaseModel):
    """One input with expectations."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    input: Any = None
    expect: list[Assertion] = Field(default_factory=list)
    split: Split = "public"
    trials: int | None = Field(default=None, ge=1)
    timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    fixture: str | None = None
    #: A folder every trial works in a fresh copy of (SPEC §14); the suite's when None.
    workspace: str | None = None
    tags: list[str] = Field(default_factory=list)
    #: The model (and reasoning effort) the case is pinned to: a name, or a map
    #: from host to name (``{claude: …, codex: …, openai: …}``).
    model: str | dict[str, str] | None = None
    effort: str | dict[str, str] | None = None
    synthetic: bool = False
    #: How the host comes to a skill (SPEC §2): a bare mode is a label; ``{mode, skill}``
    #: acts (``model.invocation``).
    invocation: Mode | Invocation | None = None
    #: The reference a judge's ``{expected}`` is filled with (SPEC §9): any JSON value.
    expected: Any = None
    #: A conversation (SPEC §16): the user's scripted messages, or a simulated user.
    turns: list[Message] | None = Field(default=None, min_length=1,
                                        exclude_if=lambda value: value is None)
    user: SimulatedUser | None = Field(default=None, exclude_if=lambda value: value is None)
    line: int | None = Field(default=None, exclude=True)
    file: str | None = Field(default=None, exclude=True)

    @field_validator("id")
    @classmethod
    def _case_id(cls, value: str) -> str:
        # A case id is a name, shown on every surface and stored as a key
        # (docs/decisions/0021-hostile-output.md); markup and any printable text are fine.
        if len(value) > MAX_CASE_ID:
            raise ValueError(f"a case id is at most {MAX_CASE_ID} characters "
                             f"(this one has {len(value)})")
        if _CONTROL.search(value):
            raise ValueError("a case id holds no control characters (newline, tab, escape, NUL…)")
        return value

    @field_validator("invocation", mode="before")
    @classmethod
    def _invocation(cls, value: Any) -> Any:
        return parse_invocation(value)

    @field_validator("input", "expected")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        return value if type(value) is str else finite(value)

    @field_validator("model", "effort", mode="before")
    @classmethod
    def _pin(cls, value: Any) -> Any:
        problem = pin_problem(value)
        if problem is not None:
            raise ValueError(problem[1])
        return value

    def model_for(self, harness: str) -> str | None:
        """The model this case pins for a target of this harness (None: not pinned)."""
        return pin_for(self.model, harness)

    def effort_for(self, harness: str) -> str | None:
        """The reasoning effort this case pins for a target of this harness."""
        return pin_for(self.effort, harness)

    @field_validator("expect", mode="before")
    @classmethod
    def _assertions(cls, value: Any) -> Any:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ValueError("expect is a list of assertions")
        made = [Assertion.from_mapping(item) for item in value]
        for assertion in made:  # its argument, as the other free-form values (_finite)
            if type(assertion.arg) is not str:
                try:
                    finite(assertion.arg)
                except ValueError as exc:
                    raise ValueError(f"the argument of {assertion.check} {exc}") from None
        return made

    @model_validator(mode="before")
    @classmethod
    def _where(cls, data: Any) -> Any:
        # Python-form cases remember where they were written, for errors. A
        # validator rather than an __init__: pydantic calls a model's own
        # __init__ for every case it validates, which doubled the cost of
        # loading a large YAML suite (whose cases come with their lines).
        if isinstance(data, dict) and "line" not in data:
            frame = sys._getframe(1)
            while frame.f_back is not None and str(
                frame.f_globals.get("__name__", "")
            ).startswith(("pydantic.", "pydantic_core.")):
                frame = frame.f_back
            data = {**data, "line": frame.f_lineno}
            data.setdefault("file", frame.f_code.co_filename)
        return data


def _as_list(cases: Sequence[Case], handler: SerializerFunctionWrapHandler) -> Any:
    # A loaded YAML suite holds its cases packed (``model.packed``): dumped as a list.
    return handler(cases if isinstance(cases, list) else list(cases))


class Suite(BaseModel):
    """A versioned set of cases for one capability: ``namespace/name@major``.

    Case ids must be unique; the loaders check that (``suites.build.check_unique``),
    where the line of the second one is known.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(alias="suite")
    title: str | None = None
    target: str | None = None
    call: dict[str, Any] | None = None
    trials: int = Field(default=1, ge=1)
    pass_mark: float = Field(default=1.0, ge=0.0, le=1.0)
    timeout_s: float = Field(default=60.0, gt=0)
    hidden: str | None = None
    #: The workspace of every case that names none (SPEC §14).
    workspace: str | None = None
    #: The suite's judge (SPEC §9): ``openai:MODEL``, ``claude:MODEL`` or
    #: ``python:module:function``; ``--judge`` overrides it.
    judge: str | None = None
    #: How long one judge call may take (SPEC §9 ``judge_timeout_s``).
    judge_timeout_s: float = Field(default=60.0, gt=0)
    #: Tools whose calls are questions to a person, for agents seen on the wire
    #: (SPEC §15 ``ask_tools``); unset, ``ask_user`` and ``ask_human``.
    ask_tools: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = None
    #: The model a case's simulated user is played by when it names none (SPEC §16);
    #: ``--user-model`` overrides it.
    user_model: str | None = None
    #: A list as written (a Python suite), or ``model.packed.PackedCases`` for a loaded
    #: YAML suite: a sequence either way, read in order or by position.
    cases: Annotated[Sequence[Case], WrapSerializer(_as_list)] = Field(default_factory=list)
    source: str | None = Field(default=None, exclude=True)

    @field_validator("id")
    @classmethod
    def _suite_id(cls, value: str) -> str:
        if not SUITE_ID.match(value):
            raise ValueError(
                f"suite id {value!r} is not of the form namespace/name@major "
                "(lower case, e.g. demo/extraction.table@1)"
            )
        return value

    @field_validator("user_model")
    @classmethod
    def _user_model(cls, value: str | None) -> str | None:
        return value if value is None else check_user_model(value)

    def public_cases(self) -> Sequence[Case]:
        """The cases anyone may read."""
        return self._of_split("public")

    def hidden_cases(self) -> Sequence[Case]:
        """The cases whose content never leaves the harness."""
        return self._of_split("hidden")

    def _of_split(self, split: Split) -> Sequence[Case]:
        # Cases still packed (``model.packed``, which builds on this module) are read as
        # they are used: the packed sequence answers by split itself.
        of_split = getattr(self.cases, "of_split", None)
        if of_split is not None:
            return of_split(split)  # type: ignore[no-any-return]
        return [c for c in self.cases if c.split == split]

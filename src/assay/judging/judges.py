"""Which judge a quality check asks: judge URIs and their precedence (SPEC §9).

A judge is named like a target: ``openai:MODEL`` (a model behind an
OpenAI-compatible server, ``--judge-base-url`` / ``ASSAY_JUDGE_BASE_URL``),
``claude:MODEL`` (the installed ``claude`` host as a semantic grader,
pinned to one model: a bare ``claude`` would let the host pick, and an
opinion whose model nobody chose cannot be compared with the next one) or
``python:pkg.module:function`` (a callable of the user's, given the
rendered prompt and returning the answer text: ``python_judge``).
A check's own ``model:`` may be a bare model name, which keeps the kind of
the judge it would otherwise get (``openai:`` when there is none); a
``python:`` judge has no models, so a bare name beside one is refused.

Precedence, strongest first (docs/decisions/0031-judges.md): the check's
``model:``, ``--judge``, ``ASSAY_JUDGE``, the suite's ``judge:``. Pure: the
environment is handed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

JudgeKind = Literal["openai", "claude", "python"]
KINDS: tuple[JudgeKind, ...] = ("openai", "claude", "python")

#: How a judge is written, for the messages that say so.
FORMS = "openai:MODEL, claude:MODEL or python:module:function"

#: ``pkg.module:function`` (or ``module:Class.method``): dotted Python names either side.
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_CALLABLE = re.compile(f"{_NAME}:{_NAME}", re.ASCII)

ENV_JUDGE = "ASSAY_JUDGE"
ENV_BASE_URL = "ASSAY_JUDGE_BASE_URL"


@dataclass(frozen=True, slots=True)
class JudgeRef:
    """A judge by kind and model: ``openai:judge-model``, ``claude:claude-sonnet-4-5``.

    For a ``python`` judge, ``model`` is the callable's path, ``pkg.module:function``.
    """

    kind: JudgeKind
    model: str

    @property
    def uri(self) -> str:
        """The judge as it is written."""
        return f"{self.kind}:{self.model}"


def parse_judge(text: str, *, default_kind: JudgeKind | None = None) -> JudgeRef:
    """A judge URI read; ``ValueError`` naming what is wrong.

    With ``default_kind``, a bare model name (no ``kind:``) is a model of that kind.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a judge is named as {FORMS}")
    text = text.strip()
    kind, sep, model = text.partition(":")
    if sep and kind == "python":
        return JudgeRef("python", _callable(text, model.strip()))
    if sep and kind in KINDS:
        if not model.strip():
            raise ValueError(f"the judge {text!r} names no model ({kind}:MODEL)")
        return JudgeRef(kind, model.strip())
    if text == "claude":
        raise ValueError("the claude judge is pinned to one model: write claude:MODEL")
    if text == "python":
        raise ValueError("a python judge names its callable: write python:module:function")
    if default_kind == "python" and not sep:
        raise ValueError(f"{text!r} is a bare model name, and a python: judge has no models: "
                         "write openai:MODEL, claude:MODEL or python:module:function")
    if default_kind is not None and not sep:
        return JudgeRef(default_kind, text)
    raise ValueError(f"{text!r} is not a judge: write {FORMS}")


def _callable(text: str, path: str) -> str:
    """The ``module:function`` of a ``python:`` judge, checked for its form only."""
    if not _CALLABLE.fullmatch(path):
        raise ValueError(f"{text!r} is not a python judge: write python:module:function "
                         "(a module the suite's folder can import, and a function in it)")
    return path


def resolve_judge(check_model: str | None, flag: str | None, suite_judge: str | None,
                  env: Mapping[str, str]) -> JudgeRef | None:
    """The judge one check asks, or None when nothing names one.

    ``ValueError`` for a judge written wrong, naming where it was written.
    """
    base: JudgeRef | None = None
    for source, value in (("the suite's judge", suite_judge), (ENV_JUDGE, env.get(ENV_JUDGE)),
                          ("--judge", flag)):
        if value:
            try:
                base = parse_judge(value)
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
    if check_model:
        try:
            return parse_judge(check_model, default_kind=base.kind if base else "openai")
        except ValueError as exc:
            raise ValueError(f"model: {exc}") from None
    return base

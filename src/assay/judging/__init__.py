"""Opinions: judges and rubrics (SPEC §9).

What this package exports is the pure core — prompt templates and reading a
judge's answer — with no I/O, no clock and no network. One model call is
``judging.client.ask``, through a client handed in; the ``similar`` check's
measure is ``judging.similarity``, on a local model. Both are imported where
they are used, never here.
"""

from __future__ import annotations

from .answers import JudgeAnswer, ScoreAnswer, fold_rubric, read_judge, read_score
from .templates import (
    JUDGE_TEMPLATE,
    RUBRIC_TEMPLATE,
    check_template,
    default_template,
    prompt_digest,
    render,
)

__all__ = [
    "JUDGE_TEMPLATE",
    "RUBRIC_TEMPLATE",
    "JudgeAnswer",
    "ScoreAnswer",
    "check_template",
    "default_template",
    "fold_rubric",
    "prompt_digest",
    "read_judge",
    "read_score",
    "render",
]

"""Opinions: judges and rubrics (SPEC §9).

This package holds the pure core so far — prompt templates and reading a
judge's answer — with no I/O, no clock and no network; the model calls will
come through a client handed in, imported where they are used, never here.
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

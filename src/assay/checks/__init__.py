"""Assertions: one module per family, all registered by name (SPEC §3)."""

from . import graders, outcomes, output, quality, structural  # noqa: F401  (importing registers the checks)
from .apply import (
    Opinions,
    grade_facts,
    grade_trace,
    grade_trace_plain,
    required_evidence,
    verdict,
    verdict_plain,
)
from .quality import rate_threshold
from .registry import PLANNED, REGISTRY, Check, Judgement, LoadContext, lookup, reads_opinions

__all__ = [
    "PLANNED",
    "REGISTRY",
    "Check",
    "Judgement",
    "LoadContext",
    "Opinions",
    "grade_facts",
    "grade_trace",
    "grade_trace_plain",
    "lookup",
    "rate_threshold",
    "reads_opinions",
    "required_evidence",
    "verdict",
    "verdict_plain",
]

"""Assertions: one module per family, all registered by name (SPEC §3)."""

from . import graders, output, structural  # noqa: F401  (importing registers the checks)
from .apply import grade_trace, required_evidence, verdict
from .registry import PLANNED, REGISTRY, Check, Judgement, LoadContext, lookup

__all__ = [
    "PLANNED",
    "REGISTRY",
    "Check",
    "Judgement",
    "LoadContext",
    "grade_trace",
    "lookup",
    "required_evidence",
    "verdict",
]

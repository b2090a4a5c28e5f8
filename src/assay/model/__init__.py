"""The vocabulary of assay as typed, validated data (SPEC §1)."""

from .evidence import DEFAULT_MINIMUM, FACTS, STRONGEST, Evidence
from .invocation import Invocation
from .result import (
    Adaptive,
    CaseResult,
    Cost,
    HoldoutResult,
    RateSummary,
    Reliability,
    Report,
    Scores,
    SplitCounts,
    SuiteRef,
    TargetRef,
    TrialResult,
    Verdict,
)
from .suite import MODIFIERS, SUITE_ID, Assertion, Case, Suite
from .trace import Event, Status, Trace, Usage

__all__ = [
    "DEFAULT_MINIMUM",
    "FACTS",
    "MODIFIERS",
    "STRONGEST",
    "SUITE_ID",
    "Adaptive",
    "Assertion",
    "Case",
    "CaseResult",
    "Cost",
    "Event",
    "Evidence",
    "HoldoutResult",
    "Invocation",
    "RateSummary",
    "Reliability",
    "Report",
    "Scores",
    "SplitCounts",
    "Status",
    "Suite",
    "SuiteRef",
    "TargetRef",
    "Trace",
    "TrialResult",
    "Usage",
    "Verdict",
]

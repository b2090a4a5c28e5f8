"""The pure grading core: verdicts fold into trials, cases, scores and a report.

No clock, no I/O, no randomness: the same verdicts always give the same
report, so a stored run can be re-graded and checked (DESIGN, "a pure core").

The names are imported on first use (PEP 562): ``grading.stats`` is plain
arithmetic, and ``assay compare`` and ``assay gate`` use it without the models
the folding needs (a quarter of a second of pydantic at start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fold import fold_case, fold_trial
    from .report import RunInfo, build_report, redact
    from .scores import evidence_level, reliability, score, split_counts
    from .stats import clustered_se, pass_hat_k, wilson

_WHERE = {
    "fold_case": "fold", "fold_trial": "fold",
    "RunInfo": "report", "build_report": "report", "redact": "report",
    "evidence_level": "scores", "reliability": "scores", "score": "scores",
    "split_counts": "scores",
    "clustered_se": "stats", "pass_hat_k": "stats", "wilson": "stats",
}

__all__ = [
    "RunInfo",
    "build_report",
    "clustered_se",
    "evidence_level",
    "fold_case",
    "fold_trial",
    "pass_hat_k",
    "redact",
    "reliability",
    "score",
    "split_counts",
    "wilson",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)

"""The pure grading core: verdicts fold into trials, cases, scores and a report.

No clock, no I/O, no randomness: the same verdicts always give the same
report, so a stored run can be re-graded and checked (DESIGN, "a pure core").
"""

from .fold import fold_case, fold_trial
from .report import RunInfo, build_report, redact
from .scores import evidence_level, reliability, score, split_counts
from .stats import clustered_se, pass_hat_k, wilson

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

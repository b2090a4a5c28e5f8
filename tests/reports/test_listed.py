"""A table of cases past 200 rows: the ones that did not pass, and a line for the rest."""

from __future__ import annotations

import io
import random

from rich.console import Console

from assay.grading import RunInfo, build_report, redact
from assay.model import CaseResult, Report, SuiteRef, TargetRef, TrialResult
from assay.reports import markdown
from assay.reports.terminal import print_report

INFO = RunInfo(run_id="r", suite=SuiteRef(id="t/many@1", digest="sha256:0"),
               target=TargetRef(uri="python:m:f", digest="sha256:1"), started_at="a",
               finished_at="b", trials_per_case=1, pass_mark=1.0)


def report(passing: int, failing: int) -> Report:
    outcomes = ["fail"] * failing + ["pass"] * passing
    random.Random(7).shuffle(outcomes)  # failures spread among the passes
    cases = [CaseResult(id=f"c{i:04d}", split="public", outcome=outcome,
                        reason=None if outcome == "pass" else "it failed",
                        pass_at_1=float(outcome == "pass"), pass_hat_k=0.0, k=1,
                        trials=[TrialResult(n=1, outcome=outcome)])
             for i, outcome in enumerate(outcomes)]
    return redact(build_report(INFO, cases))


def terminal(shown: Report) -> str:
    out = io.StringIO()
    print_report(Console(file=out, width=160, highlight=False), shown)
    return out.getvalue()


def test_past_the_limit_the_failing_are_listed_and_the_rest_counted_by_kind() -> None:
    many = report(passing=40, failing=210)
    assert sum(c.outcome == "fail" for c in many.cases) == 210
    line = ("… 50 more case(s) not listed (40 passed, 10 did not pass); "
            "the JSON report has every case")
    text = terminal(many)
    assert line in text and text.count("it failed") == 200
    md = markdown([many])
    assert line in md and md.count("| fail |") == 200 and "| pass |" not in md


def test_under_the_limit_every_case_is_listed_and_nothing_said() -> None:
    few = report(passing=150, failing=50)
    text, md = terminal(few), markdown([few])
    assert "not listed" not in text + md
    assert md.count("| pass |") == 150 and md.count("| fail |") == 50
    only_passes = report(passing=300, failing=0)
    assert "… 300 more case(s) not listed (300 passed); the JSON report has every case" \
        in markdown([only_passes])

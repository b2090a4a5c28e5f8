"""Runs stored before usage became evidence still load, re-grade and hash the same.

The report and trace below are what assay wrote before tokens and cost were
separate facts (usage as zeros, ``cost`` speaking for tokens too, a report
``cost`` with three keys). They must load through today's models, give back
the very bytes their seal hashed, and re-grade to the verdict they were given.
"""

from __future__ import annotations

from assay.checks import grade_trace
from assay.model import Case, Evidence, Report, Trace
from assay.reports.cost import cost_line

OLD_REPORT = (
    '{"schema":"assay.report/1","run_id":"20250101T000000Z-00000001","suite":{"id":"t/old@1",'
    '"digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000",'
    '"hidden_set":null,"hidden_source":null},"target":{"uri":"python:a:b","digest":'
    '"sha256:1111111111111111111111111111111111111111111111111111111111111111","facets":'
    '{"harness":"python"},"evidence":{"output":"observed","cost":"observed"}},"started_at":'
    '"2025-01-01T00:00:00Z","finished_at":"2025-01-01T00:00:01Z","trials_per_case":1,'
    '"evidence":"smoke","scores":{"public":1.0,"hidden":null,"overall":1.0,"synthetic":null,'
    '"pass_mark":1.0,"passed":true,"flags":[]},"counts":{"public":{"total":1,"passed":1,'
    '"failed":0,"inconclusive":0,"broken":0},"hidden":{"total":0,"passed":0,"failed":0,'
    '"inconclusive":0,"broken":0}},"cost":{"usd":0.0,"input_tokens":10,"output_tokens":2},'
    '"reliability":{"public":{"pass_at_1":1.0,"se":0.0,"cases":1}},"cases":[{"id":"c1",'
    '"split":"public","outcome":"pass","reason":null,"pass_at_1":1.0,"pass_hat_k":1.0,"k":1,'
    '"pass_hat":{"1":1.0},"synthetic":false,"tags":[],"quality":[],"trials":[{"n":1,'
    '"outcome":"pass","reason":null,"duration_s":0.0,"usage":{"input_tokens":10,'
    '"output_tokens":2,"cost_usd":0.0},"verdicts":[{"assertion":"costs_at_most","check":'
    '"costs_at_most","family":"structural","outcome":"pass","evidence":"observed","note":'
    '"$0, 12 tokens","provenance":"check:costs_at_most","threshold":null}]}]}],'
    '"interrupted":false,"seed":7,"seal":null}'
)

OLD_TRACE = (
    '{"output":"x","status":"ok","error":null,"events":[],"usage":{"input_tokens":10,'
    '"output_tokens":2,"cost_usd":0.0},"steps":null,"settled":null,"exit_code":null,'
    '"duration_s":0.0,"stdout":"","facets":{},"evidence":{"output":"observed","tool_calls":'
    '"observed","asks":"observed","skills":"unavailable","cost":"observed","steps":"observed",'
    '"exit_code":"unavailable"}}'
)


def test_an_old_report_loads_and_gives_back_the_bytes_its_seal_hashed() -> None:
    report = Report.model_validate_json(OLD_REPORT)
    # What the store keeps (and the seal hashes) is the model's JSON with seal null.
    again = report.model_copy(update={"seal": None}).model_dump_json(by_alias=True)
    assert again == OLD_REPORT
    assert (report.cost.usd, report.cost.input_tokens, report.cost.trials) == (0.0, 10, 0)
    # What it recorded is shown as it was recorded, with no gap it never measured.
    assert cost_line(report.cost) == "cost $0.0000 · tokens 10 in / 2 out"


def test_an_old_trace_re_grades_a_token_budget_to_the_verdict_it_was_given() -> None:
    trace = Trace.model_validate_json(OLD_TRACE)
    # Its map has no "tokens": "cost" spoke for both then.
    assert trace.evidence_for("tokens") == Evidence.OBSERVED
    case = Case.model_validate({"id": "c1", "input": "x",
                                "expect": [{"costs_at_most": {"tokens": 100}}]})
    (verdict,) = grade_trace(case.expect, trace)
    assert (verdict.outcome, verdict.evidence) == ("pass", Evidence.OBSERVED)

"""``assay run`` with judged checks, against a real loopback OpenAI-compatible judge (SPEC §9).

The agent is a Python function whose answer carries the marker that tells
the loopback judge (tests/judge_server.py) how to answer: well, out of
form, with a refusal, slowly past the timeout, with an HTTP error, or
inconsistently. What is checked is what follows: verdicts, inconclusives,
the judge's cost apart from the agent's, the opinions in the store and the
ledger, and replay reading them again without asking anyone.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import JudgeServer  # noqa: E402

pytestmark = pytest.mark.real

CANARY = "sk-judge-canary-123"

AGENT = '''
def answer(prompt):
    return {
        "good": "Sorry about that, we will resend it today. JUDGE:pass",
        "bad": "Not our problem. JUDGE:fail",
        "garbled": "Sorry! JUDGE:garbage",
        "refused": "Sorry! JUDGE:refuse",
        "slow": "Sorry! JUDGE:slow",
        "broken": "Sorry! JUDGE:500",
        "flaky": "Sorry! JUDGE:flip",
        "scored": "Sorry, resending. JUDGE:score=8",
    }[prompt]
'''


def suite(cases: list[str], *, trials: int = 1, extra: str = "", judge_timeout: float = 3) -> str:
    lines = [f"suite: demo/judged@1\ntarget: python:agent:answer\ntrials: {trials}\n"
             f"judge: openai:judge-model\njudge_timeout_s: {judge_timeout}\n{extra}cases:\n"]
    for case in cases:
        lines.append(
            f"  - id: {case}\n    input: {case}\n"
            "    expected: apologises and offers a remedy\n"
            "    expect:\n      - status: ok\n"
            "      - judge: {criteria: The reply apologises, threshold: 0.5}\n")
    return "".join(lines)


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    with JudgeServer(slow_s=10) as server:
        yield server


def run(project: Any, judge: JudgeServer, *args: str, env: dict[str, str] | None = None) -> Any:
    return project.assay("run", "--json", "out.json", *args,
                         env={"ASSAY_JUDGE_BASE_URL": judge.base_url, "OPENAI_API_KEY": CANARY,
                              "PYTHONPATH": str(project.root), **(env or {})})


def report(project: Any) -> dict[str, Any]:
    return json.loads((project.root / "out.json").read_text().splitlines()[0])


def cases_of(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in data["cases"]}


def test_verdicts_follow_the_judges_answers_and_their_cost_is_reported_apart(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["good", "bad", "garbled", "refused", "broken"]))
    done = run(project, judge)
    assert done.code == 1, done.err
    data = report(project)
    cases = cases_of(data)
    assert cases["good"]["outcome"] == "pass"
    assert cases["bad"]["outcome"] == "fail"
    for name in ("garbled", "refused", "broken"):
        assert cases[name]["outcome"] == "inconclusive", name
    verdict = {name: cases[name]["trials"][0]["verdicts"][1] for name in cases}
    assert verdict["good"]["provenance"].startswith("judge:judge-model-2025 prompt sha256:")
    assert verdict["garbled"]["note"].startswith("out of form")
    assert verdict["refused"]["note"].startswith("refused")
    assert verdict["broken"]["note"] == "judge error: HTTP 500"
    # The judge's cost is apart from the agent's, which reported none.
    cost = data["cost"]
    assert cost["usd"] is None and cost["input_tokens"] is None
    assert (cost["judge_calls"], cost["judge_cached"]) == (5, 0)
    assert cost["judge_input_tokens"] == 400 and cost["judge_output_tokens"] == 20  # 4 answered
    # The judge pass rate is the case's number.
    assert cases["good"]["score"] == 1.0 and cases["bad"]["score"] == 0.0
    # The user's key never went to the judge's server.
    assert all(CANARY not in json.dumps(h) for h in judge.headers)


def test_a_judge_slower_than_its_timeout_leaves_the_verdict_inconclusive(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["slow", "good"], judge_timeout=0.5))
    done = run(project, judge)
    assert done.code == 1, done.err
    cases = cases_of(report(project))
    assert cases["good"]["outcome"] == "pass"
    assert cases["slow"]["outcome"] == "inconclusive"
    assert cases["slow"]["trials"][0]["verdicts"][1]["note"] == \
        "judge error: timed out after 0.5s"


def test_an_inconsistent_judge_gives_a_rate_and_the_case_is_judged_on_it(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["flaky"], trials=4))
    done = run(project, judge, "--concurrency", "1")
    assert done.code == 0, done.err
    [case] = report(project)["cases"]
    [rate] = case["quality"]
    assert (rate["passed"], rate["trials"], rate["outcome"]) == (2, 4, "pass")
    assert rate["straddles"] is True  # 2 of 4 cannot tell a 0.5 bar from anything
    assert case["score"] == 0.5


def test_opinions_are_stored_sealed_and_read_again_by_replay_without_a_call(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["good", "bad"], trials=2))
    assert run(project, judge).code == 1
    run_id = report(project)["run_id"]
    calls = judge.calls
    assert calls == 4
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    rows = db.execute("select case_id, n, position, item, entry from opinions "
                      "where run_id = ? order by case_id, n", (run_id,)).fetchall()
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("bad", 1, 1, 0), ("bad", 2, 1, 0), ("good", 1, 1, 0), ("good", 2, 1, 0)]
    kinds = dict(db.execute("select `index`, kind from ledger").fetchall())
    assert all(kinds[r[4]] == "judge-opinion" for r in rows)
    verified = project.assay("ledger", "verify")
    assert verified.code == 0, verified.err
    replayed = project.assay("replay", run_id)
    assert replayed.code == 0, replayed.out + replayed.err
    assert judge.calls == calls  # replay read the stored opinions


def test_a_rerun_is_served_from_the_judge_cache_and_costs_no_judge_call(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["good", "bad"], trials=2))
    assert run(project, judge).code == 1
    assert judge.calls == 4  # trial 2 is asked on its own, never served trial 1's answer
    assert run(project, judge).code == 1
    assert judge.calls == 4
    cost = report(project)["cost"]
    assert (cost["judge_calls"], cost["judge_cached"], cost["judge_usd"]) == (0, 4, 0.0)
    assert run(project, judge, "--no-judge-cache").code == 1
    assert judge.calls == 8


def test_the_judges_answers_are_priced_from_the_users_price_table(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["good", "bad"]))
    # The served model is judge-model-2025: its price, as for an agent's model.
    project.write("prices.yaml", "judge-model-2025: {input: 1.0, output: 2.0}\n")
    assert run(project, judge, env={"ASSAY_PRICES": "prices.yaml"}).code == 1
    cost = report(project)["cost"]
    assert cost["judge_usd"] == pytest.approx(2 * (100 * 1.0 + 5 * 2.0) / 1e6)
    # A bad price file is told before anything runs, as for an openai: agent.
    project.write("prices.yaml", "judge-model-2025: free\n")
    done = run(project, judge, "--no-judge-cache", env={"ASSAY_PRICES": "prices.yaml"})
    assert done.code == 2 and "ASSAY_PRICES" in done.err and "Traceback" not in done.err
    assert judge.calls == 2


def test_a_judged_suite_without_a_judge_or_its_server_is_refused_before_running(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["good"]).replace(
        "judge: openai:judge-model\n", ""))
    done = run(project, judge)
    assert done.code == 2
    assert "names no judge" in done.err and "Traceback" not in done.err
    done = run(project, judge, "--judge", "openai:judge-model",
               env={"ASSAY_JUDGE_BASE_URL": ""})
    assert done.code == 2
    assert "--judge-base-url" in done.err and "Traceback" not in done.err
    assert judge.calls == 0


def test_judge_on_a_suite_without_judged_checks_is_refused(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", """
        suite: demo/plain@1
        target: python:agent:answer
        cases:
          - {id: good, input: good, expect: [{contains: Sorry}]}
    """)
    done = run(project, judge, "--judge", "openai:judge-model")
    assert done.code == 2
    assert "no suite run here has a judged check" in done.err


def test_a_template_without_its_placeholders_is_refused_at_load_with_file_and_line(
    project: Any,
) -> None:
    project.write("evals/a.suite.yaml", """
        suite: demo/judged@1
        target: python:agent:answer
        judge: openai:judge-model
        cases:
          - id: good
            input: good
            expect:
              - judge: {criteria: apologises, template: "Grade {actual} please"}
    """)
    done = project.assay("list")
    assert done.code == 2
    assert "evals/a.suite.yaml:8:" in done.err and "{expected}" in done.err
    assert "Traceback" not in done.err


def test_a_hidden_cases_judge_answer_and_criteria_reach_no_surface(
    project: Any, judge: JudgeServer,
) -> None:
    secret = "HIDDEN-CANARY-7731"
    project.write("agent.py", AGENT.replace('"bad": "Not our problem. JUDGE:fail"',
                                            f'"{secret}": "{secret} JUDGE:garbage"'))
    project.write("evals/a.suite.yaml", suite(["good"]) + "hidden: hidden/\n")
    project.write("evals/hidden/h.yaml", f"""
        id: {secret}
        input: {secret}
        expected: {secret} expected
        expect:
          - judge: {{criteria: "{secret} criteria"}}
          - rubric: {{criteria: [{{name: {secret}, description: x}}], pass_at: 0.5}}
    """)
    done = run(project, judge, "--junit", "out.xml", "--markdown", "out.md")
    assert done.code == 1, done.err
    assert any(secret in p for p in judge.prompts)  # the judge did see it
    for surface in (done.out, done.err, (project.root / "out.json").read_text(),
                    (project.root / "out.xml").read_text(),
                    (project.root / "out.md").read_text()):
        assert secret not in surface
    shown = project.assay("show", report(project)["run_id"], "--json")
    assert shown.code in (0, 1) and secret not in shown.out + shown.err


def test_a_rubric_scores_each_criterion_and_similar_measures_with_the_local_model(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", """
        suite: demo/scored@1
        target: python:agent:answer
        judge: openai:judge-model
        cases:
          - id: scored
            input: scored
            expected: apologises and resends
            expect:
              - rubric: {criteria: [{name: accuracy, description: says what happens, weight: 2},
                                    {name: tone, weight: 1}], pass_at: 0.7}
              - similar: {to: "Sorry, we are resending it.", threshold: 0.5}
          - id: off-topic
            input: bad
            expect:
              - similar: {to: "The invoice total is 42.00 euros.", threshold: 0.6}
    """)
    done = run(project, judge, "--markdown", "out.md", "--junit", "out.xml")
    assert done.code == 1, done.err
    cases = cases_of(report(project))
    rubric, similar = cases["scored"]["trials"][0]["verdicts"]
    # The number is beside the outcome in every report, and the judges' cost apart.
    score = f"{cases['scored']['score']:.2f}"
    assert "score" in done.out and score in done.out and "judges: cost" in done.out
    markdown = (project.root / "out.md").read_text()
    assert "| score |" in markdown and f"| {score} |" in markdown
    assert f'name="score" value="{cases["scored"]["score"]:.4f}"' in \
        (project.root / "out.xml").read_text()
    assert (rubric["outcome"], rubric["score"]) == ("pass", 0.8)
    assert rubric["note"].startswith("scored 0.800 (passes at 0.7)")
    assert similar["outcome"] == "pass" and similar["score"] > 0.5
    assert similar["provenance"].startswith("similar:sentence-transformers/all-MiniLM-L6-v2@")
    [off] = cases["off-topic"]["trials"][0]["verdicts"]
    assert off["outcome"] == "fail" and off["score"] < similar["score"]
    assert cases["off-topic"]["outcome"] == "fail"
    # Two criteria were asked of the judge, each naming its criterion; similar asked nobody.
    assert judge.calls == 2
    assert sum("Criterion: accuracy" in p for p in judge.prompts) == 1
    assert cases["scored"]["score"] == pytest.approx((0.8 + similar["score"]) / 2)


def test_erasing_a_case_erases_what_its_judges_answered_and_its_reference(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite(["good", "bad"]))
    assert run(project, judge).code == 1
    run_id = report(project)["run_id"]
    db = sqlite3.connect(project.root / ".assay" / "assay.db")

    def raw_blobs(case: str) -> list[bytes | None]:
        found = []
        for (content,) in db.execute(
                "select b.content from opinions o join blobs b on b.digest = o.content_digest "
                "where o.case_id = ?", (case,)):
            raw = json.loads(content)["raw"]
            found.append(db.execute("select content from blobs where digest = ?",
                                    (raw,)).fetchone()[0])
        return found

    assert all(b"The answer was read" in (raw or b"") for raw in raw_blobs("good"))
    done = project.assay("erase", "--subject", "good")
    assert done.code == 0, done.err
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    assert raw_blobs("good") == [None]
    assert all(raw is not None for raw in raw_blobs("bad"))
    (suite_text,) = db.execute("select suite from runs where run_id = ?", (run_id,)).fetchone()
    [good] = [c for c in json.loads(suite_text)["suite"]["cases"] if c["id"] == "good"]
    assert good["expected"] is None
    assert project.assay("ledger", "verify").code == 0

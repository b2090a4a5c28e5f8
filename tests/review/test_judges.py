"""`assay judges` end to end (SPEC §10): a real judged run against the loopback judge
(tests/judge_server.py), real decisions with `assay review ITEM --verdict`, and the
agreement, kappa and disagreements that follow — hidden cases as holdout-N, their
content nowhere."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Project

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import SERVED_MODEL, JudgeServer  # noqa: E402

pytestmark = pytest.mark.real

CANARY = "CANARY-JUDGES-4c19"
CRITERIA = "The reply apologises"

# What the agent answers decides what the loopback judge says (its JUDGE: markers).
AGENT = """
def answer(prompt):
    if prompt.startswith("p"):
        return "Sorry about that, we will resend it. JUDGE:pass"
    if prompt.startswith("f"):
        return "Not our problem. JUDGE:fail"
    if prompt == "g1":
        return "Hmm. JUDGE:garbage"
    if prompt == "r1":
        return "Resending it now."  # the rubric's markers are in its criteria
    if prompt == "d1":
        return "Sorry. JUDGE:pass"
    return "Sorry about " + prompt + ". JUDGE:pass"  # the hidden input, echoed back
"""

PUBLIC = ["p1", "p2", "p3", "p4", "f1", "f2", "f3", "g1"]


def suite() -> str:
    lines = ["suite: review/judged@1\ntarget: python:judged_agent:answer\ntrials: 1\n"
             "judge: openai:judge-model\njudge_timeout_s: 20\nhidden: hidden/\ncases:\n"]
    for case in PUBLIC:
        lines.append(f"  - id: {case}\n    input: {case}\n"
                     f"    expect: [{{judge: {{criteria: {CRITERIA}}}}}]\n")
    lines.append(
        "  - id: r1\n    input: r1\n    expect:\n"
        "      - rubric: {criteria: [{name: accuracy, description: 'JUDGE:score=9'},\n"
        "                            {name: tone, description: 'JUDGE:score=3'}],\n"
        "                 pass_at: 0.5}\n"
        # A deterministic check fails first: the judge is never asked.
        f"  - id: d1\n    input: d1\n    expect: [{{contains: never-there}}, "
        f"{{judge: {CRITERIA}}}]\n")
    return "".join(lines)


HIDDEN = f"""
- id: {CANARY}-hidden-id
  input: {CANARY}-hidden-input
  expected: {CANARY}-expected
  expect: [{{judge: {{criteria: "{CANARY}-criteria: the reply apologises"}}}}]
"""

# item → decision, chosen for a known table on the public judge row:
#   judge pass (p1-p4): approved ×3, rejected ×1   → a=3, b=1
#   judge fail (f1-f3): approved ×1, rejected, needs-fix → c=1, d=2
DECISIONS = {"p1": "approved", "p2": "approved", "p3": "approved", "p4": "rejected",
             "f1": "approved", "f2": "rejected", "f3": "needs-fix",
             "g1": "rejected",        # the judge answered out of form: excluded
             "r1": "approved",        # accuracy 9 ≥ 5 passes, tone 3 < 5 fails
             "d1": "rejected",        # no opinion: reviewed, not judged
             "holdout-1": "rejected"}  # the judge passed it: a hidden disagreement


@pytest.fixture(scope="module")
def judge() -> Iterator[JudgeServer]:
    with JudgeServer() as server:
        yield server


def write_project(project: Project) -> None:
    project.write("judged_agent.py", AGENT)
    project.write("evals/judged.suite.yaml", suite())
    project.write("evals/hidden/cases.yaml", HIDDEN)


def items(project: Project) -> dict[str, int]:
    done = project.assay("review", "--export", "-", "--all")
    assert done.code == 0, done.err
    return {i["case"]: i["item"] for i in map(json.loads, done.out.splitlines())}


def judges(project: Project, *more: str) -> Any:
    return project.assay("judges", *more)


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory,
             judge: JudgeServer) -> tuple[Project, str, list[Any]]:
    """One judged run, reviewed once for the module (the tests below only read it)."""
    project = Project(tmp_path_factory.mktemp("reviewed"))
    write_project(project)
    done = project.assay("run", "evals", "--json", "r.json",
                         env={"ASSAY_JUDGE_BASE_URL": judge.base_url})
    assert done.code == 1, done.err  # f1-f3 fail: not passed
    run_id = json.loads((project.root / "r.json").read_text().splitlines()[0])["run_id"]
    outputs = [done]
    # Failing and inconclusive trials were queued at the seal; the passing ones a
    # person wants to check too are added by hand.
    for case in ("p1", "p2", "p3", "p4", "r1", "holdout-1"):
        added = project.assay("review", "--add", run_id, "--case", case)
        assert added.code == 0, added.err
        outputs.append(added)
    queued = items(project)
    assert sorted(queued) == sorted(DECISIONS)
    for case, verdict in DECISIONS.items():
        decided = project.assay("review", str(queued[case]), "--verdict", verdict,
                                "--note", f"{CANARY}-note", "--reviewer", "ana")
        assert decided.code == 0, decided.err
        outputs.append(decided)
    return project, run_id, outputs


def row(data: dict[str, Any], check: str, criterion: str) -> dict[str, Any]:
    [found] = [r for r in data["rows"] if (r["check"], r["criterion"]) == (check, criterion)]
    return found


def test_agreement_kappa_and_disagreements_from_real_reviews(reviewed) -> None:
    project, run_id, outputs = reviewed
    done = judges(project, "--json", "-")
    assert done.code == 0, done.err
    data = json.loads(done.out)
    assert data["format"] == "assay.judges/1" and data["judge"] is None
    assert data["reviews"] == {"reviewed": 11, "judged": 10, "elsewhere": 0, "unreadable": 0,
                               "unknown_verdicts": 0}
    public = row(data, "judge", CRITERIA)
    # a=3 b=1 c=1 d=2, n=7: p_o = 5/7; p_j = p_h = 4/7; p_e = 16/49 + 9/49 = 25/49;
    # κ = (35/49 − 25/49) / (24/49) = 10/24 = 5/12.
    assert public["table"] == {"both_pass": 3, "judge_pass_human_fail": 1,
                               "judge_fail_human_pass": 1, "both_fail": 2}
    assert (public["judge"], public["n"], public["agreed"]) == (SERVED_MODEL, 7, 5)
    assert public["observed_agreement"] == pytest.approx(5 / 7)
    assert public["expected_agreement"] == pytest.approx(25 / 49)
    assert public["kappa"] == pytest.approx(5 / 12) and public["reading"] == "moderate"
    # g1's answer was out of form: excluded, with the reason, not a label.
    assert public["excluded"] == 1
    assert list(public["excluded_why"]) == ["out of form: the first line is not `pass` or "
                                            "`fail` alone"]
    # The rubric, per criterion: accuracy 9 (pass) with an approval, one label on both
    # sides: κ undefined; tone 3 (fail) against an approval: p_e = 0, κ = 0.
    accuracy, tone = row(data, "rubric", "accuracy"), row(data, "rubric", "tone")
    assert (accuracy["n"], accuracy["kappa"], accuracy["reading"]) == (1, None, None)
    assert accuracy["kappa_undefined"].startswith("undefined")
    assert (tone["n"], tone["kappa"], tone["table"]["judge_fail_human_pass"]) == (1, 0.0, 1)
    # The hidden case's criterion is a row of its own, named, never quoted.
    hidden = row(data, "judge", "hidden criterion 1")
    assert hidden["hidden"] is True and hidden["table"]["judge_pass_human_fail"] == 1
    said = [(d["case"], d["trial"], d["criterion"], d["judge_said"], d["human_said"])
            for d in data["disagreements"]]
    assert sorted(said) == sorted([
        ("p4", 1, CRITERIA, "pass", "rejected"), ("f1", 1, CRITERIA, "fail", "approved"),
        ("r1", 1, "tone", "fail", "approved"),
        ("holdout-1", 1, "hidden criterion 1", "pass", "rejected")])
    assert all(d["run_id"] == run_id and d["reviewer"] == "ana"
               for d in data["disagreements"])
    # The table for people says the same.
    table = judges(project)
    assert table.code == 0, table.err
    assert "0.417" in table.out and "moderate" in table.out
    assert "holdout-1" in table.out and "hidden criterion 1" in table.out
    assert "Cohen (1960)" in table.out and "Landis & Koch" in table.out
    for output in [*outputs, done, table]:
        assert CANARY not in output.out + output.err


def test_one_judge_and_a_judge_that_gave_no_opinion(reviewed) -> None:
    project, _, _ = reviewed
    only = judges(project, "--judge", SERVED_MODEL, "--json", "-")
    assert only.code == 0, only.err
    assert {r["judge"] for r in json.loads(only.out)["rows"]} == {SERVED_MODEL}
    missing = judges(project, "--judge", "no-such-judge")
    assert missing.code == 2 and "Traceback" not in missing.err
    assert f"judges seen: {SERVED_MODEL}" in missing.err


def test_items_from_outside_a_run_are_counted_not_compared(reviewed, tmp_path: Path) -> None:
    from assay.store.database import open_store
    from assay.store.reviews.items import add_item, decide

    project = Project(tmp_path)  # a copy of the reviewed store: the others stay as they were
    shutil.copytree(reviewed[0].root / ".assay", tmp_path / ".assay")
    store = open_store(f"sqlite:///{project.root / '.assay' / 'assay.db'}")
    try:
        item = add_item(store, {"source": "online", "split": "public", "label": "sampled",
                                "outcome": "fail", "added_at": "2026-01-01T00:00:00Z"},
                        b'{"output": "hello"}')
        decide(store, item, "rejected", "", "ana")
    finally:
        store.close()
    data = json.loads(judges(project, "--json", "-").out)
    assert data["reviews"]["elsewhere"] == 1 and data["reviews"]["reviewed"] == 11


def test_no_reviews_yet_is_said_plainly(project: Project) -> None:
    empty = judges(project)
    assert empty.code == 0 and "no reviews yet" in empty.out
    as_json = judges(project, "--json", "-")
    assert as_json.code == 0 and "no reviews yet" in as_json.err
    assert json.loads(as_json.out)["rows"] == []
    blank = judges(project, "--judge", " ")
    assert blank.code == 2 and "cannot be empty" in blank.err


def test_the_tables_fold_rather_than_cut_in_a_log(reviewed) -> None:
    # stdout is a pipe, 60 columns, coloured (FORCE_COLOR) or not: every column folds,
    # nothing ends in "…" (decision 0058).
    from ..cli.test_whole_values import LOGS, assert_whole

    project, _, _ = reviewed
    data = judges(project, "--json", "-")
    assert data.code == 0, data.err
    judge = json.loads(data.out)["rows"][0]["judge"]
    for env in LOGS.values():
        done = project.assay("judges", env={**env, "COLUMNS": "60"})
        assert "disagreements (" in done.out
        assert_whole(done, judge)

"""``assay run``, ``rejudge`` and ``pairwise`` with a judge that is a Python callable (SPEC §9).

The project is real: a suite folder holding the agent's module and the
judge's (``model: python:judges:grade``), a real store, the real command in
a subprocess. The judge grades by what ``inputs`` says and misbehaves on
purpose for some outputs: it raises, chats out of form, or answers with
hostile text. What is checked is what a user sees: verdicts, the reasons
of inconclusives, the judge's identity (and that an edited judge file is
another judge, asked again), load errors at the suite file's line, and no
traceback, no raw control character and no hidden content anywhere.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from assay.canonical import file_digest

from ..fuzz_corpus import assert_inert, python_source
from .conftest import Done, Project

pytestmark = pytest.mark.real

CANARY = "CANARY-7e2f"

AGENT = '''
def answer(prompt):
    return {
        "good": "Sorry about that, we will resend it today.",
        "bad": "Not our problem.",
        "raises": "RAISE please",
        "garbled": "CHAT please",
        "hostile": "HOSTILE please",
        "huge": "MEGABYTE please",
    }.get(prompt, prompt)
'''

JUDGE = python_source() + '''

def grade(prompt, inputs):
    actual = str(inputs["actual"])
    assert actual in prompt  # the rendered prompt holds what inputs holds
    if "RAISE" in actual:
        print("about to fail on", actual)
        raise ValueError("cannot grade " + actual)
    if "CHAT" in actual:
        return "It depends on what the customer wants."
    if "HOSTILE" in actual:
        return HOSTILE
    if "MEGABYTE" in actual:
        return MEGABYTE
    if inputs["kind"] == "rubric":
        return {"tone": "9", "remedy": "6"}[inputs["criterion"]] + "\\nscored"
    return "pass\\napologises" if "Sorry" in actual else "fail\\nno apology"
'''

CHECKS = ("      - judge: The reply apologises\n")
RUBRIC = ("      - rubric:\n"
          "          criteria:\n"
          "            - {name: tone, description: Courteous, weight: 1}\n"
          "            - {name: remedy, description: Offers a remedy, weight: 2}\n"
          "          pass_at: 0.7\n")


def suite(cases: list[str], *, judge: str = "python:judges:grade", rubric: str = "good") -> str:
    lines = ["suite: demo/pyjudge@1\n", "target: python:agent:answer\n",
             f"judge: {judge}\n", "hidden: hidden/\n", "cases:\n"]
    for case in cases:
        lines.append(f"  - id: {case}\n    input: {case}\n    expect:\n{CHECKS}")
        if case == rubric:
            lines.append(RUBRIC)
    return "".join(lines)


HIDDEN = f"""
- id: {CANARY}-id
  input: "RAISE {CANARY}-input"
  expect:
    - judge: The reply apologises
"""


def project_with(project: Project, cases: list[str], **kwargs: Any) -> Project:
    project.write("evals/agent.py", AGENT)
    project.write("evals/judges.py", JUDGE)
    project.write("evals/a.suite.yaml", suite(cases, **kwargs))
    project.write("evals/hidden/cases.yaml", HIDDEN)
    return project


def run(project: Project, *args: str, name: str = "out") -> tuple[Done, dict[str, Any]]:
    done = project.assay("run", "evals", "--json", f"{name}.json", *args)
    clean(done)
    path = project.root / f"{name}.json"
    return done, json.loads(path.read_text().splitlines()[0]) if path.is_file() else {}


def clean(done: Done) -> None:
    """No traceback, no hidden content and no raw control character on either stream."""
    for text in (done.out, done.err):
        assert "Traceback" not in text, text[-3000:]
        assert CANARY not in text
        assert_inert(text)


def verdicts(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {c["id"]: c["trials"][0]["verdicts"] for c in report["cases"] if "trials" in c}


def opinions(project: Project, run_id: str) -> list[dict[str, Any]]:
    """The stored opinions of a run (each as its ``judge-opinion`` entry holds it)."""
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        rows = db.execute("SELECT b.content FROM opinions o JOIN blobs b "
                          "ON b.digest = o.content_digest WHERE o.run_id = ? "
                          "ORDER BY o.case_id, o.position, o.item", (run_id,)).fetchall()
    return [json.loads(bytes(content)) for (content,) in rows]


def blob(project: Project, digest: str) -> bytes:
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        [(content,)] = db.execute("SELECT content FROM blobs WHERE digest = ?", (digest,))
    return bytes(content)


# --- verdicts --------------------------------------------------------------------------

def test_the_callables_answers_are_read_into_verdicts(project: Project) -> None:
    project_with(project, ["good", "bad", "raises", "garbled", "hostile", "huge"])
    done, report = run(project)
    assert done.code == 1, done.out + done.err
    found = verdicts(report)
    outcomes = {case: [v["outcome"] for v in found[case]] for case in found}
    assert outcomes == {"good": ["pass", "pass"], "bad": ["fail"], "raises": ["inconclusive"],
                        "garbled": ["inconclusive"], "hostile": ["inconclusive"],
                        "huge": ["inconclusive"]}
    judge, rubric = found["good"]
    assert judge["note"] == "the judge (python:judges:grade) said pass"
    assert judge["provenance"].startswith("judge:python:judges:grade prompt sha256:")
    # tone 9 (weight 1) and remedy 6 (weight 2): (0.9 + 1.2) / 3 = 0.7, at pass_at 0.7.
    assert rubric["score"] == pytest.approx(0.7)
    assert rubric["note"] == "scored 0.700 (passes at 0.7) by python:judges:grade"
    assert found["raises"][0]["note"] == "judge error: raised ValueError"
    for case in ("garbled", "hostile", "huge"):
        assert found[case][0]["note"] == \
            "out of form: the first line is not `pass` or `fail` alone", case
    # A Python judge has no tokens and no price: unavailable, never $0.
    cost = report["cost"]
    assert (cost["judge_usd"], cost["judge_input_tokens"], cost["judge_output_tokens"]) == \
        (None, None, None)
    assert cost["judge_calls"] == 9  # 8 public answers and the hidden case's
    # The hidden case's judge raised with its content in the message: it reached no
    # surface (checked in ``clean``) but is kept, erasable, with the opinion.
    stored = opinions(project, report["run_id"])
    raised = [o for o in stored if o["error"] == "raised ValueError"]
    assert len(raised) == 2
    texts = b"".join(blob(project, o["stream"]) for o in raised).decode()
    assert "raised ValueError: cannot grade RAISE" in texts and CANARY in texts
    assert "about to fail on" in texts
    # The entries name those texts by digest (and the case by its id, as the store does).
    assert all(CANARY not in json.dumps({k: v for k, v in o.items() if k != "case_id"})
               for o in stored)
    verified = project.assay("ledger", "verify")
    assert verified.code == 0, verified.err


def test_an_edited_judge_is_another_judge_and_is_asked_again(project: Project) -> None:
    project_with(project, ["good", "bad", "raises"])
    _, first = run(project, name="first")
    _, second = run(project, name="second")
    # The same judge, the same outputs: served from the judge cache, but the two errors
    # (a public and a hidden case's judge raised), which are never kept there.
    assert (second["cost"]["judge_calls"], second["cost"]["judge_cached"]) == (2, 4)
    facets = {c["id"]: c["facets"]["judge"] for c in first["cases"] if "facets" in c}
    assert {c["id"]: c["facets"]["judge"] for c in second["cases"] if "facets" in c} == facets
    # Edit the judge's file (only a comment): its digest changes, and with it the judge.
    path = project.root / "evals" / "judges.py"
    path.write_text(path.read_text() + "\n# tuned\n")
    _, third = run(project, name="third")
    assert (third["cost"]["judge_calls"], third["cost"]["judge_cached"]) == (6, 0)
    changed = {c["id"]: c["facets"]["judge"] for c in third["cases"] if "facets" in c}
    assert set(changed) == set(facets) and all(changed[k] != facets[k] for k in facets)
    before = {o["parameters"]["module_digest"] for o in opinions(project, first["run_id"])}
    after = {o["parameters"]["module_digest"] for o in opinions(project, third["run_id"])}
    assert after == {file_digest(path)} and before != after
    assert {o["model"] for o in opinions(project, third["run_id"])} == {"python:judges:grade"}
    # compare will not line the runs up as if one judge had judged both.
    compared = project.assay("compare", second["run_id"], third["run_id"])
    assert "non-comparable" in compared.out and "judge" in compared.out


def test_rejudge_asks_another_python_judge(project: Project) -> None:
    project_with(project, ["good", "bad"])
    _, first = run(project)
    project.write("evals/strict.py", "def grade(prompt):\n    return 'fail'\n")
    done = project.assay("rejudge", first["run_id"], "--judge", "python:strict:grade",
                         "--json", "again.json")
    clean(done)
    assert done.code == 1, done.out + done.err
    again = json.loads((project.root / "again.json").read_text().splitlines()[0])
    assert again["rejudge_of"] == first["run_id"]
    good = verdicts(again)["good"]
    assert good[0]["note"] == "the judge (python:strict:grade) said fail"
    # Asked for a score, the strict judge still says fail: out of form, inconclusive.
    assert (good[1]["outcome"], good[1]["note"]) == (
        "inconclusive",
        "criterion tone: out of form: the first line is not a score from 0 to 10 alone")


# --- load errors -----------------------------------------------------------------------

@pytest.mark.parametrize(("judges", "judge", "reason"), [
    (JUDGE, "python:judges:nope", "module 'judges' has no 'nope'"),
    (JUDGE, "python:absent_judges:grade",
     "cannot import 'absent_judges': ModuleNotFoundError"),
    ("raise RuntimeError('broken on import')\n", "python:judges:grade",
     "RuntimeError: broken on import"),
    ("def grade(prompt)\n", "python:judges:grade", "SyntaxError"),
    ("grade = 3\n", "python:judges:grade", "is not callable"),
])
def test_a_suite_judge_that_cannot_be_loaded_is_refused_at_its_line(
        project: Project, judges: str, judge: str, reason: str) -> None:
    project_with(project, ["good"], judge=judge)
    project.write("evals/judges.py", judges)
    done, _ = run(project)
    assert done.code == 2
    assert f"evals/a.suite.yaml:3: judge {judge}: " in done.err  # line 3 holds judge:
    assert reason in done.err


def test_a_checks_own_model_is_loaded_at_its_line_and_asked(project: Project) -> None:
    project_with(project, ["bad"], judge="openai:judge-model")
    own = "model: 'python:judges:NAME'"
    project.write("evals/hidden/cases.yaml", HIDDEN.replace(
        "- judge: The reply apologises",
        "- judge: {criteria: The reply apologises, " + own.replace("NAME", "grade") + "}"))
    text = (project.root / "evals" / "a.suite.yaml").read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if "judge: The reply apologises" in t)
    text[line - 1] = "      - judge: {criteria: The reply apologises, " + own + "}"
    project.write("evals/a.suite.yaml", "\n".join(text).replace("NAME", "missing") + "\n")
    done, _ = run(project)
    assert done.code == 2
    assert f"evals/a.suite.yaml:{line}: judge: model python:judges:missing: " \
           "module 'judges' has no 'missing'" in done.err
    # Named right, the checks' own judge is asked; the suite's openai: judge judges
    # nothing, so it needs no server.
    project.write("evals/a.suite.yaml", "\n".join(text).replace("NAME", "grade") + "\n")
    done, report = run(project)
    assert done.code == 1, done.out + done.err
    assert verdicts(report)["bad"][0]["note"] == "the judge (python:judges:grade) said fail"
    assert report["cost"]["judge_calls"] == 2


def test_a_judge_flag_that_cannot_be_loaded_is_a_usage_error(project: Project) -> None:
    project_with(project, ["good"])
    done, _ = run(project, "--judge", "python:judges:missing")
    assert done.code == 2
    assert "--judge python:judges:missing: module 'judges' has no 'missing'" in done.err
    done = project.assay("run", "evals", env={"ASSAY_JUDGE": "python:nowhere:grade"})
    clean(done)
    assert done.code == 2 and "ASSAY_JUDGE python:nowhere:grade: cannot import" in done.err
    done, _ = run(project, "--judge", "python:judges")
    assert done.code == 2 and "write python:module:function" in done.err


# --- pairwise --------------------------------------------------------------------------

PICK = """
def pick(prompt, inputs):
    first, second = str(inputs["first"]), str(inputs["second"])
    assert first in prompt and second in prompt and inputs["kind"] == "pairwise"
    if "RAISE" in first + second:
        raise ValueError("cannot pick between " + first + " and " + second)
    if inputs["criteria"] != "the more helpful answer":
        return "maybe"
    return "A" if "bravo" in first else "B"
"""

ALPHA = "def agent(input):\n    return 'alpha says ' + str(input)\n"

PAIR_SUITE = """
suite: pw/pyjudge@1
target: python:alpha_agent:agent
trials: 2
hidden: hidden/
cases:
  - {id: one, input: one, expect: [{contains: says}]}
  - {id: two, input: two, expect: [{contains: says}]}
  - {id: odd, input: RAISE, expect: [{contains: says}]}
"""

PAIR_HIDDEN = f"""
- id: {CANARY}-pair
  input: "RAISE {CANARY}"
  expect: [{{contains: says}}]
"""


def test_pairwise_asks_a_python_judge(project: Project) -> None:
    project.write("evals/alpha_agent.py", ALPHA)
    project.write("evals/bravo_agent.py", ALPHA.replace("alpha", "bravo"))
    project.write("evals/pair.suite.yaml", PAIR_SUITE)
    project.write("evals/hidden/cases.yaml", PAIR_HIDDEN)
    project.write("pick.py", PICK)  # pairwise imports its judge from the working folder
    ids = []
    for args in ((), ("--target", "python:bravo_agent:agent")):
        done, report = run(project, *args)
        assert done.code == 0, done.out + done.err
        ids.append(report["run_id"])
    done = project.assay("pairwise", *ids, "--criteria", "the more helpful answer",
                         "--judge", "python:pick:pick", "--seed", "5", "--json", "-")
    clean(done)
    assert done.code == 0, done.err
    document = json.loads(done.out)
    rows = {(r["case"], r["n"]): r for r in document["rows"]}
    for case in ("one", "two"):
        assert [rows[(case, n)]["choice"] for n in (1, 2)] == ["b", "b"]
    for key in (("odd", 1), ("holdout-1", 1)):
        assert rows[key]["choice"] is None
        assert rows[key]["note"] == "judge error: raised ValueError"
    preference = document["preference"]
    assert (preference["b_wins"], preference["a_wins"], preference["undecided"]) == (4, 0, 4)
    judge = document["judge"]
    assert judge["uri"] == "python:pick:pick" and judge["answered_by"] == ["python:pick:pick"]
    assert judge["parameters"]["module_digest"] == file_digest(project.root / "pick.py")
    assert document["cost"]["judge_usd"] is None
    # The same comparison by an edited judge is asked under another prompt digest.
    project.write("pick.py", PICK + "\n# tuned\n")
    again = project.assay("pairwise", *ids, "--criteria", "the more helpful answer",
                          "--judge", "python:pick:pick", "--seed", "5", "--json", "-")
    clean(again)
    assert json.loads(again.out)["judge"]["prompt_digest"] != judge["prompt_digest"]
    # A judge that cannot be loaded is a usage error before anything is asked.
    missing = project.assay("pairwise", *ids, "--criteria", "x", "--judge", "python:pick:gone")
    clean(missing)
    assert missing.code == 2 and "judge python:pick:gone: module 'pick' has no 'gone'" \
        in missing.err

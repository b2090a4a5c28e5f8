"""A judge that is a Python callable: naming it, loading it, calling it (SPEC §9).

The judges are real modules written into the test's folder and imported the
way a suite's judge is; nothing of assay's is patched. Each test names its
modules uniquely: a module imported once stays in ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from assay.canonical import canonical, file_digest
from assay.errors import UsageError
from assay.judging.answers import OUT_OF_FORM_JUDGE, OUT_OF_RANGE
from assay.judging.judges import JudgeRef, parse_judge, resolve_judge
from assay.judging.opinion import Opinion, judge_opinion, score_answer
from assay.judging.panel import JudgeOptions, Panel
from assay.judging.python_judge import MAX_ANSWER, Caller, check, inputs_of, load
from assay.model import Suite, Trace

from ..fuzz_corpus import HOSTILE, MEGABYTE, PAGES

_names = itertools.count()


def module(folder: Path, source: str, stem: str = "judge") -> str:
    """Write ``source`` as a module of a fresh name in ``folder``; its name."""
    name = f"{stem}_{next(_names)}_{abs(hash(str(folder))) % 10**8}"
    (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return name


def ask(judge: Any, prompt: str = "the prompt", inputs: dict[str, Any] | None = None,
        timeout_s: float = 5.0) -> Opinion:
    caller = Caller(2)
    try:
        return asyncio.run(caller.ask(judge, prompt, inputs or {"kind": "judge"},
                                      prompt_digest="sha256:p", timeout_s=timeout_s))
    finally:
        caller.close()


# -- naming ---------------------------------------------------------------------------

def test_a_python_judge_is_named_by_its_module_and_function() -> None:
    assert parse_judge("python:pkg.judges:grade") == JudgeRef("python", "pkg.judges:grade")
    assert parse_judge(" python:judges:Grader.grade ").uri == "python:judges:Grader.grade"
    for wrong in ("python:", "python:judges", "python:judges:", "python::grade",
                  "python:judges:grade:more", "python:my-judges:grade", "python:1x:grade"):
        with pytest.raises(ValueError, match="python:module:function"):
            parse_judge(wrong)
    with pytest.raises(ValueError, match="python:module:function"):
        parse_judge("python")


def test_a_python_judge_takes_its_place_in_the_precedence() -> None:
    env = {"ASSAY_JUDGE": "python:env_judge:grade"}
    assert resolve_judge(None, None, "openai:m", env) == JudgeRef("python", "env_judge:grade")
    assert resolve_judge(None, "python:flag:grade", "openai:m", env).uri == "python:flag:grade"
    assert resolve_judge("python:own:grade", "openai:x", None, {}).uri == "python:own:grade"
    # A bare model name keeps the kind of the judge it would get; a python judge has no
    # models, so a bare name beside one is refused rather than read as something else.
    with pytest.raises(ValueError, match="bare model name"):
        resolve_judge("gpt-judge", None, "python:judges:grade", {})
    assert resolve_judge("gpt-judge", None, "openai:m", {}) == JudgeRef("openai", "gpt-judge")


# -- loading and identity ---------------------------------------------------------------

def test_its_identity_is_its_path_and_its_module_files_digest(tmp_path: Path) -> None:
    name = module(tmp_path, "def grade(prompt):\n    return 'pass'\n")
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    path = tmp_path / f"{name}.py"
    assert judge.parameters["callable"] == f"{name}:grade"
    assert judge.parameters["module_digest"] == file_digest(path)
    assert str(judge.parameters["code_digest"]).startswith("sha256:")
    assert judge.takes_inputs is False and judge.is_async is False
    # Loaded again unchanged: the same identity.
    assert load(JudgeRef("python", f"{name}:grade"), tmp_path).parameters == judge.parameters


def test_an_edited_judge_is_imported_again_and_is_another_judge(tmp_path: Path) -> None:
    """A long-lived process (the workbench, a worker) must not record the new file's digest
    for the old code: the module is imported again when its file changed."""
    name = module(tmp_path, "def grade(prompt):\n    return 'pass'\n")
    ref = JudgeRef("python", f"{name}:grade")
    before = load(ref, tmp_path)
    (tmp_path / f"{name}.py").write_text("def grade(prompt):\n    return 'fail'\n")
    after = load(ref, tmp_path)
    assert after.parameters["module_digest"] != before.parameters["module_digest"]
    assert after.func("x") == "fail"
    assert ask(after).raw == "fail"


def test_a_local_module_the_judge_imports_is_part_of_its_code(tmp_path: Path) -> None:
    helper = module(tmp_path, "WORD = 'pass'\n", stem="helper")
    name = module(tmp_path, f"from {helper} import WORD\n\ndef grade(prompt):\n"
                            "    return WORD\n")
    ref = JudgeRef("python", f"{name}:grade")
    before = load(ref, tmp_path).parameters
    (tmp_path / f"{helper}.py").write_text("WORD = 'fail'\n")
    after = load(ref, tmp_path).parameters
    assert after["module_digest"] == before["module_digest"]  # the judge's own file is as it was
    assert after["code_digest"] != before["code_digest"]      # what it runs is not


@pytest.mark.parametrize(("source", "spec", "reason"), [
    (None, "no_such_judge_module:grade", "cannot import 'no_such_judge_module'"),
    ("def grade(prompt):\n    return 'pass'\n", "{name}:missing", "has no 'missing'"),
    ("grade = 'not callable'\n", "{name}:grade", "is not callable"),
    ("class Grade:\n    pass\n", "{name}:Grade", "is a class, not a function"),
    ("raise RuntimeError('the judge module breaks on import')\n", "{name}:grade",
     "RuntimeError: the judge module breaks on import"),
    ("def grade(prompt)\n    return 'pass'\n", "{name}:grade", "SyntaxError"),
])
def test_a_judge_that_cannot_be_loaded_says_why(tmp_path: Path, source: str | None, spec: str,
                                                reason: str) -> None:
    name = module(tmp_path, source) if source is not None else ""
    ref = JudgeRef("python", spec.format(name=name))
    for loading in (check, load):  # a suite's load checks; a run loads
        with pytest.raises(ValueError) as caught:
            loading(ref, tmp_path)
        assert reason in str(caught.value)
        assert "Traceback" not in str(caught.value)


# -- calling ----------------------------------------------------------------------------

def test_the_answer_is_an_opinion_read_like_a_models(tmp_path: Path) -> None:
    name = module(tmp_path, "def grade(prompt):\n    return 'pass\\nit apologises'\n")
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    opinion = ask(judge)
    assert opinion.raw == "pass\nit apologises" and opinion.error is None
    assert opinion.model == f"python:{name}:grade"
    assert opinion.prompt_digest == "sha256:p"
    assert opinion.parameters == judge.parameters
    # No tokens, no cost: unavailable, never 0.
    assert (opinion.input_tokens, opinion.output_tokens, opinion.cost_usd) == (None, None, None)
    assert opinion.to_json()["cost_evidence"] == "unavailable"
    assert opinion.latency_s >= 0
    assert judge_opinion(opinion) == ("pass", f"the judge (python:{name}:grade) said pass")
    assert Opinion.from_json(opinion.to_json()) == opinion


def test_a_judge_with_two_parameters_gets_the_inputs_as_a_copy(tmp_path: Path) -> None:
    name = module(tmp_path, """
        SEEN = []

        def grade(prompt, inputs):
            SEEN.append((prompt, dict(inputs)))
            inputs["actual"]["reply"] = "changed by the judge"
            return "7" if inputs["kind"] == "rubric" else "fail"
    """)
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    assert judge.takes_inputs is True
    actual = {"reply": "Sorry!"}
    given = inputs_of("rubric", criterion="tone", description="polite", expected="apology",
                      actual=actual)
    opinion = ask(judge, "rubric prompt", given)
    assert score_answer(opinion).value == 0.7
    [(prompt, seen)] = sys.modules[name].SEEN
    assert prompt == "rubric prompt"
    assert seen["kind"] == "rubric" and seen["criterion"] == "tone"
    assert seen["description"] == "polite" and seen["expected"] == "apology"
    assert actual == {"reply": "Sorry!"}  # the trace's output is not the judge's to change


def test_an_async_judge_is_awaited(tmp_path: Path) -> None:
    name = module(tmp_path, """
        import asyncio

        async def grade(prompt, inputs):
            await asyncio.sleep(0)
            return "pass" if inputs["criteria"] == "apologises" else "fail"

        class Grader:
            async def __call__(self, prompt):
                return "fail"

        grader = Grader()
    """)
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    assert judge.is_async
    assert ask(judge, inputs=inputs_of("judge", criteria="apologises")).raw == "pass"
    # An object whose __call__ is a coroutine function: its coroutine is awaited too.
    assert ask(load(JudgeRef("python", f"{name}:grader"), tmp_path)).raw == "fail"


@pytest.mark.parametrize("body", [
    "raise ValueError('the judge broke\\non two lines')",
    "raise SystemExit(3)",
])
def test_a_judge_that_raises_leaves_an_inconclusive_with_the_reason_kept(
        tmp_path: Path, body: str) -> None:
    name = module(tmp_path, f"def grade(prompt):\n    print('looked at it')\n    {body}\n")
    opinion = ask(load(JudgeRef("python", f"{name}:grade"), tmp_path))
    kind = "ValueError" if "ValueError" in body else "SystemExit"
    assert opinion.raw is None and opinion.error == f"raised {kind}"
    assert judge_opinion(opinion) == ("inconclusive", f"judge error: raised {kind}")
    # What it printed and what it raised, type and message on one line, are kept with the
    # opinion (erasable, by digest), never in its error, which the ledger entry holds.
    assert opinion.stream is not None
    lines = opinion.stream.splitlines()
    assert lines[0] == "looked at it"
    if kind == "ValueError":
        assert lines[-1] == "raised ValueError: the judge broke on two lines"
    else:
        assert lines[-1] == "raised SystemExit: 3"


def test_a_hostile_exception_is_one_line_of_plain_text(tmp_path: Path) -> None:
    name = module(tmp_path, """
        class Nasty(Exception):
            def __str__(self):
                raise RuntimeError("no message for you")

        def grade(prompt, inputs):
            if inputs["which"] == "nasty":
                raise Nasty()
            raise ValueError("a\\x00b\\x1b[31m red \\ud800 " + "x" * 5000)
    """)
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    nasty = ask(judge, inputs={"which": "nasty"})
    assert nasty.error == "raised Nasty"
    assert nasty.stream == "raised Nasty: (its message cannot be read)\n"
    loud = ask(judge, inputs={"which": "loud"})
    assert loud.stream is not None
    line = loud.stream.rstrip("\n")
    assert "\n" not in line and len(line) < 300
    assert all(c.isprintable() for c in line)
    canonical(loud.to_json())  # storable: a lone surrogate would make this raise


@pytest.mark.parametrize(("body", "error"), [
    ("return 7", "the judge returned int, not text"),
    ("return None", "the judge returned None, not text"),
    ("return b'pass'", "the judge returned bytes, not text"),
    ("return ['pass']", "the judge returned list, not text"),
    (f"return 'p' * {MAX_ANSWER + 1}", f"the answer is longer than {MAX_ANSWER:,} characters"),
])
def test_an_answer_that_is_not_text_is_inconclusive(tmp_path: Path, body: str,
                                                    error: str) -> None:
    name = module(tmp_path, f"def grade(prompt):\n    {body}\n")
    opinion = ask(load(JudgeRef("python", f"{name}:grade"), tmp_path))
    assert (opinion.raw, opinion.error) == (None, error)
    assert judge_opinion(opinion)[0] == "inconclusive"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_judge_past_its_timeout_is_inconclusive_and_frees_the_run(tmp_path: Path,
                                                                     kind: str) -> None:
    source = {
        "sync": "import threading\nNEVER = threading.Event()\n\n"
                "def grade(prompt):\n    NEVER.wait()\n",
        "async": "import asyncio\n\nasync def grade(prompt):\n    await asyncio.Event().wait()\n",
    }[kind]
    name = module(tmp_path, source)
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    opinion = ask(judge, timeout_s=0.2)
    assert (opinion.raw, opinion.error) == (None, "timed out after 0.2s")
    if kind == "sync":
        sys.modules[name].NEVER.set()  # the abandoned thread may end now


def test_an_out_of_form_or_hostile_answer_is_kept_and_never_crashes(tmp_path: Path) -> None:
    answers = {"chat": "Well, it depends.", "hostile": HOSTILE, "markup": PAGES["html"],
               "megabyte": MEGABYTE, "score": "11", "first": "pass" + HOSTILE}
    name = module(tmp_path, "ANSWERS = " + repr(answers) + "\n\n"
                            "def grade(prompt, inputs):\n    return ANSWERS[inputs['which']]\n")
    judge = load(JudgeRef("python", f"{name}:grade"), tmp_path)
    for which in answers:
        opinion = ask(judge, inputs={"which": which})
        assert opinion.error is None and opinion.raw is not None
        assert judge_opinion(opinion)[0] == "inconclusive", which
        json.dumps(canonical(opinion.to_json()).decode())  # storable, whatever it said
    assert judge_opinion(ask(judge, inputs={"which": "chat"}))[1] == OUT_OF_FORM_JUDGE
    assert score_answer(ask(judge, inputs={"which": "score"})).why == OUT_OF_RANGE
    # Lone surrogates are made storable: the rest of the answer is kept as it came.
    hostile = ask(judge, inputs={"which": "hostile"}).raw
    assert hostile is not None and "\ud800" not in hostile and "[/INST]" in hostile


def test_what_a_judge_prints_stays_out_of_assays_output(tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    name = module(tmp_path, "def grade(prompt):\n    print('JUDGE-PRINTED ' + prompt)\n"
                            "    return 'pass'\n")
    opinion = ask(load(JudgeRef("python", f"{name}:grade"), tmp_path), "SECRET-PROMPT")
    out, err = capfd.readouterr()
    assert "SECRET-PROMPT" not in out + err
    assert opinion.stream == "JUDGE-PRINTED SECRET-PROMPT\n"


# -- in a panel -------------------------------------------------------------------------

def suite(folder: Path, judge: str, expect: list[Any]) -> Suite:
    found = Suite.model_validate({"suite": "demo/pyjudge@1", "judge": judge, "cases": [
        {"id": "c1", "input": "hi", "expected": "an apology", "expect": expect}]})
    return found.model_copy(update={"source": str(folder / "a.suite.yaml")})


def test_a_panel_asks_a_python_judge_with_the_checks_pieces(tmp_path: Path) -> None:
    name = module(tmp_path, """
        SEEN = []

        def grade(prompt, inputs):
            SEEN.append(inputs)
            return "9" if inputs["kind"] == "rubric" else "pass"
    """)
    rubric = {"criteria": [{"name": "tone", "description": "polite", "weight": 1},
                           {"name": "remedy", "description": "offers one", "weight": 2}],
              "pass_at": 0.5}
    loaded = suite(tmp_path, f"python:{name}:grade",
                   [{"judge": {"criteria": "apologises"}}, {"rubric": rubric}])
    panel = Panel(loaded, JudgeOptions(cache=False, env={}))
    case = loaded.cases[0]
    trace = Trace(output={"reply": "Sorry!"}, status="ok")

    async def judged() -> dict[int, list[Opinion]]:
        try:
            return await panel.opinions(case, 1, trace)
        finally:
            await panel.close()

    found = asyncio.run(judged())
    assert [o.raw for o in found[0]] == ["pass"]
    assert [o.raw for o in found[1]] == ["9", "9"]
    seen = sorted(sys.modules[name].SEEN, key=lambda i: (i["kind"], i.get("criterion", "")))
    assert seen[0] == {"kind": "judge", "criteria": "apologises", "expected": "an apology",
                       "actual": {"reply": "Sorry!"}}
    assert [(i["criterion"], i["description"]) for i in seen[1:]] == [
        ("remedy", "offers one"), ("tone", "polite")]
    # The module's digest is part of what the opinion says it was asked under.
    assert found[0][0].parameters["module_digest"] == file_digest(tmp_path / f"{name}.py")
    facet = panel.facet(case)
    (tmp_path / f"{name}.py").write_text("def grade(prompt):\n    return 'pass'\n")
    assert Panel(loaded, JudgeOptions(cache=False, env={})).facet(case) != facet


def test_a_panel_refuses_a_python_judge_it_cannot_load(tmp_path: Path) -> None:
    loaded = suite(tmp_path, "openai:m", [{"judge": {"criteria": "apologises"}}])
    with pytest.raises(UsageError, match=r"--judge python:nowhere_judge:grade: cannot import"):
        Panel(loaded, JudgeOptions(judge="python:nowhere_judge:grade", env={}))
    with pytest.raises(UsageError, match=r"ASSAY_JUDGE python:nowhere_judge:grade"):
        Panel(loaded, JudgeOptions(env={"ASSAY_JUDGE": "python:nowhere_judge:grade"}))

"""``invocation: {mode, skill}`` through ``assay run`` (SPEC §2): bad ones exit 2 with the
file and line and no traceback, before any agent starts; a target that cannot come to
the skill is refused the same way."""

from __future__ import annotations

import json
import os

import pytest

SKILL = "---\nname: greet\ndescription: Greets in the house style.\n---\n\nSay HELLO.\n"

AGENT = """
    def agent(prompt, tools):
        return "hello " + prompt
    """


def _project(project, invocation: str, *, target: str = "python:agent:agent",
             skill_at: str = ".claude/skills/greet/SKILL.md", extra: str = "") -> None:
    project.write(f"evals/ws/{skill_at}", SKILL)
    project.write("evals/agent.py", AGENT)
    project.write("evals/s.suite.yaml", f"""
        suite: t/inv@1
        target: {json.dumps(target)}
        workspace: ws
        cases:
          - id: greets
            input: Ada
            invocation: {invocation}
            expect:
              - contains: hello
        {extra}""")


@pytest.mark.parametrize(("invocation", "line", "said"), [
    ("{mode: sometimes, skill: greet}", 7, "invocation: mode 'sometimes' is not a mode"),
    ("{mode: explicit, skil: greet}", 7, "invocation: unknown key 'skil'"),
    ("{mode: none, skill: gret}", 5,
     "case 'greets': invocation: skill 'gret' is not in the workspace ws/: looked for "
     ".claude/skills/gret/SKILL.md"),
])
def test_a_bad_invocation_exits_2_with_its_file_and_line(project, invocation: str, line: int,
                                                         said: str) -> None:
    _project(project, invocation)
    done = project.assay("run", "--no-store")
    assert done.code == 2, done.out + done.err
    assert f"s.suite.yaml:{line}: {said}" in done.err, done.err
    assert "Traceback" not in done.out + done.err


def test_explicit_on_a_target_that_cannot_invoke_a_skill_is_refused(project) -> None:
    _project(project, "{mode: explicit, skill: greet}")
    done = project.assay("run", "--no-store")
    assert done.code == 2, done.out + done.err
    assert ("s.suite.yaml:5: case 'greets': invocation explicit of skill 'greet' cannot run "
            "on target python:agent:agent: only a host CLI (claude, codex) invokes a skill its "
            "own way") in done.err, done.err
    assert "Traceback" not in done.err


def test_a_host_that_does_not_look_where_the_skill_is_is_refused_before_it_starts(
        project) -> None:
    # Nothing is started: no CLI on PATH is needed to be told.
    _project(project, "{mode: automatic, skill: greet}", target="claude")
    env = {**os.environ, "PATH": "/nonexistent"}
    done = project.assay("run", "--no-store", "--target", "codex", env=env)
    assert done.code == 2, done.out + done.err
    assert ("invocation automatic of skill 'greet' cannot run on target codex: codex looks "
            "for it in .agents/skills/greet/SKILL.md or .codex/skills/greet/SKILL.md, and the "
            "workspace holds it only in .claude/skills/greet/SKILL.md") in done.err, done.err


def test_automatic_and_none_run_on_any_target_that_takes_a_workspace(project) -> None:
    """A Python agent has no skills to show: ``none``'s check is inconclusive, never a pass."""
    _project(project, "{mode: none, skill: greet}")
    done = project.assay("run", "--no-store", "--json", "out.json")
    assert done.code == 1, done.out + done.err
    (case,) = json.loads((project.root / "out.json").read_text())["cases"]
    verdicts = {v["check"]: v for v in case["trials"][0]["verdicts"]}
    assert verdicts["contains"]["outcome"] == "pass"
    assert verdicts["never_activates_skill"]["outcome"] == "inconclusive"
    assert case["facets"]["invocation"] == "none:greet"


def test_a_hidden_case_s_invocation_is_refused_without_its_content(project) -> None:
    _project(project, "automatic", extra="hidden: hidden\n")
    project.write("evals/hidden/h.yaml", "id: CANARY-id\ninput: CANARY-in\n"
                                         "invocation: {mode: explicit, skill: greet}\n")
    done = project.assay("run", "--no-store")
    assert done.code == 2, done.err
    assert "CANARY" not in done.out + done.err and "withheld" in done.err, done.err

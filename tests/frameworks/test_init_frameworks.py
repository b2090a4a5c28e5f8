"""``assay init --framework X``: a framework agent as its docs show it, and a suite for it.

That each starter runs green against a model is proven where a user reads it:
docs/your-agent.md runs ``assay init --framework X`` and ``assay run`` for every
framework against the rule model (tests/frameworks/test_guide_doc.py), and the first
test here holds the page to that. The rest needs no model: what is written and
printed, that the five share one folder, that the agents import nothing of assay,
and what a user sees when the framework is not installed.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml
from tests.docs.pages import Command, steps

from assay.starter import FRAMEWORKS, KINDS, files

from .conftest import Project

pytestmark = pytest.mark.real

PAGE = Path(__file__).resolve().parents[2] / "docs" / "your-agent.md"


def test_the_guide_page_runs_every_starter_as_written() -> None:
    """Each framework's starter is written by init into a folder of its own on the page,
    and that folder's suites run there, with the target the starter names."""
    commands = [s.line for s in steps(PAGE.read_text(encoding="utf-8"))
                if isinstance(s, Command)]
    for framework in FRAMEWORKS:
        made = [shlex.split(c) for c in commands if f"--framework {framework} " in c + " "]
        assert len(made) == 1, framework
        folder = made[0][-1]
        runs = [c for c in commands if shlex.split(c)[:3] == ["assay", "run", f"{folder}/evals"]
                and "--target" not in c and "--suite" not in c and "# exit" not in c]
        assert runs, f"the page never runs {folder}/evals as init wrote it"


def test_the_starters_share_one_folder_and_say_what_they_need(project: Project) -> None:
    written: dict[str, str] = {}
    for framework, needs in FRAMEWORKS.items():
        made = project.assay("init", "--framework", framework)
        assert made.code == 0, made.err
        # What to install, where, where the key goes, and the command that runs it.
        assert needs.install in made.out and needs.key in made.out, made.out
        assert "assay run evals" in made.out
        for name in files(framework):
            assert name not in written, (name, framework, written.get(name))
            written[name] = framework
    on_disk = {str(p.relative_to(project.root / "evals")) for p in
               (project.root / "evals").rglob("*") if p.is_file()}
    assert on_disk == set(written) and len(on_disk) == 2 * len(FRAMEWORKS)

    targets = {}
    for name, framework in written.items():
        text = (project.root / "evals" / name).read_text()
        if name.endswith(".suite.yaml"):
            suite = yaml.safe_load(text)
            targets[framework] = suite["target"]
            assert text.startswith(f"# A starter suite written by `assay init --framework "
                                   f"{framework}`")
            # The structural checks of SPEC §15, each at least once.
            used = {key for case in suite["cases"] for check in case["expect"] for key in check}
            assert {"calls", "never_calls", "calls_before", "asks", "within_steps",
                    "costs_at_most"} <= used, framework
            assert "SCRIPT" not in text
        else:
            # The agent is the user's: no assay in it.
            assert not re.search(r"^\s*(import|from)\s+assay\b|require\(.assay", text, re.M)
    assert targets == {
        "openai-agents": "python:agents_sdk_agent:agent",
        "langgraph": "python:langgraph_agent:agent",
        "pydantic-ai": "python:pydantic_ai_agent:agent",
        "anthropic": "python:anthropic_agent:agent",
        "node": "exec:node node_agent.mjs"}
    listed = project.assay("list", "evals")
    assert listed.code == 0, listed.err
    assert all(f"starter/support.{framework}@1" in listed.out for framework in FRAMEWORKS)


def test_framework_and_target_are_one_choice(project: Project) -> None:
    both = project.assay("init", "--framework", "langgraph", "--target", "python")
    assert both.code == 2 and "not both" in both.err and "Traceback" not in both.err
    unknown = project.assay("init", "--framework", "crewai")
    assert unknown.code == 2 and "crewai" in unknown.err and "Traceback" not in unknown.err
    assert not (project.root / "evals").exists()
    assert set(KINDS).isdisjoint(FRAMEWORKS)


def test_a_framework_not_installed_is_named_with_where_to_install_it(
        project: Project) -> None:
    """The Agents SDK is hidden from the Python that runs assay (as in a pipx install of
    assay that lacks it): the run stops at start and says what to install, and where."""
    assert project.assay("init", "--framework", "openai-agents").code == 0
    project.write("hide/sitecustomize.py", "import sys\nsys.modules['agents'] = None\n")
    path = os.pathsep.join([str(project.root / "hide"), os.environ.get("PYTHONPATH", "")])
    done = project.assay("run", "evals", "--no-store", env={"PYTHONPATH": path})
    assert done.code == 3, done.out + done.err
    said = " ".join(done.err.split())
    assert "Traceback" not in done.err
    assert "the agent imports agents, which is not installed in the Python assay runs in" \
        in said
    assert "(pip install openai-agents)" in said

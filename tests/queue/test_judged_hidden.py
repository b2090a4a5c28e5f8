"""A queued run with judged checks and private hidden cases: the same report as the local
executor's, and no hidden canary on any surface, the workers' output included."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Project
from .test_queued_runs import settled

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import JudgeServer  # noqa: E402

CANARY = "CANARY-QUEUE-5E1D"

AGENT = """
def agent(input):
    text = str(input)
    print("agent saw", text)
    if "explode" in text:
        raise ValueError("cannot handle " + text)
    if "bad" in text:
        return {"echo": text, "reply": "Not our problem. JUDGE:fail"}
    return {"echo": text, "reply": "Sorry, we resend it today. JUDGE:pass"}
"""

SUITE = """
suite: q/judged@1
target: python:j_agent:agent
trials: 2
judge: openai:judge-model
hidden: hidden/
cases:
  - id: good
    input: good
    expect:
      - {path: $.echo, equals: good}
      - judge: {criteria: The reply apologises, threshold: 0.5}
  - id: bad
    input: bad
    expect:
      - {path: $.echo, equals: bad}
      - judge: {criteria: The reply apologises, threshold: 0.5}
"""

SAMPLE = """
- id: sample-one
  input: sample
  expect: [{path: $.echo, equals: sample}]
"""

PRIVATE = f"""
- id: {CANARY}-pass
  input: {CANARY}-pass
  expect:
    - {{path: $.echo, contains: pass}}
    - judge: {{criteria: "{CANARY}-criteria", threshold: 0.5}}
- id: {CANARY}-explode
  input: {CANARY}-explode
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
- id: {CANARY}-bad
  input: {CANARY}-bad
  expect: [{{path: $.echo, equals: {CANARY}-other}}]
"""


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    with JudgeServer() as server:
        yield server


@pytest.mark.real
def test_judged_hidden_cases_on_the_queue_match_local_and_leak_nowhere(
        project: Project, judge: JudgeServer, tmp_path: Path) -> None:
    project.write("evals/j_agent.py", AGENT)
    project.write("evals/j.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", SAMPLE)
    private = tmp_path / "private" / "q" / "judged@1"
    private.mkdir(parents=True)
    (private / "cases.yaml").write_text(PRIVATE)
    env = {"ASSAY_JUDGE_BASE_URL": judge.base_url, "OPENAI_API_KEY": "sk-test"}
    hidden = ("--hidden-dir", str(tmp_path / "private"))
    local = project.assay("run", "evals", *hidden, "--db",
                          f"sqlite:///{project.root / 'l.db'}", "--seed", "3", "--json",
                          "local.json", "--no-judge-cache", env=env)
    assert local.code == 1, local.err
    project.worker(env=env)
    project.worker(env=env)
    queued = project.assay("run", "evals", *hidden, "--db", project.url, "--executor", "queue",
                           "--seed", "3", "--chunk", "2", "--json", "queued.json",
                           "--no-judge-cache", env=env)
    assert queued.code == 1, queued.err
    mine = json.loads((project.root / "local.json").read_text())
    theirs = json.loads((project.root / "queued.json").read_text())
    assert settled(theirs) == settled(mine)
    assert theirs["suite"]["hidden_source"] == "private"
    assert theirs["counts"]["hidden"]["total"] == 3
    assert {c["id"]: c["outcome"] for c in theirs["cases"] if c["split"] == "public"} == {
        "good": "pass", "bad": "fail"}
    surfaces = {"stdout": queued.out, "stderr": queued.err,
                "queued.json": (project.root / "queued.json").read_text()}
    surfaces.update({p.name: p.read_text() for p in project.root.glob("p*.*")})
    assert len(surfaces) >= 7  # both workers' stdout and stderr are among them
    for name, text in surfaces.items():
        assert CANARY not in text, f"hidden content leaked into {name}"

"""docs/assertions.md: every example, assembled into one suite, runs and passes.

The agent, its tool fixture and the grader come from the page's own blocks;
each `- id:` block is a case. A check the registry has and the page does not
show (outside the ones the page sends elsewhere) fails this test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from assay.checks import REGISTRY

DOC = Path(__file__).resolve().parents[2] / "docs" / "assertions.md"
#: Shown on pages of their own (run by their own tests): they need a judge, a
#: local model or a host CLI.
ELSEWHERE = {"judge": "judges.md", "rubric": "judges.md", "similar": "judges.md",
             "exit_code": "hosts.md", "activates_skill": "hosts.md",
             "never_activates_skill": "hosts.md", "files": "outcome-checks.md",
             "file": "outcome-checks.md", "command": "outcome-checks.md",
             "state": "outcome-checks.md"}


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_every_example_runs_and_passes(tmp_path: Path) -> None:
    agent, grader = blocks("python")
    fixture, *rest = blocks("yaml")
    cases = [case for block in rest for case in yaml.safe_load(block)]
    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "guide_agent.py").write_text(agent)
    (evals / "guide_graders.py").write_text(grader)
    (evals / "tools.yaml").write_text(fixture)
    for case in cases:
        case.setdefault("input", {"order": "A-1"})
        case.setdefault("fixture", "tools.yaml")
    suite = {"suite": "docs/assertions@1", "target": "python:guide_agent:agent",
             "cases": cases}
    (evals / "guide.suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "assay", "run", "evals", "--json", "r.json",
                           "--no-store"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    report = json.loads((tmp_path / "r.json").read_text())
    failing = {c["id"]: c.get("reason") for c in report["cases"] if c["outcome"] != "pass"}
    assert failing == {} and done.returncode == 0, (failing, done.stderr)
    shown = {name for case in cases for item in case["expect"]
             for name in (item if isinstance(item, dict) else {item: None})
             if name in REGISTRY}
    assert shown == set(REGISTRY) - set(ELSEWHERE)
    assert len(report["cases"]) == len(cases)


def test_the_checks_shown_elsewhere_are_in_a_suite_of_their_page() -> None:
    missing = []
    for name, page in ELSEWHERE.items():
        text = (DOC.parent / page).read_text(encoding="utf-8")
        files = re.findall(r"```yaml file=\S+\.suite\.yaml\n(.*?)```", text, flags=re.S)
        shown = {key for block in files for case in yaml.safe_load(block)["cases"]
                 for item in case["expect"] if isinstance(item, dict) for key in item}
        if name not in shown:
            missing.append((name, page))
    assert missing == []

"""docs/ci.md's workflow: its commands run, step by step, on a starter suite.

GitHub's parts are stood in by local ones: the store by a SQLite file, the
baseline variable by a run made first, ``$GITHUB_STEP_SUMMARY`` and
``$GITHUB_OUTPUT`` by files; the ``uses:`` steps and the install are
GitHub's and pip's, not assay's, and are skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import Project

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"


def workflow() -> dict[str, object]:
    text = DOC.read_text(encoding="utf-8")
    [block] = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    data: dict[str, object] = yaml.safe_load(block)
    return data


def test_the_documented_workflow_runs_and_gates(project: Project) -> None:
    assert project.assay("init").code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ASSAY_DB"] = f"sqlite:///{project.root / 'shared.db'}"
    base = project.assay("run", "evals", "--json", "base.json", env=env)
    assert base.code == 0, base.err
    env["ASSAY_BASELINE"] = json.loads((project.root / "base.json").read_text())["run_id"]
    env["GITHUB_STEP_SUMMARY"] = str(project.root / "summary.md")
    env["GITHUB_OUTPUT"] = str(project.root / "github_output")
    job = workflow()["jobs"]["evals"]  # type: ignore[index]
    assert set(job["env"]) == {"ASSAY_DB", "ASSAY_BASELINE"}
    outputs: dict[str, str] = {}
    ran = []
    for step in job["steps"]:
        if "run" not in step or step.get("name") == "install":
            continue
        script = re.sub(r"\$\{\{ steps\.run\.outputs\.(\w+) \}\}",
                        lambda m: outputs[m.group(1)], step["run"])
        done = subprocess.run(["bash", "-e", "-c", script], cwd=project.root, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{step['name']}: {done.stdout}{done.stderr}"
        ran.append(step["name"])
        if step.get("id") == "run":
            lines = (project.root / "github_output").read_text().splitlines()
            outputs.update(line.split("=", 1) for line in lines)
    assert ran == ["run the suites", "receipt", "gate against the baseline"]
    assert outputs["code"] == "0" and outputs["run"] != env["ASSAY_BASELINE"]
    out = project.root / "out"
    assert "starter/orders@1" in (project.root / "summary.md").read_text()
    assert "<testsuite" in (out / "junit.xml").read_text()
    gate = json.loads((out / "gate.json").read_text())
    assert gate["decision"] == "allowed" and "baseline" in gate["policies"], gate
    verified = project.assay("receipt", "verify", str(out / "receipt.json"), env=env)
    assert verified.code == 0, verified.out + verified.err

"""tests/forked.py: a forked command is what ``python -m assay`` would have been."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .forked import run_assay

SUITE = """suite: t/forked@1
target: python:agent:agent
cases:
  - {id: a, input: hi, expect: [{contains: hi there}]}
  - {id: b, input: hi, expect: [{contains: bye}]}
"""


def both(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[object, object]:
    forked = run_assay(args, cwd=cwd, env=env, timeout=60)
    plain = subprocess.run([sys.executable, "-m", "assay", *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
    return ((forked.returncode, forked.stdout, forked.stderr),
            (plain.returncode, plain.stdout, plain.stderr))


@pytest.mark.real
def test_a_forked_command_prints_and_exits_as_the_real_one(tmp_path: Path) -> None:
    (tmp_path / "s.suite.yaml").write_text(SUITE)
    # The agent module is imported from the working folder, as -m puts it on sys.path.
    (tmp_path / "agent.py").write_text("import os\n\ndef agent(text):\n"
                                       "    return text + os.environ['MARK']\n")
    env = {**os.environ, "COLUMNS": "120", "MARK": " there"}
    env.pop("ASSAY_DB", None)
    outcomes = []
    for name in ("forked", "plain"):
        args = ["run", "s.suite.yaml", "--no-store", "--json", f"{name}.json"]
        done = (run_assay(args, cwd=tmp_path, env=env, timeout=60) if name == "forked" else
                subprocess.run([sys.executable, "-m", "assay", *args], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=60))
        assert done.returncode == 1, done.stderr  # one case fails: the exit code says so
        report = json.loads((tmp_path / f"{name}.json").read_text())
        outcomes.append([c["outcome"] for c in report["cases"]])
    # The environment reached the agent, in the command's process: case a passed.
    assert outcomes == [["pass", "fail"]] * 2
    bad, bad_plain = both(["run", "missing.suite.yaml"], tmp_path, env)
    assert bad == bad_plain and bad[0] == 2 and "Traceback" not in str(bad[2])
    usage, usage_plain = both(["--help"], tmp_path, env)
    assert usage == usage_plain and "Usage:" in str(usage[1])


@pytest.mark.real
def test_a_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    (tmp_path / "s.suite.yaml").write_text(SUITE.replace("contains: bye", "contains: hi"))
    (tmp_path / "agent.py").write_text("import time\n\ndef agent(text):\n"
                                       "    time.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_assay(["run", "s.suite.yaml", "--no-store"], cwd=tmp_path,
                  env=dict(os.environ), timeout=2)

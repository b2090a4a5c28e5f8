"""Settings in pyproject.toml [tool.assay] or assay.toml: flags, then the environment, win."""

from __future__ import annotations

import json
from pathlib import Path

from assay.settings import find, load

from .conftest import Project

AGENT = """
def agent(input):
    return {"echo": input}
"""

SUITE = """
suite: cfg/echo@1
target: python:cfg_agent:agent
cases:
  - {id: a, input: x, expect: [{path: $.echo, equals: x}]}
"""


def setup(project: Project, settings: str, name: str = "pyproject.toml") -> None:
    project.write("evals/cfg_agent.py", AGENT)
    project.write("evals/cfg.suite.yaml", SUITE)
    project.write(name, settings)


def report(project: Project, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((project.root / name).read_text())
    return data


def test_the_file_sets_store_and_trials_a_flag_and_the_environment_win(
        project: Project) -> None:
    setup(project, """
        [project]
        name = "mine"

        [tool.assay]
        db = "sqlite:///data/runs.db"   # relative to this file's folder
        trials = 2
        concurrency = 3
    """)
    done = project.assay("run", "evals", "--json", "r1.json")
    assert done.code == 0, done.err
    assert report(project, "r1.json")["trials_per_case"] == 2
    assert (project.root / "data" / "runs.db").is_file()
    assert not (project.root / ".assay" / "assay.db").exists()
    # A flag wins over the file.
    done = project.assay("run", "evals", "--trials", "1", "--json", "r2.json")
    assert done.code == 0 and report(project, "r2.json")["trials_per_case"] == 1
    listed = project.assay("runs", "--json")
    assert listed.code == 0 and len(json.loads(listed.out)) == 2  # both in data/runs.db
    # The environment wins over the file.
    env = {"ASSAY_DB": f"sqlite:///{project.root / 'other.db'}"}
    assert project.assay("run", "evals", "--json", "r3.json", env=env).code == 0
    assert (project.root / "other.db").is_file()
    shown = project.assay("config", "--json", env=env)
    assert shown.code == 0, shown.err
    found = json.loads(shown.out)
    assert found["file"] == str(project.root / "pyproject.toml")
    assert found["settings"]["db"]["source"] == "environment $ASSAY_DB"
    assert found["settings"]["trials"] == {"value": 2, "source": f"{project.root}/pyproject.toml:6"}
    assert found["settings"]["judge"] == {"value": None, "source": "default"}
    # Wide enough that no cell wraps, however long this test's folder.
    table = project.assay("config", env={"COLUMNS": "400"})
    assert table.code == 0 and "pyproject.toml:7" in table.out  # concurrency's line


def test_a_bad_settings_file_names_its_line_and_exits_2(project: Project) -> None:
    setup(project, "[tool.assay]\nconcurrency = 0\n")
    for command in (("config",), ("run", "evals"), ("runs",)):
        done = project.assay(*command)
        assert done.code == 2 and "Traceback" not in done.err
        assert f"{project.root}/pyproject.toml:2: concurrency is a whole number" in done.err
    project.write("pyproject.toml", "[tool.assay]\ndb = \n")
    done = project.assay("runs")
    assert done.code == 2 and "not valid TOML" in done.err and "line 2" in done.err
    project.write("pyproject.toml", "[tool.assay]\njudg = 'openai:x'\n")
    done = project.assay("runs")
    assert done.code == 2 and "unknown setting 'judg'" in done.err and ":2:" in done.err


def test_assay_toml_comes_first_and_the_closest_folder_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.assay]\ntrials = 4\n")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no [tool.assay]
    assert find(inner) == tmp_path / "pyproject.toml"
    (tmp_path / "a" / "assay.toml").write_text("hidden_dir = 'private'\ntrials = 5\n")
    assert find(inner) == tmp_path / "a" / "assay.toml"
    found = load(find(inner))
    assert found.values == {"hidden_dir": str(tmp_path / "a" / "private"), "trials": 5}
    assert [s.source for s in found.effective({}) if s.key == "trials"] == \
        [f"{tmp_path / 'a' / 'assay.toml'}:2"]


def test_a_command_imported_when_asked_for_takes_the_files_settings(project: Project) -> None:
    """Commands other than `run` are imported lazily by the CLI; in a fresh interpreter (not
    the tests' zygote, which imports them all) `assay runs` still reads the file's store."""
    import subprocess
    import sys

    setup(project, """
        [tool.assay]
        db = "sqlite:///data/runs.db"
    """)
    assert project.assay("run", "evals", "--json", "r1.json").code == 0
    done = subprocess.run([sys.executable, "-m", "assay", "runs", "--json"], cwd=project.root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 1  # the run stored in data/runs.db, not .assay/
    assert not (project.root / ".assay" / "assay.db").exists()

"""``assay init`` writes a commented evals/ example that runs green at once (SPEC §13)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from assay.starter import files

from .conftest import Project


def with_python_on_path() -> dict[str, str]:
    # The MCP example's server runs as `python`: this interpreter, which has `mcp`.
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.parametrize(("kind", "cases", "hidden"), [("python", 3, 1), ("mcp", 4, 0)])
def test_the_example_runs_green_at_once(project: Project, kind: str, cases: int,
                                        hidden: int) -> None:
    made = project.assay("init", "--target", kind)
    assert made.code == 0, made.err
    assert "next: assay run evals" in made.out
    written = {str(p.relative_to(project.root / "evals")) for p in
               (project.root / "evals").rglob("*") if p.is_file()}
    assert written == set(files(kind))
    assert "# A starter suite written by `assay init" in \
        (project.root / "evals" / "starter.suite.yaml").read_text()
    done = project.assay("run", "evals", "--json", "r.json", env=with_python_on_path())
    assert done.code == 0, done.out + done.err
    report = json.loads((project.root / "r.json").read_text())
    assert report["scores"]["passed"] is True and report["trials_per_case"] == 3
    assert report["counts"]["public"] == {"total": cases, "passed": cases, "failed": 0,
                                          "inconclusive": 0, "broken": 0}
    assert report["counts"]["hidden"]["passed"] == hidden


def test_existing_files_are_left_alone_unless_forced(project: Project) -> None:
    assert project.assay("init", "here").code == 0
    suite = project.root / "here" / "evals" / "starter.suite.yaml"
    suite.write_text("mine\n")
    again = project.assay("init", "here")
    assert again.code == 2 and "exists already; nothing was written" in again.err
    assert "Traceback" not in again.err and suite.read_text() == "mine\n"
    forced = project.assay("init", "here", "--force")
    assert forced.code == 0 and suite.read_text().startswith("# A starter suite")
    assert "next: assay run here/evals" in forced.out
    wrong = project.assay("init", "--target", "cobol")
    assert wrong.code == 2 and "cobol" in wrong.err

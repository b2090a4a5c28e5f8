"""The validated-case cache from the command line: a re-run reads the cases it kept, and a
case broken since then still stops the run at its line before any agent is called."""

from __future__ import annotations

import json

SUITE = """
    suite: t/cached@1
    target: python:agent:run
    cases:
      - id: a
        input: hi
        expect: [{equals: hi}]
      - id: b
        input: there
        expect:
          - grader: ./graders/ok.py
    """

AGENT = """
    from pathlib import Path

    def run(input):
        with open(Path(__file__).parent / "calls.txt", "a") as fh:
            fh.write(input + "\\n")
        return input
    """


def _project(project):
    project.write("evals/agent.py", AGENT)
    project.write("evals/graders/ok.py", "print('{\"outcome\": \"pass\"}')\n")
    project.write("evals/s.suite.yaml", SUITE)
    # No .assay/ yet: the first run in a new folder makes it before the suites load.
    assert not (project.root / ".assay").exists()


def test_a_rerun_reads_the_kept_cases_and_reports_alike(project):
    _project(project)
    first = project.assay("run", "--json", "r1.json")
    assert first.code == 0, first.out + first.err
    # Kept by the first run itself, not only from the second on.
    assert len(list((project.root / ".assay/cache/cases").glob("*.json"))) == 1
    assert len(list((project.root / ".assay/cache/suites").glob("*.json"))) == 1
    again = project.assay("run", "--json", "r2.json")
    assert again.code == 0, again.out + again.err
    one, two = (json.loads((project.root / name).read_text()) for name in ("r1.json", "r2.json"))
    assert one["suite"] == two["suite"] and one["suite"]["digest"].startswith("sha256:")
    assert [c["facets"] for c in one["cases"]] == [c["facets"] for c in two["cases"]]
    assert "graders" in one["cases"][1]["facets"]


def test_a_case_broken_since_the_last_run_stops_the_run_at_its_line(project):
    _project(project)
    first = project.assay("run", "--json", "r.json")
    assert first.code == 0, first.out + first.err
    calls = (project.root / "evals/calls.txt").read_text()
    assert sorted(calls.split()) == ["hi", "there"]
    assert len(list((project.root / ".assay/cache/cases").glob("*.json"))) == 1
    (project.root / "evals/graders/ok.py").unlink()
    done = project.assay("run")
    assert done.code == 2, done.out + done.err
    assert "evals/s.suite.yaml:10: grader: grader script './graders/ok.py' does not exist" \
        in done.err
    assert "Traceback" not in done.err
    assert (project.root / "evals/calls.txt").read_text() == calls  # no agent was called

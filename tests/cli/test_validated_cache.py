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


def _stored_suites(project, *reports: str) -> list[str]:
    from assay.store.database import open_store

    store = open_store(f"sqlite:///{project.root / '.assay/assay.db'}")
    try:
        return [store.load_replay(json.loads((project.root / name).read_text())["run_id"]).suite
                for name in reports]
    finally:
        store.close()


def test_a_rerun_stores_the_suite_json_kept_by_the_first_and_a_damaged_one_is_made_again(
        project):
    """The suite's stored JSON (3 MB at 10,000 cases) is kept beside the validated cases
    and copied by a re-run of the same load instead of being written again (decision
    0089). What the store holds must not change: the same bytes every run."""
    _project(project)
    first = project.assay("run", "--json", "r1.json")
    assert first.code == 0, first.out + first.err
    [kept] = (project.root / ".assay/cache/stored").glob("*.json")
    head, body = kept.read_bytes().split(b"\n", 1)
    assert json.loads(head)["sha256"].startswith("sha256:")
    again = project.assay("run", "--json", "r2.json")
    assert again.code == 0, again.out + again.err
    assert kept.read_bytes() == head + b"\n" + body  # read, not written again
    kept.write_bytes(head + b"\n" + body.replace(b'"hi"', b'"HI"'))  # damaged: a miss
    third = project.assay("run", "--json", "r3.json")
    assert third.code == 0, third.out + third.err
    one, two, three = _stored_suites(project, "r1.json", "r2.json", "r3.json")
    assert one == two == three == body.decode()
    assert json.loads(one)["suite"]["cases"][0]["input"] == "hi"
    assert kept.read_bytes() == head + b"\n" + body  # kept again, whole


def test_a_suite_with_hidden_cases_keeps_no_stored_json(project):
    _project(project)
    project.write("evals/hidden/h.yaml", "id: CANARY-9d1\ninput: secret\n"
                                         "expect: [{equals: secret}]\n")
    text = (project.root / "evals/s.suite.yaml").read_text()
    (project.root / "evals/s.suite.yaml").write_text(
        text.replace("target: python:agent:run\n", "target: python:agent:run\nhidden: hidden/\n"))
    for _ in range(2):
        done = project.assay("run", "--json", "r.json")
        assert done.code == 0, done.out + done.err
    assert not (project.root / ".assay/cache/stored").exists() or \
        list((project.root / ".assay/cache/stored").glob("*.json")) == []
    for path in (project.root / ".assay/cache").rglob("*"):
        assert not path.is_file() or b"CANARY" not in path.read_bytes()

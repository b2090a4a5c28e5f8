"""A store that cannot be opened stops `assay run` before any agent is called.

The run waits for the writer process only once its battery is made (its
target, its registration's parts), so the check moved from before the
batteries to each battery's start: what a user sees must not have moved.
"""

from __future__ import annotations

SUITE = """
    suite: t/{name}@1
    target: python:agent:run
    cases:
      - id: a
        input: hi
        expect: [{{equals: hi}}]
    """

AGENT = """
    from pathlib import Path

    def run(input):
        with open(Path(__file__).parent / "calls.txt", "a") as fh:
            fh.write(input + "\\n")
        return input
    """


def test_a_store_that_is_not_a_database_stops_every_suite_before_any_trial(project) -> None:
    project.write("evals/agent.py", AGENT)
    project.write("evals/one.suite.yaml", SUITE.format(name="one"))
    project.write("evals/two.suite.yaml", SUITE.format(name="two"))
    (project.root / "junk.db").write_bytes(b"not a database at all" * 200)
    done = project.assay("run", "--db", "sqlite:///junk.db", "--json", "r.json")
    assert done.code == 3, done.out + done.err
    assert "Traceback" not in done.err
    assert "store" in done.err.lower()
    # Neither suite's agent ran, and no report claims a run.
    assert not (project.root / "evals/calls.txt").exists()
    assert not (project.root / "r.json").exists()
    assert "t/one@1" not in done.out and "t/two@1" not in done.out

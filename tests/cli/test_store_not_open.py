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


def test_a_registration_the_store_refuses_fails_the_run_and_keeps_none_of_its_trials(
        project) -> None:
    """A registration the store refuses fails the run with the store's error, exit 3, no
    report, and no trial kept without its run (decision 0088 tried registering while the
    battery starts, and kept this guard when it went back)."""
    import sqlite3

    project.write("evals/agent.py", AGENT)
    project.write("evals/one.suite.yaml", "suite: t/one@1\ntarget: python:agent:run\ncases:\n"
                  + "".join(f"  - id: c{n}\n    input: hi\n    expect: [{{equals: hi}}]\n"
                            for n in range(300)))
    first = project.assay("run", "--json", "first.json")  # a store, with its schema
    assert first.code == 0, first.out + first.err
    with sqlite3.connect(project.root / ".assay/assay.db") as connection:
        connection.execute("CREATE TRIGGER refuse BEFORE INSERT ON runs "
                           "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    done = project.assay("run", "--json", "r.json")
    assert done.code == 3, done.out + done.err
    assert "Traceback" not in done.err
    assert done.err.startswith("assay: error: run ") and "stored" in done.err  # the store's
    assert not (project.root / "r.json").exists()
    with sqlite3.connect(project.root / ".assay/assay.db") as connection:
        runs = connection.execute("SELECT count(*) FROM runs").fetchone()[0]
        trials = connection.execute("SELECT count(DISTINCT run_id) FROM trials").fetchone()[0]
    assert (runs, trials) == (1, 1)  # the first run's only

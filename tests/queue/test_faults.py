"""Queued batteries when things die: a worker killed mid-chunk, a trial that kills every
worker that runs it, the submitter killed. Real `assay worker` subprocesses, lease 3 s."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from assay.store import schema
from assay.store.database import open_store

from .conftest import Project, wait_for
from .gate import AGENT, Gate


@pytest.fixture
def gate() -> Iterator[Gate]:
    made = Gate()
    yield made
    made.open()
    made.close()


def write(project: Project, inputs: list[str], trials: int = 1) -> None:
    project.write("evals/g_agent.py", AGENT)
    lines = ["suite: q/faults@1", "target: python:g_agent:agent", f"trials: {trials}",
             "timeout_s: 120", "cases:"]
    lines += [f"  - {{id: {name}, input: {name}, expect: [{{path: $.echo, equals: {name}}}]}}"
              for name in inputs]
    project.write("evals/g.suite.yaml", "\n".join(lines) + "\n")


Trial = tuple[str, int]


def recorded(url: str, run_id: str
             ) -> tuple[Counter[Trial], dict[Trial, tuple[str, str | None]], str]:
    """Each (case, trial) stored, how often; their outcome and reason; the run's status."""
    store = open_store(url)
    t, r = schema.trials.c, schema.runs.c
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(t.case_id, t.n, t.outcome, t.reason)
                                  .where(t.run_id == run_id)).all()
        status = connection.scalar(sa.select(r.status).where(r.run_id == run_id))
    store.close()
    return (Counter((row.case_id, row.n) for row in rows),
            {(row.case_id, row.n): (row.outcome, row.reason) for row in rows}, str(status))


def verified(project: Project) -> None:
    done = project.assay("ledger", "verify", "--db", project.url)
    assert done.code == 0, done.out + done.err


@pytest.mark.real
def test_a_worker_killed_mid_chunk_loses_nothing_and_records_nothing_twice(
        project: Project, gate: Gate) -> None:
    names = [f"c{i}" for i in range(8)]
    write(project, names)
    env = {"AGENT_GATE": str(gate.port)}
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach", "--chunk", "3", env=env)
    assert queued.code == 0, queued.err
    run_id = queued.out.split()[0]
    doomed = project.worker(concurrency=4, env=env)
    gate.waiting(4)  # four trials in flight inside it, none recorded
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=30)
    gate.open()
    project.worker(concurrency=4, env=env)
    project.worker(concurrency=4, env=env)
    followed = project.assay("show", run_id, "--db", project.url, "--follow", "--json",
                             env=env)
    assert followed.code == 0, followed.err
    report = json.loads(followed.out)
    assert [c["outcome"] for c in report["cases"]] == ["pass"] * 8
    counts, outcomes, status = recorded(project.url, run_id)
    assert status == "sealed"
    assert counts == Counter({(name, 1): 1 for name in names})
    verified(project)
    # The killed worker's trials ran again elsewhere: the agent saw them twice.
    assert len(gate.calls) >= 8 + 4


@pytest.mark.real
def test_a_trial_that_kills_every_worker_ends_broken_and_the_rest_pass(
        project: Project, gate: Gate) -> None:
    names = ["a", "b", "poison", "c", "d"]
    write(project, names)
    env = {"AGENT_GATE": str(gate.port)}
    gate.open()
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach", "--chunk", "5", env=env)
    assert queued.code == 0, queued.err
    run_id = queued.out.split()[0]

    def sealed() -> bool:
        # Keep two workers alive: the poison takes one down each time it runs.
        for process in list(project.workers):
            if process.poll() is not None:
                project.workers.remove(process)
        while len(project.workers) < 2:
            project.worker(concurrency=2, env=env)
        return recorded(project.url, run_id)[2] == "sealed"

    wait_for(sealed, timeout=120, what="the run to be sealed")
    counts, outcomes, _ = recorded(project.url, run_id)
    assert counts == Counter({(name, 1): 1 for name in names})
    outcome, reason = outcomes[("poison", 1)]
    assert outcome == "broken" and reason is not None and "stopped 3 times" in reason
    assert all(outcomes[(name, 1)][0] == "pass" for name in names if name != "poison")
    # Run until it had stopped three workers (more only if a busy machine made a worker
    # miss its heartbeat while running it): never given up on before that.
    assert gate.calls.count("poison") >= 3
    verified(project)


@pytest.mark.real
def test_the_submitter_can_die_and_the_battery_goes_on(project: Project, gate: Gate) -> None:
    names = [f"c{i}" for i in range(4)]
    write(project, names)
    env = {"AGENT_GATE": str(gate.port)}
    project.worker(concurrency=4, env=env)
    submitter = project.start("run", "evals", "--db", project.url, "--executor", "queue",
                              env=env)
    gate.waiting(4)  # the battery is in the worker; the submitter is following it
    os.killpg(submitter.pid, signal.SIGKILL)
    submitter.wait(timeout=30)
    gate.open()
    store = open_store(project.url)
    with store.engine.connect() as connection:
        run_id = connection.scalar(sa.select(schema.runs.c.run_id))
    store.close()
    resumed = project.assay("run", "--resume", str(run_id), "--db", project.url, env=env)
    assert resumed.code == 0, resumed.err
    assert str(run_id) in resumed.out
    counts, _, status = recorded(project.url, str(run_id))
    assert status == "sealed" and counts == Counter({(name, 1): 1 for name in names})


def ledger_verdicts(url: str, run_id: str) -> int:
    """The run's trial-verdict entries in the ledger."""
    store = open_store(url)
    found = 0
    for entry in store.ledger.entries():
        if entry.kind == "trial-verdict":
            content = store.ledger.content(entry.content_digest)
            assert content is not None
            found += json.loads(content)["run_id"] == run_id
    store.close()
    return found


@pytest.mark.real
def test_a_worker_that_wakes_after_its_lease_records_nothing(
        project: Project, gate: Gate) -> None:
    names = [f"c{i}" for i in range(4)]
    write(project, names)
    env = {"AGENT_GATE": str(gate.port)}
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach", "--chunk", "4", env=env)
    run_id = queued.out.split()[0]
    sleeper = project.worker(concurrency=4, env=env)
    gate.waiting(4)
    os.killpg(sleeper.pid, signal.SIGSTOP)  # past its lease, with its four trials in hand
    try:
        project.worker(concurrency=4, env=env)
        gate.open()
        wait_for(lambda: recorded(project.url, run_id)[2] == "sealed", timeout=120,
                 what="the other worker to seal the run")
    finally:
        os.killpg(sleeper.pid, signal.SIGCONT)
    # Awake, it finishes its four trials and tries to record them: refused whole.
    log = project.root / "p0.err"  # the sleeper's
    wait_for(lambda: "no longer this worker's" in log.read_text(), timeout=60,
             what="the woken worker to try to record")
    counts, outcomes, _ = recorded(project.url, run_id)
    assert counts == Counter({(name, 1): 1 for name in names})
    assert all(outcome == "pass" for outcome, _ in outcomes.values())
    assert ledger_verdicts(project.url, run_id) == 4
    verified(project)


@pytest.mark.real
def test_a_worker_with_another_agent_refuses_and_the_follower_says_so(
        project: Project, gate: Gate) -> None:
    write(project, ["a", "b"])
    env = {"AGENT_GATE": str(gate.port)}
    gate.open()
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach", env=env)
    run_id = queued.out.split()[0]
    agent = project.root / "evals" / "g_agent.py"
    agent.write_text(agent.read_text() + "\n# another version\n")
    project.worker(env=env)
    followed = project.assay("run", "--resume", run_id, "--db", project.url, env=env)
    assert followed.code == 3, followed.err
    assert "failed in every worker" in followed.err and "Traceback" not in followed.err
    log = (project.root / "p0.err").read_text()
    assert "is not the one the run registered" in log
    counts, _, status = recorded(project.url, run_id)
    assert status == "open" and not counts and gate.calls == []


@pytest.mark.real
def test_sigterm_lets_a_worker_finish_the_chunks_in_hand_then_stop(
        project: Project, gate: Gate) -> None:
    names = [f"c{i}" for i in range(6)]
    write(project, names)
    env = {"AGENT_GATE": str(gate.port)}
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach", "--chunk", "4", env=env)
    run_id = queued.out.split()[0]
    leaving = project.worker("--jobs", "1", concurrency=4, env=env)
    gate.waiting(4)  # its one chunk's four trials in flight
    os.killpg(leaving.pid, signal.SIGTERM)
    gate.open()
    assert leaving.wait(timeout=60) == 0
    counts, _, status = recorded(project.url, run_id)
    assert status == "open" and len(counts) == 4  # its chunk, finished and recorded
    assert "took back" not in (project.root / "p0.err").read_text()
    project.worker(env=env)
    followed = project.assay("show", run_id, "--db", project.url, "--follow", env=env)
    assert followed.code == 0, followed.err
    counts, _, status = recorded(project.url, run_id)
    assert status == "sealed" and counts == Counter({(name, 1): 1 for name in names})


@pytest.mark.real
def test_only_a_chunk_that_had_started_is_blamed_for_its_workers_stop(project: Project) -> None:
    # Two single-trial chunks claimed by one worker that then died: one had begun, the
    # other was still waiting its turn (behind a suspect, say). The sweeper adds a stall
    # to the first only, so a bystander never reaches three stalls by waiting.
    from assay.queue.leases import take_back
    from assay.queue.tasks import make_app

    write(project, ["begun", "waiting"])
    queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                           "--detach", "--chunk", "1")
    assert queued.code == 0, queued.err
    run_id = queued.out.split()[0]
    store = open_store(project.url)
    c = schema.run_chunks.c
    app = make_app(project.url)
    with app.open():
        with store.engine.begin() as connection:
            chunks = {decode_case(row.items): (row.chunk, row.job_id) for row in
                      connection.execute(sa.select(c.chunk, c["items"], c.job_id)
                                         .where(c.run_id == run_id))}
            connection.execute(sa.text("UPDATE procrastinate_jobs SET status = 'doing' "
                                       "WHERE id = ANY(:jobs)"),
                               {"jobs": [job for _, job in chunks.values()]})
            connection.execute(schema.run_chunks.update().where(
                c.run_id == run_id, c.chunk == chunks["begun"][0]).values(started=True))
        said = [take_back(store, app, job) for _, job in chunks.values()]
    assert said == ["split into 1", "split into 1"]
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(c["items"], c.state, c.stalls, c.started)
                                  .where(c.run_id == run_id, c.state == "todo")).all()
    store.close()
    assert sorted((decode_case(row.items), row.stalls, row.started) for row in rows) == [
        ("begun", 1, None), ("waiting", 0, None)]


def decode_case(items: str) -> str:
    from assay.queue.chunks import decode

    (case_id,) = decode(items).only
    return str(case_id)

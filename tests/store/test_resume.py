"""A run is recorded as it goes: killed with SIGKILL mid-battery, it resumes with 0 lost, 0 twice.

Through the real CLI in subprocesses, on SQLite and on a real PostgreSQL. The
agent logs every call; a gate makes the calls for cases 10 and up hang, so
the first process is killed while those trials are in flight and the first
twenty are recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.store import schema
from assay.store.database import open_store

AGENT = """
import os, threading

from gate_helper import echo

def agent(input):
    with open(os.environ["AGENT_LOG"], "a") as log:
        log.write(input + "\\n")
    if os.environ.get("AGENT_GATE") and int(input.split("-")[1]) >= 10:
        threading.Event().wait()  # hangs until the process is killed
    return {"echo": echo(input)}
"""
HELPER = "def echo(text):\n    return text\n"

CASES = 15
SUITE = "suite: resume/gate@1\ntarget: python:gate_agent:agent\ntrials: 2\ncases:\n" + "".join(
    f"  - {{id: c{i:02d}, input: in-{i}, expect: [{{path: $.echo, equals: in-{i}}}]}}\n"
    for i in range(CASES))


def project(root: Path) -> Path:
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "gate_agent.py").write_text(AGENT)
    (root / "evals" / "gate_helper.py").write_text(HELPER)
    (root / "evals" / "gate.suite.yaml").write_text(SUITE)
    return root


def env(root: Path, gate: bool) -> dict[str, str]:
    values = {**os.environ, "AGENT_LOG": str(root / "calls.log")}
    values.pop("AGENT_GATE", None)
    if gate:
        values["AGENT_GATE"] = "1"
    return values


def assay(root: Path, *args: str, gate: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay", *args], capture_output=True,
                          text=True, cwd=root, env=env(root, gate), timeout=120)


def recorded(url: str) -> tuple[list[tuple[str, str]], list[tuple[str, int]], list[str]]:
    store = open_store(url)
    with store.engine.connect() as connection:
        runs = [(r.run_id, r.status) for r in connection.execute(
            sa.select(schema.runs.c.run_id, schema.runs.c.status))]
        trials = [(r.case_id, r.n) for r in connection.execute(
            sa.select(schema.trials.c.case_id, schema.trials.c.n))]
    kinds = [e.kind for e in store.ledger.entries()]
    store.close()
    return runs, trials, kinds


def wait_for_trials(url: str, count: int, process: subprocess.Popen[str]) -> None:
    """Poll the store until ``count`` trials are recorded (the recorder's batch timer)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if len(recorded(url)[1]) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} trials recorded in 60 s")


def kill_midway(root: Path, url: str, concurrency: int) -> None:
    """Start a gated run, wait until its first 20 trials are recorded, SIGKILL it."""
    first = subprocess.Popen(
        [sys.executable, "-m", "assay", "run", "evals", "--db", url,
         "--concurrency", str(concurrency)],
        cwd=root, env=env(root, gate=True), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        wait_for_trials(url, 20, first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL


def test_a_killed_run_resumes_with_nothing_lost_or_twice(db_url: str, tmp_path: Path) -> None:
    root = project(tmp_path)
    kill_midway(root, db_url, 4)

    runs, trials, kinds = recorded(db_url)
    assert len(runs) == 1 and runs[0][1] == "open"
    run_id = runs[0][0]
    # Cases 0–9, two trials each; the four hung calls (cases 10, 11) were never recorded.
    assert sorted(trials) == [(f"c{i:02d}", n) for i in range(10) for n in (1, 2)]
    assert kinds == ["run-registered"] + ["trial-verdict"] * 20
    before = (root / "calls.log").read_text().splitlines()
    assert len(before) == 24

    # An open run has no report yet: runs and show say how to finish it.
    shown = assay(root, "show", run_id, "--db", db_url)
    assert shown.returncode == 2 and "--resume" in shown.stderr
    listed = assay(root, "runs", "--db", db_url)
    assert f"open: stopped part-way or still running (assay run --resume {run_id})" in listed.stdout

    done = assay(root, "run", "evals", "--db", db_url, "--resume", run_id, "--json", "r.json")
    assert done.returncode == 0, done.stderr
    report = json.loads((root / "r.json").read_text())
    assert report["run_id"] == run_id
    assert report["counts"]["public"]["passed"] == CASES
    assert sum(len(c["trials"]) for c in report["cases"]) == 2 * CASES

    # The resumed process called the agent only for what was missing: cases 10–14, twice each.
    after = (root / "calls.log").read_text().splitlines()[len(before):]
    assert Counter(after) == {f"in-{i}": 2 for i in range(10, CASES)}
    runs, trials, kinds = recorded(db_url)
    assert runs == [(run_id, "sealed")]
    assert len(trials) == len(set(trials)) == 2 * CASES
    assert kinds == ["run-registered"] + ["trial-verdict"] * (2 * CASES) + ["run-sealed"]
    checked = assay(root, "ledger", "verify", "--db", db_url)
    assert checked.returncode == 0, checked.stdout
    assert report["seal"]["entry"] == len(kinds) - 1

    again = assay(root, "run", "evals", "--db", db_url, "--resume", run_id)
    assert again.returncode == 2 and "sealed" in again.stderr


def test_a_resume_runs_only_what_the_run_registered(tmp_path: Path) -> None:
    root = project(tmp_path)
    url = f"sqlite:///{root / 's' / 'a.db'}"
    kill_midway(root, url, 2)
    run_id = recorded(url)[0][0][0]

    for args, why in [(("--no-store",), "--no-store"), (("--trials", "3"), "--trials"),
                      (("--target", "python:other:agent"), "registered the target")]:
        refused = assay(root, "run", "evals", "--db", url, "--resume", run_id, *args)
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    unknown = assay(root, "run", "evals", "--db", url, "--resume", "no-such-run")
    assert unknown.returncode == 2 and "no run no-such-run" in unknown.stderr

    # The suite changed since registration: refused, nothing run, the run still open.
    changed_suite = SUITE.replace("equals: in-14}", "equals: in-14x}")
    (root / "evals" / "gate.suite.yaml").write_text(changed_suite)
    changed = assay(root, "run", "evals", "--db", url, "--resume", run_id)
    assert changed.returncode == 2 and "changed since the run was registered" in changed.stderr
    runs, trials, _ = recorded(url)
    assert runs == [(run_id, "open")] and len(trials) == 20

    # The agent changed: a module it imports from its folder was edited. The
    # agent version covers it; the resume is refused, naming the file.
    (root / "evals" / "gate.suite.yaml").write_text(SUITE)
    (root / "evals" / "gate_helper.py").write_text(HELPER + "# edited\n")
    edited = assay(root, "run", "evals", "--db", url, "--resume", run_id)
    assert edited.returncode == 2, edited.stderr
    assert "file gate_helper.py changed" in edited.stderr, edited.stderr
    assert "Traceback" not in edited.stderr
    runs, trials, _ = recorded(url)
    assert runs == [(run_id, "open")] and len(trials) == 20
    # Put back as it was, the same agent resumes.
    (root / "evals" / "gate_helper.py").write_text(HELPER)
    finished = assay(root, "run", "evals", "--db", url, "--resume", run_id)
    assert finished.returncode == 0, finished.stderr


@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_trials_are_written_in_batches_with_one_ledger_entry_each(tmp_path: Path,
                                                                  batch: int) -> None:
    """The recorder's batching changes when trials are written, never what is written."""
    import asyncio

    from assay.engine import Battery, BatteryOptions
    from assay.engine.record import RunRecorder
    from assay.store.ledger.keys import load_or_create_key
    from assay.store.runs.record import LocalSink
    from assay.suites import discover
    from assay.targets import TargetOptions, make_target

    root = project(tmp_path)
    loaded = discover([root / "evals"], None)[0]
    sys.path.insert(0, str(root / "evals"))
    os.environ["AGENT_LOG"] = str(root / "calls.log")
    try:
        store = open_store(f"sqlite:///{root / 'a.db'}")
        recorder = RunRecorder(LocalSink(store, load_or_create_key(root / "k.pem")), batch=batch)
        target = make_target("python:gate_agent:agent", TargetOptions(base_dir=root / "evals"))
        battery = Battery(loaded, target, BatteryOptions(concurrency=3),
                          on_result=recorder.record,
                          on_start=lambda s: recorder.register(s, loaded, 2, {}))
        report = recorder.seal(asyncio.run(battery.run()))
    finally:
        sys.path.remove(str(root / "evals"))
        os.environ.pop("AGENT_LOG")
    entries = store.ledger.entries()
    with store.engine.connect() as connection:
        pointers = dict(connection.execute(
            sa.select(schema.trials.c.entry, schema.trials.c.case_id)).all())
    stored = store.load_report(report.run_id)
    store.close()
    assert [e.kind for e in entries] == (["run-registered"] + ["trial-verdict"] * 30
                                         + ["run-sealed"])
    # Each trial row points at its own trial-verdict entry.
    assert sorted(pointers) == list(range(1, 31))
    # The same report (its JSON: the sealed battery's traces are the store's, not the report's).
    assert stored.model_dump(mode="json") == report.model_dump(mode="json")
    assert report.seal == {"entry": 31, "hash": entries[31].hash}


def test_a_failed_write_stops_the_recording_and_names_the_run(tmp_path: Path) -> None:
    from assay.engine import RunStart
    from assay.engine.record import RunRecorder
    from assay.model import Case, TrialResult, Verdict
    from assay.store.database import StoreError
    from assay.store.runs.record import LocalSink
    from assay.suites import discover
    from assay.targets import TargetOptions, make_target

    root = project(tmp_path)
    loaded = discover([root / "evals"], None)[0]
    store = open_store(f"sqlite:///{root / 'a.db'}")
    recorder = RunRecorder(LocalSink(store), batch=2)
    target = make_target("python:gate_agent:agent", TargetOptions(base_dir=root / "evals"))
    start = RunStart("run-x", 1, "2026-11-30T00:00:00Z", target.uri, target.digest())
    recorder.register(start, loaded, 2, {})
    case = Case(id="c00")
    recorder.record(case, TrialResult(n=1, outcome="pass"))
    recorder.record(case, TrialResult(n=2, outcome="pass"))  # a full batch: written
    recorder.close()
    with store.engine.begin() as connection:  # the database breaks under the recorder
        connection.exec_driver_sql("DROP TABLE verdicts")
    judged = Verdict(assertion="equals", check="equals", outcome="pass", evidence="observed")
    recorder.record(case, TrialResult(n=3, outcome="pass", verdicts=[judged]))
    with pytest.raises(StoreError, match="run-x") as caught:
        recorder.close()
    assert "c00" not in str(caught.value)
    with pytest.raises(StoreError):  # stays stopped: nothing more is taken
        recorder.record(case, TrialResult(n=4, outcome="pass"))
    with store.engine.connect() as connection:
        status = connection.execute(sa.select(schema.runs.c.status)).scalars().all()
        trials = connection.execute(sa.select(schema.trials.c.n)).scalars().all()
    kinds = [e.kind for e in store.ledger.entries()]
    store.close()
    # The failed batch left nothing: its trials and their entries went together.
    assert status == ["open"] and sorted(trials) == [1, 2]
    assert kinds == ["run-registered", "trial-verdict", "trial-verdict"]


def test_a_write_that_fails_from_the_batch_timer_is_raised_by_the_next_record() -> None:
    """The timer's flush runs in the event loop: its failure must surface on the
    battery's side (the next record, or the seal), not as a loop traceback."""
    import asyncio

    from assay.engine.record import RunRecorder
    from assay.model import Case, TrialResult
    from assay.store.database import StoreError

    class FailingSink:
        def __init__(self) -> None:
            self.tried = asyncio.Event()

        def register(self, row: dict[str, object], content: bytes) -> None: ...

        def write(self, run_id: str, records: list[object]) -> None:
            self.tried.set()
            raise StoreError(f"run {run_id}: cannot save (OperationalError)")

        def seal(self, run_id: str, columns: dict[str, object], content: bytes
                 ) -> tuple[int, str]:
            raise AssertionError("never reached")

        def close(self) -> None: ...

    async def scenario() -> list[dict[str, object]]:
        loop_errors: list[dict[str, object]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: loop_errors.append(ctx))
        sink = FailingSink()
        recorder = RunRecorder(sink, every_s=0.01)  # type: ignore[arg-type]
        recorder.reopen("run-t")
        recorder.record(Case(id="c"), TrialResult(n=1, outcome="pass"))  # arms the timer
        await asyncio.wait_for(sink.tried.wait(), 10)
        with pytest.raises(StoreError, match="run-t"):
            recorder.record(Case(id="c"), TrialResult(n=2, outcome="pass"))
        return loop_errors

    assert asyncio.run(scenario()) == []

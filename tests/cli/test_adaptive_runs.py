"""``assay run --adaptive [--max-trials N]`` end to end, against the loopback judge (SPEC §9).

The agent's answer carries the marker that tells the judge how to answer
(tests/judge_server.py), so where each case stops follows from the rule
alone (grading/adaptive.py): always passing at threshold 0.8, 16 trials;
always failing, 3; an inconsistent judge at 0.5, the cap, still
straddling. What is checked is the report, the store (one row per trial,
no gaps, no duplicates), the ledger, replay, and a killed adaptive run
that resumes adaptive with its cap.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import JudgeServer  # noqa: E402

pytestmark = pytest.mark.real

AGENT = '''
import os, threading

def answer(prompt):
    log = os.environ.get("AGENT_LOG")
    if log:
        with open(log, "a") as out:
            out.write(prompt + "\\n")
        if os.environ.get("AGENT_GATE") and prompt == "good":
            with open(log) as done:
                if sum(line == "good\\n" for line in done) > 5:
                    threading.Event().wait()  # the sixth hangs until the process is killed
    return {"good": "Sorry, resending. JUDGE:pass", "bad": "No. JUDGE:fail",
            "flaky": "Sorry! JUDGE:flip", "plain": "plain"}[prompt]
'''


def suite(cases: dict[str, float | None], trials: int = 1) -> str:
    lines = [f"suite: demo/adaptive@1\ntarget: python:agent:answer\ntrials: {trials}\n"
             "judge: openai:judge-model\ncases:\n"]
    for case, threshold in cases.items():
        check = ("{contains: plain}" if threshold is None
                 else f"{{judge: {{criteria: apologises, threshold: {threshold}}}}}")
        lines.append(f"  - {{id: {case}, input: {case}, expect: [{check}]}}\n")
    return "".join(lines)


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    with JudgeServer() as server:
        yield server


def environment(project: Any, judge: JudgeServer, **more: str) -> dict[str, str]:
    # The agent's folder, and what the tests run with (the assay under test).
    path = os.pathsep.join(p for p in (str(project.root), os.environ.get("PYTHONPATH")) if p)
    return {"ASSAY_JUDGE_BASE_URL": judge.base_url, "PYTHONPATH": path, **more}


def run(project: Any, judge: JudgeServer, *args: str) -> Any:
    return project.assay("run", "--json", "out.json", *args, env=environment(project, judge))


def report(project: Any, name: str = "out.json") -> dict[str, Any]:
    return json.loads((project.root / name).read_text().splitlines()[0])


def trial_indexes(data: dict[str, Any]) -> dict[str, list[int]]:
    return {c["id"]: [t["n"] for t in c["trials"]] for c in data["cases"]}


def db(project: Any) -> sqlite3.Connection:
    return sqlite3.connect(project.root / ".assay" / "assay.db")


def stored_trials(project: Any, run_id: str) -> dict[str, list[int]]:
    rows = db(project).execute("select case_id, n from trials where run_id = ? "
                               "order by case_id, n", (run_id,)).fetchall()
    found: dict[str, list[int]] = {}
    for case_id, n in rows:
        found.setdefault(case_id, []).append(n)
    return found


def registered(project: Any, run_id: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The run's ``run-registered`` content, its stored options, and its status."""
    connection = db(project)
    contents = [json.loads(body) for (body,) in connection.execute(
        "select b.content from ledger l join blobs b on b.digest = l.content_digest "
        "where l.kind = 'run-registered'")]
    [content] = [c for c in contents if c["run_id"] == run_id]
    options, status = connection.execute("select options, status from runs where run_id = ?",
                                         (run_id,)).fetchone()
    return content, json.loads(options), status


def test_each_case_stops_where_the_rule_says_and_every_trial_is_recorded_and_sealed(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite({"good": 0.8, "bad": 0.8, "plain": None}))
    done = run(project, judge, "--adaptive")
    assert done.code == 1, done.err  # "bad" fails
    data = report(project)
    assert trial_indexes(data) == {"good": list(range(1, 17)), "bad": [1, 2, 3], "plain": [1]}
    # trials_per_case is what was configured; the cap is said, and the range shown.
    assert data["trials_per_case"] == 1 and data["adaptive"] == {"max_trials": 30}
    assert "1–16 trial(s) per case, adaptive up to 30" in done.out
    cases = {c["id"]: c for c in data["cases"]}
    good = cases["good"]["quality"][0]
    assert (good["passed"], good["trials"], good["straddles"]) == (16, 16, False)
    assert cases["bad"]["quality"][0]["straddles"] is False
    assert judge.calls == 19

    # The store holds every trial once, the run sealed, its options and registration
    # naming the cap a resume would go on with.
    run_id = data["run_id"]
    assert stored_trials(project, run_id) == trial_indexes(data)
    content, options, status = registered(project, run_id)
    assert status == "sealed"
    assert content["adaptive"] == {"max_trials": 30} and content["trials_per_case"] == 1
    assert options["adaptive"] == {"max_trials": 30}
    verified = project.assay("ledger", "verify")
    assert verified.code == 0, verified.out + verified.err
    replayed = project.assay("replay", run_id)
    assert replayed.code == 0, replayed.out + replayed.err
    assert "all match" in replayed.out
    assert judge.calls == 19  # replay read the stored opinions


def test_an_inconsistent_judge_runs_to_the_cap_and_the_gate_says_it_straddles(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite({"flaky": 0.5}))
    done = run(project, judge, "--adaptive", "--max-trials", "8", "--concurrency", "1")
    assert done.code == 0, done.err  # 4/8 reaches 0.5
    data = report(project)
    assert trial_indexes(data) == {"flaky": list(range(1, 9))}
    [rate] = data["cases"][0]["quality"]
    assert (rate["passed"], rate["trials"], rate["straddles"]) == (4, 8, True)
    assert data["adaptive"] == {"max_trials": 8} and data["evidence"] == "reliability"
    assert stored_trials(project, data["run_id"]) == {"flaky": list(range(1, 9))}
    gated = project.assay("gate", data["run_id"], "--confident")
    assert gated.code == 1, gated.out + gated.err


def test_flags_that_cannot_work_are_refused_before_anything_runs(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite({"good": 0.8}))
    project.write("plain/p.suite.yaml", suite({"plain": None}))
    for args, why in [
        (("--max-trials", "8"), "--max-trials caps the trials of an --adaptive run"),
        (("--adaptive", "--trials", "40"), "--trials 40 is more than the 30 trials"),
        (("--adaptive", "--trials", "9", "--max-trials", "8"), "raise --max-trials"),
        (("plain", "--adaptive"), "no suite run here has a quality check"),
        (("--adaptive", "--max-trials", "0"), "--max-trials"),
    ]:
        done = run(project, judge, *args)
        assert done.code == 2, (args, done.out, done.err)
        assert why in done.err and "Traceback" not in done.err, (args, done.err)
    assert judge.calls == 0
    store = project.root / ".assay" / "assay.db"
    assert not store.exists() or db(project).execute("select count(*) from runs").fetchone() == (0,)

    # Without --adaptive, nothing of it is recorded: old runs keep their bytes.
    done = run(project, judge, "evals")
    assert done.code == 0, done.err
    data = report(project)
    assert "adaptive" not in data and trial_indexes(data) == {"good": [1]}
    content, options, _ = registered(project, data["run_id"])
    assert "adaptive" not in content and "adaptive" not in options


def test_a_killed_adaptive_run_resumes_adaptive_with_its_cap(
    project: Any, judge: JudgeServer,
) -> None:
    project.write("agent.py", AGENT)
    project.write("evals/a.suite.yaml", suite({"good": 0.8, "bad": 0.8}))
    log = project.root / "calls.log"
    env = {**os.environ, "COLUMNS": "200",
           **environment(project, judge, AGENT_LOG=str(log), AGENT_GATE="1")}
    # Two workers: the one that takes good's hanging sixth trial leaves the other to bad.
    first = subprocess.Popen([sys.executable, "-m", "assay", "run", "--adaptive",
                              "--concurrency", "2"], cwd=project.root, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # until good's five trials and bad's three are written
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "fewer than 8 trials recorded in 60 s"
            if (project.root / ".assay" / "assay.db").exists():
                try:
                    rows = db(project).execute("select count(*) from trials").fetchone()[0]
                except sqlite3.OperationalError:  # the schema is not there yet
                    rows = 0
                if rows >= 8:
                    break
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    [(run_id,)] = db(project).execute("select run_id from runs").fetchall()
    assert stored_trials(project, run_id) == {"good": [1, 2, 3, 4, 5], "bad": [1, 2, 3]}
    _, options, status = registered(project, run_id)
    assert status == "open" and options["adaptive"] == {"max_trials": 30}
    before = log.read_text().splitlines()

    for given in (("--adaptive",), ("--max-trials", "40")):
        refused = run(project, judge, "--resume", run_id, *given)
        assert refused.code == 2 and "--max-trials were fixed" in refused.err, refused.err

    done = project.assay("run", "--resume", run_id, "--json", "r.json",
                         env=environment(project, judge, AGENT_LOG=str(log)))
    assert done.code == 1, done.err  # "bad" fails
    data = report(project, "r.json")
    assert data["run_id"] == run_id and data["adaptive"] == {"max_trials": 30}
    assert trial_indexes(data) == {"good": list(range(1, 17)), "bad": [1, 2, 3]}
    # The resume ran the hung sixth again and went on adaptive: nothing else, nothing twice.
    assert Counter(log.read_text().splitlines()[len(before):]) == {"good": 11}
    assert stored_trials(project, run_id) == trial_indexes(data)
    assert registered(project, run_id)[2] == "sealed"
    replayed = project.assay("replay", run_id)
    assert replayed.code == 0, replayed.out + replayed.err

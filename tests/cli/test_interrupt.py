"""Ctrl-C stops a battery cleanly and still reports what finished (a real SIGINT)."""

from __future__ import annotations

import json

AGENT = """
import asyncio, os, signal

calls = 0

async def agent(input):
    global calls
    calls += 1
    if calls == 6:
        os.kill(os.getpid(), signal.SIGINT)   # the user presses Ctrl-C
        await asyncio.sleep(3600)             # and this trial never finishes
    return input
"""

SUITE = "suite: demo/stop@1\ntarget: python:stop_agent:agent\ncases:\n" + "".join(
    f"  - {{id: c{i}, input: c{i}, expect: [{{equals: c{i}}}]}}\n" for i in range(20)
)


def test_ctrl_c_reports_the_trials_that_finished(project):
    project.write("evals/stop_agent.py", AGENT)
    project.write("evals/stop.suite.yaml", SUITE)
    done = project.assay("run", "--concurrency", "1", "--json", "r.json", timeout=60)
    assert done.code == 1
    assert "interrupted" in done.err
    assert "Traceback" not in done.err
    report = json.loads((project.root / "r.json").read_text())
    assert report["interrupted"] is True
    assert report["scores"]["passed"] is False
    assert "interrupted" in report["scores"]["flags"]
    outcomes = [c["outcome"] for c in report["cases"]]
    assert outcomes[:5] == ["pass"] * 5             # finished before Ctrl-C: kept
    assert set(outcomes[5:]) == {"inconclusive"}    # never ran: not a pass
    assert report["cases"][5]["trials"] == []


GROUP_AGENT = AGENT.replace("os.kill(os.getpid(), signal.SIGINT)",
                            "os.killpg(os.getpgrp(), signal.SIGINT)")


def test_ctrl_c_to_the_whole_process_group_still_seals_the_run(project):
    """A terminal's Ctrl-C reaches the store's writer process too: it must not die of it."""
    import os
    import subprocess
    import sys

    project.write("evals/stop_agent.py", GROUP_AGENT)
    project.write("evals/stop.suite.yaml", SUITE)
    # Its own session: the SIGINT goes to assay and its writer, not to pytest.
    done = subprocess.run([sys.executable, "-m", "assay", "run", "--concurrency", "1",
                           "--json", "r.json"], cwd=project.root, capture_output=True,
                          text=True, timeout=60, start_new_session=True,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 1, done.stderr
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr
    report = json.loads((project.root / "r.json").read_text())
    assert report["interrupted"] is True and report["seal"] is not None
    runs = json.loads(project.assay("runs", "--json").out)
    assert [(r["status"], r["interrupted"]) for r in runs] == [("sealed", True)]
    checked = project.assay("ledger", "verify")
    # registered, five trial verdicts, sealed
    assert checked.code == 0 and checked.out.startswith("ledger: 7 entries verify")

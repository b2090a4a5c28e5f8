"""``assay rejudge RUN``: stored outputs judged again into a new sealed run; the agent never called.

The agent is a real JSON endpoint on loopback that counts its calls; the judge
is the loopback judge of tests/judge_server.py, which counts its own.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import JudgeServer  # noqa: E402

pytestmark = pytest.mark.real

SECRET = "HIDDEN-REJUDGE-CANARY-55"
REPLIES = {"good": "Sorry, resending today. JUDGE:pass", "bad": "Not our problem. JUDGE:fail",
           "flaky": "Sorry! JUDGE:flip", SECRET: f"{SECRET} JUDGE:fail"}


class Agent:
    """A JSON endpoint answering each case's input from ``REPLIES``; ``calls`` counts them."""

    def __init__(self) -> None:
        self.calls = 0
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                agent.calls += 1
                data = json.dumps(REPLIES[body]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agent"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def agent() -> Iterator[Agent]:
    served = Agent()
    yield served
    served.close()


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    with JudgeServer() as server:
        yield server


def write_suite(project: Any, agent: Agent, *, hidden: bool = False) -> None:
    project.write("evals/a.suite.yaml", f"""
        suite: demo/rejudged@1
        target: {agent.url}
        judge: openai:judge-model
        trials: 2
        {"hidden: hidden/" if hidden else ""}
        cases:
          - id: good
            input: good
            expect: [{{status: ok}}, {{judge: {{criteria: apologises, threshold: 0.5}}}}]
          - id: bad
            input: bad
            expect: [{{judge: {{criteria: apologises, threshold: 0.5}}}}]
          - id: flaky
            input: flaky
            expect: [{{judge: {{criteria: apologises, threshold: 0.5}}}}]
    """)
    if hidden:
        project.write("evals/hidden/h.yaml", f"""
            id: {SECRET}
            input: {SECRET}
            expect: [{{judge: "{SECRET} criteria"}}]
        """)


def assay(project: Any, judge: JudgeServer, *args: str) -> Any:
    return project.assay(*args, env={"ASSAY_JUDGE_BASE_URL": judge.base_url})


def first(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text().splitlines()[0])


def outcomes(data: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["outcome"] for c in data["cases"]}


def test_a_rejudge_calls_no_agent_and_a_cached_one_no_judge(
    project: Any, agent: Agent, judge: JudgeServer,
) -> None:
    write_suite(project, agent)
    done = assay(project, judge, "run", "--json", "run.json", "--concurrency", "1")
    assert done.code == 1, done.err
    original = first(project.root / "run.json")
    assert (agent.calls, judge.calls) == (6, 6)

    done = assay(project, judge, "rejudge", original["run_id"], "--json", "again.json")
    assert done.code == 1, done.err
    again = first(project.root / "again.json")
    assert agent.calls == 6 and judge.calls == 6  # nobody was asked anything
    assert again["run_id"] != original["run_id"] and again["rejudge_of"] == original["run_id"]
    assert again["seal"] is not None and again["target"] == original["target"]
    assert outcomes(again) == outcomes(original)
    cost = again["cost"]
    assert (cost["judge_calls"], cost["judge_cached"], cost["judge_usd"]) == (0, 6, 0.0)
    # Deterministic verdicts and the cases' facets are the original's: compare aligns them.
    compared = project.assay("compare", original["run_id"], again["run_id"], "--json", "-")
    assert compared.code == 0, compared.err
    rows = json.loads(compared.out)["rows"]
    assert {r["alignment"] for r in rows} == {"aligned"}
    assert project.assay("ledger", "verify").code == 0
    replayed = project.assay("replay", again["run_id"])
    assert replayed.code == 0, replayed.out + replayed.err


def test_another_judge_or_no_cache_asks_again_and_a_new_bar_changes_the_verdict(
    project: Any, agent: Agent, judge: JudgeServer,
) -> None:
    write_suite(project, agent)
    assert assay(project, judge, "run", "--json", "run.json", "--concurrency", "1").code == 1
    run_id = first(project.root / "run.json")["run_id"]
    assert outcomes(first(project.root / "run.json"))["flaky"] == "pass"  # 1 of 2 at 0.5

    done = assay(project, judge, "rejudge", run_id, "--threshold", "0.9", "--json", "t.json")
    assert done.code == 1, done.err
    assert judge.calls == 6  # the same questions: answered from the cache
    data = first(project.root / "t.json")
    assert outcomes(data)["flaky"] == "fail"
    assert {q["threshold"] for c in data["cases"] for q in c["quality"]} == {0.9}

    done = assay(project, judge, "rejudge", run_id, "--judge", "openai:other-judge",
                 "--json", "other.json")
    assert done.code == 1, done.err
    assert judge.calls == 12  # another judge: asked
    assert {b["model"] for b in judge.bodies[6:]} == {"other-judge"}
    # Opinions of another judge are not compared as if they were the same judge's.
    other = first(project.root / "other.json")["run_id"]
    compared = project.assay("compare", run_id, other, "--json", "-")
    rows = json.loads(compared.out)["rows"]
    assert {r["alignment"] for r in rows} == {"non-comparable"}
    assert all(r["differs"] == ["judge"] for r in rows)
    done = assay(project, judge, "rejudge", run_id, "--no-judge-cache")
    assert judge.calls == 18
    assert agent.calls == 6


def test_rejudge_refuses_what_it_cannot_judge(
    project: Any, agent: Agent, judge: JudgeServer,
) -> None:
    done = assay(project, judge, "rejudge", "no-such-run")
    assert done.code == 2 and "no run no-such-run" in done.err
    project.write("evals/a.suite.yaml", f"""
        suite: demo/plain@1
        target: {agent.url}
        cases: [{{id: good, input: good, expect: [{{contains: Sorry}}]}}]
    """)
    assert assay(project, judge, "run", "--json", "run.json").code == 0
    done = assay(project, judge, "rejudge", first(project.root / "run.json")["run_id"])
    assert done.code == 2 and "nothing to judge again" in done.err
    assert "Traceback" not in done.err


def test_a_hidden_case_rejudged_reaches_no_surface(
    project: Any, agent: Agent, judge: JudgeServer,
) -> None:
    write_suite(project, agent, hidden=True)
    assert assay(project, judge, "run", "--json", "run.json").code == 1
    run_id = first(project.root / "run.json")["run_id"]
    done = assay(project, judge, "rejudge", run_id, "--no-judge-cache", "--json", "r.json",
                 "--markdown", "r.md")
    assert done.code == 1, done.err
    assert sum(SECRET in p for p in judge.prompts) == 4  # 2 trials, asked twice
    for surface in (done.out, done.err, (project.root / "r.json").read_text(),
                    (project.root / "r.md").read_text()):
        assert SECRET not in surface
    assert "holdout-1" in (project.root / "r.json").read_text()

"""What the tau2 import's agreement test and bench/tau2_agreement.py share.

- ``import_suites``: ``assay import tau2`` of both domains into a folder (the real CLI);
- ``UserStub``: the simulated user, a scripted model behind a real OpenAI-compatible
  server on loopback (examples/support/stub_model.py). Its first message names the task
  its instructions are tau2's scenario of (``airline task 12``), for the agents of
  tau2_agents.py; its second is ``###STOP###``;
- ``run_battery``: ``assay run`` of the imported suites with one of those agents, one
  process for both domains (a battery per suite), the user played by the stub;
- ``simulation``: a trial's trace as a tau2 trajectory, so that tau2's own evaluator
  scores what assay's trial did: each tool call with the result the fixture answered, each
  reply, the user's messages, ended by the user (tau2's ``USER_STOP``);
- ``tau2_reward``: tau2's ``evaluate_simulation`` on it, as tau2's runs score
  (``EvaluationType.ALL``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from ..conversation_run import stub as stub_model

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOMAINS = ("airline", "retail")
USER_MODEL = "openai:tau2-user"
BEGIN, END = "----- BEGIN INSTRUCTIONS -----", "----- END INSTRUCTIONS -----"


def assay(*args: str, cwd: Path, env: dict[str, str] | None = None,
          timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real ``assay`` command, in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "assay", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def import_suites(folder: Path) -> Path:
    """``assay import tau2 DOMAIN --out folder/evals`` for both domains; the suites' folder."""
    out = folder / "evals"
    for domain in DOMAINS:
        done = assay("import", "tau2", domain, "--out", str(out), cwd=folder)
        assert done.returncode == 0, done.stderr
    return out


def cases(suites: Path) -> dict[str, dict[str, Any]]:
    """Every imported case by ``DOMAIN/TASK`` (``airline/12``)."""
    found = {}
    for domain in DOMAINS:
        data = yaml.load((suites / f"tau2-{domain}.suite.yaml").read_text(encoding="utf-8"),
                         Loader=yaml.CSafeLoader)
        for case in data["cases"]:
            found[f"{domain}/{case['id'].removeprefix('task-')}"] = case
    return found


class UserStub:
    """The simulated user of every imported case, on loopback: it names the task whose
    scenario its instructions hold, then stops."""

    def __init__(self, suites: Path) -> None:
        self.tasks = {case["user"]["instructions"]: key.replace("/", " task ")
                      for key, case in cases(suites).items()}
        self.server = stub_model().StubServer(self._answer)
        self.url = self.server.url

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        system = body["messages"][0]["content"]
        instructions = system.split(BEGIN, 1)[-1].split(END, 1)[0].strip()
        task = self.tasks.get(instructions)
        if task is None:
            return {"status": 400}  # not a case of ours: the trial breaks, visibly
        spoken = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return {"content": "###STOP###" if spoken else task, "usage": [100, 5]}

    def close(self) -> None:
        self.server.close()


@contextmanager
def user_stub(suites: Path) -> Iterator[UserStub]:
    stub = UserStub(suites)
    try:
        yield stub
    finally:
        stub.close()


def run_battery(folder: Path, suites: Path, agent: str, stub: UserStub, *,
                concurrency: int = 8, env: dict[str, str] | None = None,
                report: str = "report.json") -> tuple[int, dict[str, dict[str, Any]], str]:
    """``assay run`` of both suites against ``python:tau2_agents:AGENT``: the exit code, each
    case's report entry by ``DOMAIN/TASK``, and the stderr."""
    path = folder / report
    done = assay("run", str(suites), "--target", f"python:tau2_agents:{agent}",
                 "--user-model", USER_MODEL, "--judge-base-url", stub.url,
                 "--concurrency", str(concurrency), "--no-judge-cache", "--json", str(path),
                 cwd=folder, env={"PYTHONPATH": os.pathsep.join(
                     [os.environ.get("PYTHONPATH", ""), str(HERE)]).strip(os.pathsep),
                     **(env or {})})
    found: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            result = json.loads(line)
            domain = result["suite"]["id"].split("/")[1].split("@")[0]
            for case in result["cases"]:
                found[f"{domain}/{case['id'].removeprefix('task-')}"] = {
                    **case, "run_id": result["run_id"]}
    return done.returncode, found, done.stderr


def traces(folder: Path, run_id: str, case_ids: list[str] | None = None) -> dict[str, Any]:
    """The stored trace of each trial (trial 1) of a run, by case id."""
    from assay.store.database import open_store

    store = open_store(f"sqlite:///{folder / '.assay' / 'assay.db'}")
    try:
        trials = store.load_trials(run_id, case_ids)
    finally:
        store.close()
    return {case: trial.trace for (case, n), trial in trials.items() if n == 1}


def simulation(trace: Any, task_id: str) -> Any:
    """A trial's trace as tau2's ``SimulationRun``: the agent's greeting tau2 opens with, the
    user's messages, each tool call and its result as tau2 words it (an error as
    ``Error: …``), each reply, then the user's ``###STOP###``."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from tau2.data_model.simulation import SimulationRun, TerminationReason

    from assay.targets.conversation import reply_text

    messages: list[Any] = [AssistantMessage(role="assistant",
                                            content="Hi! How can I help you today?")]
    for event in trace.events:
        if event.kind == "user":
            messages.append(UserMessage(role="user", content=event.text))
        elif event.kind == "tool_call":
            messages.append(AssistantMessage(role="assistant", tool_calls=[ToolCall(
                id=event.call_id, name=event.name, arguments=event.arguments,
                requestor="assistant")]))
        elif event.kind == "tool_result":
            messages.append(ToolMessage(role="tool", id=event.call_id,
                                        content=_tool_content(event), error=event.is_error,
                                        requestor="assistant"))
        elif event.kind == "reply":
            messages.append(AssistantMessage(role="assistant", content=reply_text(event.result)))
    messages.append(UserMessage(role="user", content="###STOP###"))
    return SimulationRun(id=f"assay-{task_id}", task_id=task_id, start_time="", end_time="",
                         duration=0.0, termination_reason=TerminationReason.USER_STOP,
                         messages=messages)


def _tool_content(event: Any) -> str:
    """What tau2's ToolMessage says: the result as text, or tau2's ``Error: message`` for
    what assay recorded as ``TypeName: message``."""
    if event.is_error:
        return "Error: " + str(event.result).split(": ", 1)[-1]
    if isinstance(event.result, str):
        return event.result
    return json.dumps(event.result)


def tau2_reward(domain: str, task: Any, trace: Any) -> float:
    """tau2's reward for the trajectory ``trace`` stands for (its evaluator, as its runs use)."""
    from assay.imports.tau2_tools import quiet_import

    quiet_import()
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    info = evaluate_simulation(simulation=simulation(trace, task.id), task=task,
                               evaluation_type=EvaluationType.ALL, solo_mode=False,
                               domain=domain)
    return float(info.reward)

"""A battery whose conversation waits on its simulated user (SPEC §16) when the trial's
timeout runs out: the harness's failure, not the agent's."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from assay.engine import Battery, BatteryOptions
from assay.judging.panel import JudgeOptions
from assay.judging.simulated_user import UserSimulator
from assay.targets import TargetOptions, make_target

from ..conversation_run import stub as stub_model
from .conftest import Bench


def test_a_timeout_while_the_simulator_answers_breaks_the_trial_as_its_failure(
        bench: Bench) -> None:
    stub = stub_model()
    release = threading.Event()

    def hanging(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(30)  # released at the end of the test
        return {"content": "too late"}

    agent = stub.StubServer(lambda body: {"content": "Hello."})
    user = stub.StubServer(hanging)
    try:
        loaded = bench.suite("""
            suite: t/hang@1
            cases:
              - id: waits
                timeout_s: 0.5
                user: {instructions: "You wait.", model: "openai:sim"}
                expect: [{settles: true}]
            """)
        target = make_target("openai:agent", TargetOptions(base_dir=bench.root,
                                                           base_url=agent.url))
        users = UserSimulator(loaded.suite, JudgeOptions(base_url=user.url, env={},
                                                         cache=False))
        results: list[Any] = []
        battery = Battery(loaded, target, BatteryOptions(concurrency=1), users=users,
                          on_result=lambda case, result: results.append(result))

        async def go() -> Any:
            try:
                return await battery.run()
            finally:
                await users.close()

        report = asyncio.run(go())
    finally:
        release.set()
        agent.close()
        user.close()
    [trial] = report.cases[0].trials
    assert (trial.outcome, trial.reason) == (
        "broken", "user simulator failed: the trial's timeout ran out while it answered")
    assert agent.seen == []  # the agent was never asked: nothing of this is its doing
    [kept] = results
    assert kept.trace is not None and kept.trace.simulator is not None
    assert kept.trace.simulator.model == "openai:sim" and kept.trace.events == []

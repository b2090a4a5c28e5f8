"""A simulated user for the targets' conversation tests (SPEC §16).

The user's model is the scripted OpenAI-compatible server of
examples/support/stub_model.py on loopback, asked by assay's own simulator
(``judging.simulated_user``) as in a run. Its instructions hold a script,
``SCRIPT: [[heard, say], …]``: its K-th answer (K: its own messages so
far, the roles flipped as assay sends them) is ``say`` when the agent's last
reply holds ``heard`` (an empty ``heard``: always), and ``UNHEARD`` when it
does not — a message no agent answers well, so a target that lost a reply
on the way to the user fails its case rather than passing by luck.

``converse`` runs a suite's one case through a real battery with that
user: the target, the battery, the simulator and the grading as ``assay
run`` has them. ``BOOKING`` is the conversation most targets' tests hold: a
booking agent asks which flight (``9am or 5pm``) until the user names one,
then books it (``9:00``); the user asks to move a booking, answers the
question once asked, and says ``###STOP###`` once the booking is made.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from assay.engine import Battery, BatteryOptions
from assay.judging.panel import JudgeOptions
from assay.judging.simulated_user import UserSimulator
from assay.model import CaseResult, Report, Trace
from assay.suites import LoadedSuite, load_suite_file
from assay.targets import Target

STUB_FILE = Path(__file__).resolve().parents[1] / "examples" / "support" / "stub_model.py"
STOP = "###STOP###"
#: What the user says when the agent's reply lacks what it waits for.
UNHEARD = "UNHEARD: that was not an answer to what I said."


FIRST = "Move booking ABC123 to Friday."
SECOND = "The 9am one, please."
SYSTEM = "You are a booking agent."


def booking(last: str) -> str:
    """The booking agent's reply to the user's last message."""
    return "Booked: Friday, 9:00." if "9am" in last else "Which flight on Friday: 9am or 5pm?"


def script(*steps: tuple[str, str]) -> str:
    """Instructions whose script is ``steps``, (what the user waits to hear, what it says)."""
    return "SCRIPT: " + json.dumps([list(step) for step in steps])


def play(body: dict[str, Any]) -> dict[str, Any]:
    """The stub's answer: the script's next message if the agent's last reply was heard."""
    messages = body["messages"]
    steps = json.loads(messages[0]["content"].split("SCRIPT: ", 1)[1].splitlines()[0])
    own = sum(1 for m in messages if m["role"] == "assistant")
    heard, say = steps[min(own, len(steps) - 1)]
    # The agent's last reply is the last message the simulator was told (role user).
    told = messages[-1]["content"] if own else ""
    return {"content": say if heard in told else UNHEARD, "usage": [40, 6]}


#: The user of the booking conversation.
BOOKING = script(("", FIRST), ("9am or 5pm", SECOND), ("9:00", STOP))


def booking_suite(folder: Path, name: str) -> LoadedSuite:
    """``folder/NAME.suite.yaml``: the booking conversation, one case, its checks."""
    path = folder / f"{name}.suite.yaml"
    path.write_text(f"""\
suite: sim/{name}@1
user_model: openai:sim-user
cases:
  - id: move-booking
    input: {SYSTEM}
    user: {{instructions: '{BOOKING}', max_turns: 3, seed: 5}}
    expect:
      - {{turn: 1, contains: "9am or 5pm"}}
      - {{turn: 2, contains: "9:00"}}
""")
    return load_suite_file(path)


def assert_booked(case: CaseResult, trace: Trace, asked: list[dict[str, Any]]) -> None:
    """The booking conversation was held: its checks passed, the user's two messages
    reached the agent, the agent's replies reached the user (``asked``: what the stub
    was sent in this conversation), and the simulator's three calls are the harness's."""
    (trial,) = case.trials
    assert [v.outcome for v in trial.verdicts] == ["pass"] * 2, trial.verdicts
    assert [(e.kind, e.turn) for e in trace.events if e.kind in ("user", "reply")] == [
        ("user", 1), ("reply", 1), ("user", 2), ("reply", 2)]
    assert [e.text for e in trace.events if e.kind == "user"] == [FIRST, SECOND]
    # Settled: the user said STOP (an http agent gives no steps for ``settles`` to read).
    assert trace.settled is True and trace.error is None
    assert len(asked) == 3 and all(body["seed"] == 5 for body in asked)
    told = [m["content"] for m in asked[-1]["messages"][2:]]
    assert told[0] == FIRST and told[2] == SECOND and "9:00" in told[3]
    assert all(SYSTEM not in json.dumps(body) for body in asked)  # the agent's, never sent
    simulator = trace.simulator
    assert simulator is not None and simulator.model == "openai:sim-user"
    assert (simulator.calls, simulator.cached, simulator.input_tokens) == (3, 0, 120)


@contextmanager
def user_server() -> Iterator[Any]:
    """The stub playing the user, on a free port; its ``seen`` holds every request."""
    spec = importlib.util.spec_from_file_location("assay_user_simulator_stub", STUB_FILE)
    assert spec is not None and spec.loader is not None
    stub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stub)
    server = stub.StubServer(play)
    try:
        yield server
    finally:
        server.close()


def converse(loaded: LoadedSuite, target: Target, url: str,
             run: Callable[[Coroutine[Any, Any, Report]], Report] = asyncio.run,
             ) -> tuple[CaseResult, Trace]:
    """The suite's one case through a battery whose simulated user the stub at ``url``
    plays: its result and its trial's trace. ``run`` runs the battery (a host's test
    moves its clock on)."""
    users = UserSimulator(loaded.suite, JudgeOptions(base_url=url, env={}, cache=False))
    battery = Battery(loaded, target, BatteryOptions(), users=users)
    traces: list[Trace | None] = []
    battery.on_result = lambda case, result: traces.append(result.trace)

    async def go() -> Report:
        try:
            return await battery.run()
        finally:
            await users.close()

    report = run(go())
    (case,) = report.cases
    assert isinstance(case, CaseResult)
    (trace,) = traces
    assert trace is not None, case.trials[0].reason
    return case, trace

"""The simulated user (SPEC §16) against a real OpenAI-compatible server on loopback: what it
is sent, how its answers are read, when it stops, what breaks a trial, its cache and its
identity. The battery's side (a broken trial, the report's figures) is in
tests/cli/test_simulated_users.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.errors import UsageError
from assay.judging.panel import JudgeOptions
from assay.judging.simulated_user import (
    EMPTY_REPLY,
    OPENING,
    USER_TEMPLATE,
    UserSimulator,
    system_prompt,
)
from assay.model import Case, Suite
from assay.targets.base import TrialBroken

from ..conversation_run import stub as stub_model

STOP = "###STOP###"


class Script:
    """The simulator's answers, in order (the last repeated); an answer dict as the stub's."""

    def __init__(self) -> None:
        self.answers: list[Any] = ["hello"]

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        own = sum(1 for m in body["messages"] if m["role"] == "assistant")
        answer = self.answers[min(own, len(self.answers) - 1)]
        return answer if isinstance(answer, dict) else {"content": answer, "usage": [40, 6]}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, Script]]:
    script = Script()
    server = stub_model().StubServer(script)
    yield server, script
    server.close()


def _case(case_id: str = "c", **user: Any) -> Case:
    return Case.model_validate({"id": case_id, "user": {"instructions": "You are Mia.",
                                                         "model": "openai:sim", **user}})


def _simulator(url: str, tmp_path: Path, *, cache: bool = True, **given: Any) -> UserSimulator:
    suite = Suite.model_validate({"suite": "t/sim@1", **given})
    return UserSimulator(suite, JudgeOptions(base_url=url, env={}, cache=cache,
                                             cache_root=tmp_path))


def _turns(*texts: str) -> list[dict[str, str]]:
    """A history: user and agent in turn, the user first."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate(texts)]


def _say(simulator: UserSimulator, case: Case, history: list[dict[str, str]], n: int = 1,
         user: Any = None) -> tuple[str | None, Any]:
    async def go() -> tuple[str | None, Any]:
        try:
            asked = user or simulator.for_trial(case, n)
            return await asked.say(history), asked
        finally:
            await simulator.close()

    return asyncio.run(go())


def test_it_reads_the_conversation_with_the_roles_flipped(
        served: tuple[Any, Script], tmp_path: Path) -> None:
    server, script = served
    script.answers = ["  I need to move my booking.  \n"]
    simulator = _simulator(server.url, tmp_path, cache=False)
    said, user = _say(simulator, _case(seed=3), [])
    assert said == "I need to move my booking."
    body = server.seen[-1]
    assert (body["model"], body["seed"], body["temperature"]) == ("sim", 3, 0)
    assert body["messages"] == [{"role": "system", "content": system_prompt("You are Mia.")},
                                {"role": "user", "content": OPENING}]
    assert "You are Mia." in body["messages"][0]["content"] and STOP in \
        body["messages"][0]["content"] and "{stop}" not in body["messages"][0]["content"]
    script.answers = ["x", "the 9am one"]
    simulator = _simulator(server.url, tmp_path, cache=False)
    said, _ = _say(simulator, _case(), _turns("I need to move it.", "Which one?"))
    assert said == "the 9am one"
    assert server.seen[-1]["messages"][2:] == [
        {"role": "assistant", "content": "I need to move it."},
        {"role": "user", "content": "Which one?"}]
    assert user.use().model_dump() == {
        "model": "openai:sim", "template": user.plan.template,
        "instructions": user.plan.identity.instructions, "seed": 3, "calls": 1, "cached": 0,
        "input_tokens": 40, "output_tokens": 6, "cost_usd": None}


def test_instructions_are_filled_in_once_and_never_read_again() -> None:
    text = "say {instructions} and {stop} literally"
    prompt = system_prompt(text)
    assert text in prompt and prompt.count("{instructions}") == 1
    assert USER_TEMPLATE.count("{instructions}") == 1


def test_stop_ends_it_and_nothing_of_that_answer_is_sent(
        served: tuple[Any, Script], tmp_path: Path) -> None:
    server, script = served
    for answer in (STOP, f"Thanks, that is all. {STOP}", f"{STOP}\nbye"):
        script.answers = ["x", answer]
        said, user = _say(_simulator(server.url, tmp_path, cache=False), _case(),
                          _turns("hi", "Done."))
        assert said is None and not user.cut


def test_max_turns_asks_once_more_and_cuts_when_it_does_not_stop(
        served: tuple[Any, Script], tmp_path: Path) -> None:
    server, script = served
    script.answers = ["first", "second"]
    history = _turns("first", "Hello.")
    said, user = _say(_simulator(server.url, tmp_path, cache=False), _case(max_turns=1),
                      history)
    assert said is None and user.cut  # asked, said more: not sent, not settled
    script.answers = ["first", STOP]
    said, user = _say(_simulator(server.url, tmp_path, cache=False), _case(max_turns=1),
                      history)
    assert said is None and not user.cut  # the last reply settled it


@pytest.mark.parametrize(("answer", "why"), [
    ({"status": 500}, "HTTP 500"),
    ({"status": 429, "headers": {"Retry-After": "3600"}}, "HTTP 429 (rate limited)"),
    ({"content": None}, "no text in the answer"),
    ({"content": ""}, "an empty message"),
    ({"content": " \t\n"}, "a message of only whitespace"),
    ({"refusal": "I will not play along."}, "the model refused to answer"),
])
def test_an_answer_out_of_form_breaks_the_trial_saying_why(
        served: tuple[Any, Script], tmp_path: Path, answer: dict[str, Any], why: str) -> None:
    server, script = served
    script.answers = [answer]
    simulator = _simulator(server.url, tmp_path)
    user = simulator.for_trial(_case(), 1)
    with pytest.raises(TrialBroken) as broken:
        _say(simulator, _case(), [], user=user)
    assert str(broken.value).startswith(f"user simulator failed: {why}")
    assert user.failure == str(broken.value) and "play along" not in user.failure
    # Never kept: asked again next time.
    asked = len(server.seen)
    with pytest.raises(TrialBroken):
        _say(_simulator(server.url, tmp_path), _case(), [])
    assert len(server.seen) > asked


def test_no_server_breaks_the_trial(tmp_path: Path) -> None:
    with pytest.raises(TrialBroken, match="^user simulator failed: refused connection$"):
        _say(_simulator("http://127.0.0.1:9/v1", tmp_path), _case(), [])


def test_the_cache_serves_the_same_conversation_of_the_same_trial(
        served: tuple[Any, Script], tmp_path: Path) -> None:
    server, script = served
    script.answers = ["kept answer"]
    said, user = _say(_simulator(server.url, tmp_path), _case(), [])
    asked = len(server.seen)
    assert said == "kept answer" and user.use().calls == 1
    script.answers = ["another answer"]
    said, user = _say(_simulator(server.url, tmp_path), _case(), [])
    assert len(server.seen) == asked and said == "kept answer"
    assert (user.use().calls, user.use().cached, user.use().input_tokens) == (0, 1, 0)
    # Another trial, another conversation, another simulator: asked.
    for n, history, case in ((2, [], _case()), (1, _turns("x", "y"), _case()),
                             (1, [], _case(seed=5)), (1, [], _case("d"))):
        said, _ = _say(_simulator(server.url, tmp_path), case, history, n=n)
        assert said == "another answer"
    assert len(server.seen) == asked + 4


def test_its_identity_names_model_template_instructions_and_seed(tmp_path: Path) -> None:
    simulator = _simulator("http://127.0.0.1:9/v1", tmp_path, user_model="openai:suite-sim")
    base = simulator.facet(_case())
    assert base is not None and base == simulator.facet(_case("other"))
    different = [simulator.facet(_case("a", model="openai:other")),
                 simulator.facet(_case("b", seed=1)),
                 simulator.facet(_case("t", instructions="You are Tom.")),
                 simulator.facet(_case("d", max_turns=3))]
    assert len({base, *different[:3]}) == 4
    assert different[3] == base  # max_turns is the case's (its digest), not the simulator's
    assert simulator.facet(Case(id="plain", input="hi")) is None
    plan = simulator.plan(_case("e", seed=2))
    assert plan.identity.model_dump(exclude={"calls", "cached", "input_tokens",
                                             "output_tokens", "cost_usd"}) == {
        "model": "openai:sim", "template": plan.template,
        "instructions": plan.identity.instructions, "seed": 2}
    assert "You are Mia." not in json.dumps(plan.identity.model_dump())


def test_who_plays_it_the_case_then_the_flag_then_the_suite(tmp_path: Path) -> None:
    options = JudgeOptions(base_url="http://127.0.0.1:9/v1", env={}, cache_root=tmp_path)
    suite = Suite.model_validate({"suite": "t/sim@1", "user_model": "openai:suite-sim"})
    unnamed = Case.model_validate({"id": "u", "user": {"instructions": "x"}})
    assert UserSimulator(suite, options).model_of(unnamed) == "openai:suite-sim"
    flagged = UserSimulator(suite, options, user_model="openai:flag-sim")
    assert flagged.model_of(unnamed) == "openai:flag-sim"
    assert flagged.model_of(_case()) == "openai:sim"
    bare = UserSimulator(Suite.model_validate({"suite": "t/sim@1"}), options)
    with pytest.raises(UsageError, match="case 'u' has a simulated user and no model"):
        bare.plan(unnamed)
    with pytest.raises(UsageError, match="^--user-model: a simulated user's model is "):
        UserSimulator(suite, options, user_model="flag-sim")
    with pytest.raises(UsageError, match="pass --judge-base-url URL or set ASSAY_JUDGE_BASE_URL"):
        UserSimulator(suite, JudgeOptions(env={}))


def test_what_an_agent_replied_reaches_it_whatever_it_is(
        served: tuple[Any, Script], tmp_path: Path) -> None:
    server, script = served
    script.answers = ["x", "go on"]
    history = _turns("hi", "")
    said, _ = _say(_simulator(server.url, tmp_path), _case(), history)
    assert said == "go on" and server.seen[-1]["messages"][-1]["content"] == EMPTY_REPLY
    said, _ = _say(_simulator(server.url, tmp_path), _case(), _turns("hi", "bad \ud800 text"))
    assert said == "go on"

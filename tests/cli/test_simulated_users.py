"""Simulated users end to end (SPEC §16): ``assay run`` holds a conversation between the
``openai:`` loop (the agent, a scripted model on loopback) and a simulated user (a scripted
model on another loopback server, where openai: judges are served).

The simulator's answers follow a script in its instructions — ``SCRIPT: [...]``, one
answer per call, the last repeated — so each test says what the user does: speak, say
``###STOP###``, answer HTTP 500 or nothing at all.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from ..conversation_run import stub as stub_model

pytestmark = pytest.mark.real

STOP = "###STOP###"
PRICES = "agent-model: {input: 10.0, output: 20.0}\nsim-model: {input: 1.0, output: 2.0}\n"


def agent(body: dict[str, Any]) -> dict[str, Any]:
    """A booking agent: asks which flight until the user names one, then books it."""
    said = [m["content"] for m in body["messages"] if m["role"] == "user"]
    last = said[-1] if said else ""
    if "9am" in last:
        return {"content": "Booked: Friday, 9:00.", "usage": [10, 3]}
    return {"content": "Which one: 9am or 5pm?", "usage": [10, 3]}


def simulator(body: dict[str, Any]) -> dict[str, Any]:
    """The user: the n-th answer of the script its instructions hold (n: its own messages
    so far, the roles flipped), the last one repeated."""
    system = body["messages"][0]["content"]
    if "----- BEGIN INSTRUCTIONS -----" not in system:  # a judge's question: pass
        return {"content": "pass\nas scripted", "usage": [5, 1]}
    instructions = system.split("----- BEGIN INSTRUCTIONS -----")[1].split(
        "----- END INSTRUCTIONS -----")[0]
    script = json.loads(instructions.split("SCRIPT:", 1)[1].strip().splitlines()[0])
    own = sum(1 for m in body["messages"] if m["role"] == "assistant")
    answer = script[min(own, len(script) - 1)]
    if isinstance(answer, dict):
        return answer
    return {"content": answer, "usage": [50, 7]}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Any, Any]]:
    stub = stub_model()
    agent_server, user_server = stub.StubServer(agent), stub.StubServer(simulator)
    yield agent_server, user_server
    agent_server.close()
    user_server.close()


def _script(*answers: Any) -> str:
    return "SCRIPT: " + json.dumps(list(answers))


def _suite(project: Any, cases: str, head: str = "") -> None:
    project.write("prices.yaml", PRICES)
    project.write("evals/t.suite.yaml", "suite: t/sim@1\ntarget: openai:agent-model\n" + head
                  + "cases:\n" + textwrap.indent(textwrap.dedent(cases).strip("\n"), "  ")
                  + "\n")


BOOKING = f"""
- id: book
  input: You are a booking agent.
  user:
    instructions: |
      You want to move booking ABC123 to Friday, the 9am flight.
      {_script("Move ABC123 to Friday, please.", "The 9am one.", "Thanks! " + STOP)}
    model: openai:sim-model
    seed: 7
  expect:
    - {{turn: 1, contains: "9am or 5pm"}}
    - {{turn: 2, contains: "9:00"}}
    - settles: true
"""


def _run(project: Any, servers: tuple[Any, Any], *args: str, store: bool = False) -> Any:
    agent_server, user_server = servers
    return project.assay("run", "evals", *([] if store else ["--no-store"]),
                         "--base-url", agent_server.url, "--judge-base-url", user_server.url,
                         *args, env={"ASSAY_CACHE_DIR": str(project.root / "cache"),
                                     "ASSAY_PRICES": str(project.root / "prices.yaml")})


def _report(project: Any, name: str = "r.json") -> dict[str, Any]:
    return json.loads((project.root / name).read_text())


def _trials(project: Any, run_id: str) -> dict[tuple[str, int], Any]:
    from assay.store.database import open_store

    store = open_store(f"sqlite:///{project.root / '.assay' / 'assay.db'}")
    try:
        return store.load_trials(run_id)
    finally:
        store.close()


def test_the_user_speaks_until_it_says_stop_and_the_conversation_settles(
        project: Any, servers: tuple[Any, Any]) -> None:
    agent_server, user_server = servers
    _suite(project, BOOKING)
    asked_before = len(user_server.seen)
    done = _run(project, servers, "--json", "r.json", "--markdown", "r.md")
    assert done.code == 0, done.out + done.err
    report = _report(project)
    verdicts = [(v["assertion"], v["outcome"]) for v in report["cases"][0]["trials"][0]["verdicts"]]
    assert verdicts == [("contains (turn 1)", "pass"), ("contains (turn 2)", "pass"),
                        ("settles", "pass")]
    # Three answers: two messages and the STOP, whose "Thanks!" never reached the agent.
    asked = user_server.seen[asked_before:]
    assert len(asked) == 3
    told = [m["content"] for m in agent_server.seen[-1]["messages"] if m["role"] == "user"]
    assert told == ["Move ABC123 to Friday, please.", "The 9am one."]
    # The simulator reads the conversation with the roles flipped, the seed sent.
    last = asked[-1]
    assert last["model"] == "sim-model" and last["seed"] == 7 and last["temperature"] == 0
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "user",
                                                     "assistant", "user"]
    assert last["messages"][2]["content"] == "Move ABC123 to Friday, please."
    assert last["messages"][5]["content"] == "Booked: Friday, 9:00."
    assert "You want to move booking ABC123" in last["messages"][0]["content"]
    assert all("You are a booking agent" not in m["content"] for m in last["messages"])
    # Its tokens and cost are the harness's, apart from the agent's (2 calls of 10 in / 3 out).
    cost = report["cost"]
    assert (cost["input_tokens"], cost["output_tokens"]) == (20, 6)
    assert cost["usd"] == pytest.approx((20 * 10 + 6 * 20) / 1e6)
    assert (cost["simulator_input_tokens"], cost["simulator_output_tokens"]) == (150, 21)
    assert cost["simulator_usd"] == pytest.approx((150 * 1 + 21 * 2) / 1e6)
    assert (cost["simulator_calls"], cost["simulator_cached"]) == (3, 0)
    line = "simulated users: cost $0.0002 · tokens 150 in / 21 out · 3 asked, 0 from the cache"
    assert line in done.out and line in (project.root / "r.md").read_text()
    # Its identity is the case's user facet.
    assert report["cases"][0]["facets"]["user"].startswith("sha256:")


def test_a_rerun_of_the_same_conversation_asks_the_simulator_nothing(
        project: Any, servers: tuple[Any, Any]) -> None:
    _, user_server = servers
    _suite(project, BOOKING.replace("Thanks!", "Thanks again!"))
    first = _run(project, servers, "--json", "one.json")
    assert first.code == 0, first.out + first.err
    asked = len(user_server.seen)
    again = _run(project, servers, "--json", "two.json")
    assert again.code == 0, again.out + again.err
    assert len(user_server.seen) == asked  # every answer served from the cache
    cost = _report(project, "two.json")["cost"]
    assert (cost["simulator_calls"], cost["simulator_cached"]) == (0, 3)
    assert (cost["simulator_usd"], cost["simulator_input_tokens"]) == (0.0, 0)
    assert "0 asked, 3 from the cache" in again.out
    # A second trial is never served the first one's answers; --no-judge-cache asks again.
    fresh = _run(project, servers, "--trials", "2", "--no-judge-cache", "--json", "three.json")
    assert fresh.code == 0, fresh.out + fresh.err
    assert len(user_server.seen) == asked + 6
    assert _report(project, "three.json")["cost"]["simulator_calls"] == 6


def test_max_turns_cuts_a_conversation_that_does_not_settle(
        project: Any, servers: tuple[Any, Any]) -> None:
    agent_server, user_server = servers
    _suite(project, f"""
- id: chatty
  user:
    instructions: '{_script("Move ABC123 please.", "Still there?", "Hello?")}'
    model: openai:sim-model
    max_turns: 2
  expect:
    - settles: true
""")
    asked = len(user_server.seen)
    done = _run(project, servers, "--json", "r.json")
    assert done.code == 1, done.out + done.err
    [verdict] = _report(project)["cases"][0]["trials"][0]["verdicts"]
    assert verdict["outcome"] == "fail" and "did not settle" in verdict["note"]
    assert "max_turns (2)" in verdict["note"]
    # Asked once more after the second reply: its answer was no STOP, and was not sent.
    assert len(user_server.seen) == asked + 3
    told = [m["content"] for m in agent_server.seen[-1]["messages"] if m["role"] == "user"]
    assert told == ["Move ABC123 please.", "Still there?"]


FAILURES = {
    "http-500": ({"status": 500}, "user simulator failed: HTTP 500"),
    "empty": ("", "user simulator failed: an empty message"),
    "blank": ("  \n ", "user simulator failed: a message of only whitespace"),
    "refusal": ({"refusal": "no"}, "user simulator failed: the model refused to answer"),
}


def test_a_failing_simulator_breaks_the_trial_and_keeps_what_happened(
        project: Any, servers: tuple[Any, Any]) -> None:
    _suite(project, "".join(f"""
- id: {name}
  user:
    instructions: '{_script("Move ABC123 please.", answer)}'
    model: openai:sim-model
  expect:
    - never_calls: [anything]
    - judge: "The agent helps."
""" for name, (answer, _) in FAILURES.items()), head="judge: openai:sim-model\n")
    done = _run(project, servers, "--json", "r.json", store=True)
    assert done.code == 1, done.out + done.err
    report = _report(project)
    reasons = {case["id"]: (case["trials"][0]["outcome"], case["trials"][0]["reason"])
               for case in report["cases"]}
    assert reasons == {name: ("broken", why) for name, (_, why) in FAILURES.items()}
    assert report["counts"]["public"]["broken"] == 4 and "Traceback" not in done.err
    # What happened before it broke is kept: the first turn, and what both sides spent.
    stored = _trials(project, report["run_id"])
    for name in FAILURES:
        trial = stored[(name, 1)]
        assert trial.outcome == "broken" and trial.trace is not None
        kinds = [(e.kind, e.turn) for e in trial.trace.events]
        assert ("user", 1) in kinds and ("reply", 1) in kinds
        assert trial.trace.simulator is not None and trial.trace.simulator.calls == 2
    assert report["cost"]["simulator_calls"] == 8 and report["cost"]["input_tokens"] == 40
    # Replay finds the record intact: a kept trace is no output to grade again.
    replayed = project.assay("replay", report["run_id"])
    assert replayed.code == 0 and "all match" in replayed.out, replayed.out + replayed.err
    # A rejudge breaks each trial again, with its reason: nothing kept is judged.
    agent_server, user_server = servers
    rejudged = project.assay("rejudge", report["run_id"], "--judge-base-url", user_server.url,
                             "--json", "again.json")
    assert rejudged.code == 1, rejudged.out + rejudged.err
    again = {case["id"]: (case["trials"][0]["outcome"], case["trials"][0]["reason"])
             for case in _report(project, "again.json")["cases"]}
    assert again == reasons and "judge_calls" not in _report(project, "again.json")["cost"]


def test_compare_and_drift_name_a_changed_simulator(
        project: Any, servers: tuple[Any, Any]) -> None:
    _suite(project, BOOKING.replace("    model: openai:sim-model\n", ""))
    for name, model in (("one.json", "openai:sim-model"), ("two.json", "openai:sim-model-2")):
        done = _run(project, servers, "--user-model", model, "--json", name, store=True)
        assert done.code == 0, done.out + done.err
    drifted = project.assay("drift", "t/sim@1", "--json", "-")
    assert drifted.code == 1, drifted.out + drifted.err
    document = json.loads(drifted.out)
    assert (document["status"], document["flipped"]) == ("changed", [])
    assert document["changed"] == [{"facet": "user", "base": None, "cand": None,
                                    "case": "book", "split": "public"}]
    compared = project.assay("compare", "one.json", "two.json", "--json", "-")
    rows = {r["case"]: (r["alignment"], r["differs"]) for r in json.loads(compared.out)["rows"]}
    assert rows == {"book": ("non-comparable", ["user"])}
    shown = project.assay("compare", "one.json", "two.json")
    assert re.search(r"book +public +pass +pass +same +non-comparable +user", shown.out), \
        shown.out
    # The same simulator again: aligned.
    done = _run(project, servers, "--user-model", "openai:sim-model", "--json", "three.json")
    assert done.code == 0, done.out + done.err
    again = project.assay("compare", "one.json", "three.json", "--json", "-")
    assert [r["alignment"] for r in json.loads(again.out)["rows"]] == ["aligned"]


CANARY = "CANARY-5b1e"


def test_a_hidden_case_user_says_nothing_on_any_surface(
        project: Any, servers: tuple[Any, Any]) -> None:
    _suite(project, """
- id: public-one
  user:
    instructions: 'SCRIPT: ["Move ABC123 please.", "###STOP###"]'
""", head="hidden: hidden/\nuser_model: openai:sim-model\n")
    project.write("evals/hidden/cases.yaml", f"""
- id: secret-stop
  user:
    instructions: '{CANARY}-instructions {_script(CANARY + "-said 9am", STOP)}'
  expect:
    - contains: "9:00"
- id: secret-breaks
  user:
    instructions: '{CANARY}-instructions {_script(CANARY + "-said", {"status": 500})}'
    model: openai:sim-model
""")
    done = _run(project, servers, "--json", "r.json", "--junit", "r.xml", "--markdown", "r.md",
                store=True)
    assert done.code == 1, done.out + done.err
    report = _report(project)
    assert report["counts"]["hidden"] == {"total": 2, "passed": 1, "failed": 0,
                                          "inconclusive": 0, "broken": 1}
    run_id = report["run_id"]
    shown = project.assay("show", run_id)
    shown_json = project.assay("show", run_id, "--json")
    verified = project.assay("ledger", "verify")
    surfaces = {"stdout": done.out, "stderr": done.err, "show": shown.out + shown.err,
                "show --json": shown_json.out + shown_json.err,
                "ledger verify": verified.out + verified.err}
    for name in ("r.json", "r.xml", "r.md"):
        surfaces[name] = (project.root / name).read_text()
    for name, text in surfaces.items():
        assert CANARY not in text, f"a hidden user's words leaked into {name}"
    # Not vacuous: the simulator said the canary, and the store keeps it (hidden content).
    assert re.search(r"holdout-2 +│ hidden +│ broken", shown.out), shown.out
    trials = _trials(project, run_id)
    said = [e.text for t in trials.values() if t.trace is not None
            for e in t.trace.events if e.kind == "user"]
    assert f"{CANARY}-said 9am" in said and f"{CANARY}-said" in said


def test_a_simulated_user_with_no_model_is_refused_at_its_line(project: Any) -> None:
    _suite(project, """
- id: one
  input: hi
- id: talk
  user: {instructions: be terse}
""")
    done = project.assay("run", "evals", "--no-store",
                         env={"ASSAY_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"})
    assert done.code == 2, done.out + done.err
    assert done.err == ("assay: error: evals/t.suite.yaml:6: case 'talk' has a simulated user "
                        "and no model to play it: give it model: openai:MODEL, or the suite "
                        "user_model: openai:MODEL, or pass --user-model openai:MODEL\n")
    # --user-model gives it one, in the form judges are named; without a server, refused.
    bad = project.assay("run", "evals", "--no-store", "--user-model", "sim-model",
                        env={"ASSAY_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"})
    assert bad.code == 2 and "--user-model: a simulated user's model is openai:MODEL" in bad.err
    nowhere = project.assay("run", "evals", "--no-store", "--user-model", "openai:sim-model",
                            env={"ASSAY_JUDGE_BASE_URL": ""})
    assert nowhere.code == 2 and "pass --judge-base-url URL or set ASSAY_JUDGE_BASE_URL" \
        in nowhere.err, nowhere.err

"""A conversation with an ``exec:`` program (SPEC §16): one process for the whole of it, one
JSON message per line on stdin, one reply per line on stdout.

The programs are real processes, in Python and in Node. Those that call a model do so
with the official SDKs through the real recording proxy, which forwards to a scripted
model on loopback (``tests/model_server.py``): its facts reach the trace, each in the
turn it happened in. Conversations are run through a real battery, which grades them.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.engine import Battery, BatteryOptions
from assay.model import Case, CaseResult, Trace
from assay.suites import load_suite_file
from assay.targets import TargetOptions, TrialBroken, TrialRequest, make_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hosts"))

from hostlib import run_moving_on  # noqa: E402

from model_server import SERVED, ModelServer  # noqa: E402
from user_simulator import assert_booked, booking_suite, converse, user_server  # noqa: E402

pytestmark = pytest.mark.real

PYTHON = shlex.quote(sys.executable)
NODE_MODULES = Path(__file__).resolve().parents[2] / ".hosts" / "node_modules"
KEY = "sk-CANARY-CONVERSATION-KEY-5c2e"

#: A shop assistant with the ``openai`` SDK: one conversation over stdin, its own message
#: list kept across turns; each line it gets is logged on stderr.
PY_AGENT = """\
    import json, sys
    from openai import OpenAI

    ORDERS = {"A-1": "shipped", "A-2": "lost"}
    RUN = {"lookup": lambda a: f"order {a['order']} is {ORDERS.get(a['order'])}",
           "refund": lambda a: f"order {a['order']} refunded"}
    TOOLS = [{"type": "function", "function": {
        "name": name, "parameters": {"type": "object",
                                     "properties": {"order": {"type": "string"}}}}}
        for name in RUN]
    client = OpenAI()
    messages = []
    for line in sys.stdin:
        print("got", line.strip(), file=sys.stderr, flush=True)
        message = json.loads(line)
        messages.append(message)
        if message["role"] != "user":
            continue
        while True:
            reply = client.chat.completions.create(model="gpt-4.1", messages=messages,
                                                   tools=TOOLS).choices[0].message
            if not reply.tool_calls:
                messages.append({"role": "assistant", "content": reply.content})
                print(json.dumps(reply.content), flush=True)
                break
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                result = RUN[call.function.name](json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    """

#: The same assistant in Node, with the ``openai`` npm package (node_agent.cjs's way).
NODE_AGENT = """\
    const OpenAI = require("openai");
    const readline = require("readline");
    const ORDERS = { "A-1": "shipped", "A-2": "lost" };
    const run = {
      lookup: ({ order }) => `order ${order} is ${ORDERS[order]}`,
      refund: ({ order }) => `order ${order} refunded`,
    };
    const tools = Object.keys(run).map((name) => ({ type: "function", function: {
      name, parameters: { type: "object", properties: { order: { type: "string" } } } } }));

    async function main() {
      const client = new OpenAI();
      const messages = [];
      for await (const line of readline.createInterface({ input: process.stdin })) {
        const message = JSON.parse(line);
        messages.push(message);
        if (message.role !== "user") continue;
        for (;;) {
          const reply = (await client.chat.completions.create(
            { model: "gpt-4.1", messages, tools })).choices[0].message;
          if (!reply.tool_calls?.length) {
            messages.push({ role: "assistant", content: reply.content });
            process.stdout.write(JSON.stringify(reply.content) + "\\n");
            break;
          }
          messages.push(reply);
          for (const call of reply.tool_calls) {
            const result = run[call.function.name](JSON.parse(call.function.arguments));
            messages.push({ role: "tool", tool_call_id: call.id, content: result });
          }
        }
      }
    }
    main().catch((error) => { process.stderr.write(`${error}\\n`); process.exit(1); });
    """


def _script(*turns: dict[str, Any]) -> str:
    return "SCRIPT:" + json.dumps(list(turns))


#: Turn 1 looks A-2 up and asks; turn 2 refunds it (the model's script runs on across turns).
REFUND = _script({"call": "lookup", "args": {"order": "A-2"}},
                 {"say": "A-2 is lost. Shall I refund it?"},
                 {"call": "refund", "args": {"order": "A-2"}},
                 {"say": "Refunded A-2."})
FIRST = f"Where is my order A-2? {REFUND}"

SUITE = """\
suite: exec/talk@1
timeout_s: TIMEOUT
cases:
  - id: refund-after-asking
    input: You are the shop's assistant.
    turns:
      - 'FIRST'
      - Yes, refund it.
    expect:
      - {turn: 1, contains: Shall I refund}
      - {turn: 2, contains: Refunded}
      - calls: {tool: refund, args: {order: A-2}}
      - calls_before: [lookup, refund]
      - within_steps: 4
"""


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def upstream(model: ModelServer, monkeypatch: pytest.MonkeyPatch) -> ModelServer:
    """The scripted model as the upstream the proxy forwards to, with the real key."""
    monkeypatch.setenv("OPENAI_BASE_URL", model.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NODE_PATH", str(NODE_MODULES))
    return model


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def battery(folder: Path, uri: str, suite: str, *, timeout: float = 120,
            stuck: Any = None) -> tuple[CaseResult, Trace | None]:
    """The suite's one case through a real battery: its result and its trial's trace.

    ``stuck``: true once the program can only hang; the battery's clock is then moved
    on by ``timeout`` (``hostlib.run_moving_on``), and its timeout fires at once.
    """
    path = write(folder, "talk.suite.yaml", suite.replace("TIMEOUT", str(timeout)))
    traces: list[Trace | None] = []
    made = Battery(load_suite_file(path), make_target(uri, TargetOptions(base_dir=folder)),
                   BatteryOptions())
    made.on_result = lambda case, result: traces.append(result.trace)
    report = run_moving_on(made.run(), stuck or (lambda: False), timeout)
    (case,) = report.cases
    assert isinstance(case, CaseResult)
    (trace,) = traces
    return case, trace


def run(folder: Path, uri: str, turns: list[str], system: str | None = None) -> Trace:
    """One conversation on the target, straight (no battery)."""
    target = make_target(uri, TargetOptions(base_dir=folder))
    request = TrialRequest(case=Case(id="c1", input=system, turns=turns), n=1, timeout_s=30)

    async def go() -> Trace:
        await target.start()
        try:
            return await target.run(request)
        finally:
            await target.close()

    return asyncio.run(go())


def _kinds(trace: Trace) -> list[tuple[str, str | None, int | None]]:
    return [(e.kind, e.name, e.turn) for e in trace.events]


TALK = [("user", None, 1), ("tool_call", "lookup", 1), ("tool_result", "lookup", 1),
        ("message", None, 1), ("reply", None, 1),
        ("user", None, 2), ("tool_call", "refund", 2), ("tool_result", "refund", 2),
        ("message", None, 2), ("reply", None, 2)]


@pytest.mark.parametrize("language", ["python", "node"])
def test_a_program_holds_the_conversation_and_the_wire_gives_each_call_its_turn(
        tmp_path: Path, upstream: ModelServer, language: str) -> None:
    if language == "python":
        write(tmp_path, "agent.py", PY_AGENT)
        uri = f"exec:{PYTHON} agent.py"
    else:
        write(tmp_path, "agent.cjs", NODE_AGENT)
        uri = "exec:node agent.cjs"
    before = len(upstream.requests)
    case, trace = battery(tmp_path, uri, SUITE.replace("FIRST", FIRST))
    (trial,) = case.trials
    assert [v.outcome for v in trial.verdicts] == ["pass"] * 5, trial.verdicts
    assert trace is not None
    assert (trace.status, trace.output, trace.settled, trace.exit_code) == (
        "ok", "Refunded A-2.", True, 0)
    assert _kinds(trace) == TALK
    times = [e.t for e in trace.events]
    assert None not in times and times == sorted(times)
    assert trace.steps == 4 and trace.facets["model"] == SERVED
    # One process all along: the model's last request holds the whole conversation, the
    # system message first (sent once, as the first line) and the first answer in it.
    sent = upstream.requests[before:]
    assert len(sent) == 4
    last = sent[-1]["body"]["messages"]
    assert last[0] == {"role": "system", "content": "You are the shop's assistant."}
    assert [m["content"] for m in last if m["role"] == "user"] == [FIRST, "Yes, refund it."]
    assert "A-2 is lost. Shall I refund it?" in json.dumps(last)
    # The real key went upstream; the program held a stand-in.
    assert all(KEY in json.dumps(r["headers"]) for r in sent)
    assert KEY not in trace.model_dump_json()
    if language == "python":  # what it read, line by line
        assert trace.stdout.splitlines() == [
            'got {"role": "system", "content": "You are the shop\'s assistant."}',
            "got " + json.dumps({"role": "user", "content": FIRST}, ensure_ascii=False),
            'got {"role": "user", "content": "Yes, refund it."}']


def test_a_hang_in_the_second_turn_keeps_the_first_and_its_breach_fails(
        tmp_path: Path, upstream: ModelServer) -> None:
    # The agent refunds in the first turn (forbidden), answers, then never answers again.
    hanging = tmp_path / "hanging"
    write(tmp_path, "agent.py", PY_AGENT.replace(
        '    for line in sys.stdin:\n',
        '    for number, line in enumerate(sys.stdin):\n'
        '        if number == 2:\n'
        f'            open({str(hanging)!r}, "w").close()\n'
        '            import time; time.sleep(600)\n'))
    script = _script({"call": "refund", "args": {"order": "A-2"}}, {"say": "Refunded."})
    suite = SUITE.replace("FIRST", f"Refund A-2. {script}").replace(
        "      - calls: {tool: refund, args: {order: A-2}}\n",
        "      - never_calls: [refund]\n")
    case, trace = battery(tmp_path, f"exec:{PYTHON} agent.py", suite, timeout=60,
                          stuck=hanging.exists)
    (trial,) = case.trials
    assert trial.outcome == "fail", trial.reason
    assert [(v.check, v.outcome) for v in trial.verdicts][2] == ("never_calls", "fail")
    assert trace is not None and trace.partial and trace.status == "timeout"
    assert _kinds(trace) == [("user", None, 1), ("tool_call", "refund", 1),
                             ("tool_result", "refund", 1), ("message", None, 1),
                             ("reply", None, 1), ("user", None, 2)]


#: A program without a model: replies ``{"turn": N, "heard": …}``; what it does on a given
#: turn is set by the script's first argument (``TURN:WHAT``).
PLAIN = """\
    import json, os, signal, sys
    when, _, what = (sys.argv[1] if len(sys.argv) > 1 else "0:").partition(":")
    heard = []
    for line in sys.stdin:
        print("got", line.strip(), file=sys.stderr, flush=True)
        message = json.loads(line)
        if message["role"] != "user":
            continue
        heard.append(message["content"])
        if len(heard) == int(when):
            if what == "exit":
                print("lost my place", file=sys.stderr)
                sys.exit(3)
            if what == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if what in ("null", '{"status": "refused", "reason": "not on Fridays"}'):
                print(what, flush=True)
                continue
            if what == "quiet":
                break
        print(json.dumps({"turn": len(heard), "heard": message["content"]}), flush=True)
    if what == "extra":
        print("one more thing")
        print("and another")
    if what == "fail-at-end":
        sys.exit(4)
    """


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    write(tmp_path, "plain.py", PLAIN)
    return tmp_path


def test_each_message_is_a_json_line_and_each_reply_line_is_parsed(plain: Path) -> None:
    trace = run(plain, f"exec:{PYTHON} plain.py", ["hello", "more ✓"])
    assert (trace.status, trace.settled, trace.exit_code) == ("ok", True, 0)
    assert trace.output == {"turn": 2, "heard": "more ✓"}
    assert [e.result for e in trace.events if e.kind == "reply"] == [
        {"turn": 1, "heard": "hello"}, trace.output]
    # Without an input there is no system line; each user line is one JSON object.
    assert trace.stdout == ('got {"role": "user", "content": "hello"}\n'
                            'got {"role": "user", "content": "more ✓"}\n')


def test_the_argument_that_takes_the_input_gets_the_system_message(plain: Path) -> None:
    write(plain, "args.py", """\
        import json, sys
        for line in sys.stdin:
            print(json.dumps({"system": sys.argv[1], "got": json.loads(line)}), flush=True)
        """)
    trace = run(plain, f"exec:{PYTHON} args.py {{input}}", ["hi"], system="Be brief.")
    assert trace.output == {"system": "Be brief.", "got": {"role": "user", "content": "hi"}}


def test_a_program_that_dies_mid_conversation_is_an_error_with_the_turns_before(
        plain: Path) -> None:
    trace = run(plain, f"exec:{PYTHON} plain.py 2:exit", ["one", "two", "three"])
    assert (trace.status, trace.exit_code, trace.settled) == ("error", 3, False)
    assert trace.error == "turn 2: the agent exited with code 3 without replying: " \
                          "lost my place"
    assert trace.output == {"turn": 1, "heard": "one"}
    assert [(e.kind, e.turn) for e in trace.events] == [("user", 1), ("reply", 1), ("user", 2)]


def test_a_program_killed_mid_conversation_keeps_the_turns_and_before_any_reply_breaks(
        plain: Path) -> None:
    trace = run(plain, f"exec:{PYTHON} plain.py 2:kill", ["one", "two"])
    assert trace.status == "error" and trace.error is not None
    assert trace.error.startswith("turn 2: the agent was killed by SIGKILL without replying")
    with pytest.raises(TrialBroken, match="killed by SIGKILL"):
        run(plain, f"exec:{PYTHON} plain.py 1:kill", ["one", "two"])


@pytest.mark.parametrize(("what", "error"), [
    ("quiet", "turn 1: the agent exited with code 0 without replying"),
    ("null", "turn 1: the agent replied null"),
])
def test_a_program_that_replies_with_nothing_is_an_error(plain: Path, what: str,
                                                         error: str) -> None:
    trace = run(plain, f"exec:{PYTHON} plain.py 1:{what}", ["one", "two"])
    assert (trace.status, trace.output) == ("error", None)
    assert trace.error is not None and trace.error.startswith(error)
    assert [(e.kind, e.turn) for e in trace.events] == [("user", 1)]


def test_a_refusal_ends_the_conversation_and_stdin_is_closed(plain: Path) -> None:
    refused = '{"status": "refused", "reason": "not on Fridays"}'
    trace = run(plain, f"exec:{PYTHON} plain.py 2:{shlex.quote(refused)}",
                ["one", "two", "three"])
    assert (trace.status, trace.error, trace.settled) == ("refused", "not on Fridays", True)
    assert trace.output == json.loads(refused)
    assert "three" not in trace.stdout and trace.exit_code == 0


def test_a_failing_exit_after_the_last_reply_is_an_error_and_extra_lines_are_no_reply(
        plain: Path) -> None:
    failed = run(plain, f"exec:{PYTHON} plain.py 0:fail-at-end", ["one"])
    assert (failed.status, failed.exit_code) == ("error", 4)
    assert failed.error == 'exited with code 4: got {"role": "user", "content": "one"}'

    assert failed.output == {"turn": 1, "heard": "one"}
    extra = run(plain, f"exec:{PYTHON} plain.py 0:extra", ["one"])
    assert (extra.status, extra.output) == ("ok", {"turn": 1, "heard": "one"})
    assert [(e.kind, e.text) for e in extra.events][-1] == (
        "error", "the agent printed 2 more line(s) after its last reply; they are no reply")


#: The booking agent of tests/user_simulator.py as a program: one JSON line a reply.
BOOKING = """\
    import json, sys
    for line in sys.stdin:
        message = json.loads(line)
        if message["role"] == "user":
            said = message["content"]
            print(json.dumps("Booked: Friday, 9:00." if "9am" in said
                             else "Which flight on Friday: 9am or 5pm?"), flush=True)
        else:
            print("system:", message["content"], file=sys.stderr, flush=True)
    """


def test_a_simulated_user_talks_with_a_program(tmp_path: Path) -> None:
    write(tmp_path, "booking.py", BOOKING)
    target = make_target(f"exec:{PYTHON} booking.py", TargetOptions(base_dir=tmp_path))
    with user_server() as user:
        case, trace = converse(booking_suite(tmp_path, "exec"), target, user.url)
        assert_booked(case, trace, user.seen)
    assert (trace.output, trace.exit_code) == ("Booked: Friday, 9:00.", 0)
    assert trace.stdout == "system: You are a booking agent.\n"  # one process, stdin closed

"""A conversation with an ``http://`` target (SPEC §16): the messages POSTed each turn to a
real HTTP server on loopback, which answers from the conversation it is sent."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from assay.model import Case, Trace
from assay.targets import TargetOptions, TrialBroken, TrialRequest, make_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from user_simulator import assert_booked, booking_suite, converse, user_server  # noqa: E402

pytestmark = pytest.mark.real

FIRST = "I need to move booking ABC123 to Friday."
SECOND = "The 9am one, please."


@dataclass
class Agent:
    """The server: what it was sent, and a gate a hanging reply waits on."""

    base: str = ""
    seen: list[tuple[str, Any]] = field(default_factory=list)
    asked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


def _booking(messages: list[dict[str, Any]]) -> tuple[int, bytes]:
    """A booking agent that reads the conversation: it asks which flight, then books the
    one the user picked, if it asked first."""
    said = [m["content"] for m in messages if m["role"] == "user"]
    asked = any(m["role"] == "assistant" and "9am or 5pm" in json.dumps(m["content"])
                for m in messages)
    if "9am" in said[-1] and asked:
        return 200, json.dumps({"text": "Booked: Friday, 9:00.", "booking": "ABC123"}).encode()
    return 200, json.dumps("Which flight on Friday: 9am or 5pm?").encode()


#: Replies to the second user message, by path; the first is the booking agent's.
SECOND_REPLY: dict[str, tuple[int, bytes]] = {
    "/refuse": (451, b'{"status": "refused", "reason": "no changes on Fridays"}'),
    "/html": (200, b"<html>not json</html>"),
    "/empty": (200, b""),
    "/error": (500, b'{"error": "database down"}'),
}


@pytest.fixture
def agent() -> Iterator[Agent]:
    state = Agent()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw)
            state.seen.append((self.path, body))
            messages = body["messages"]
            turn = sum(1 for m in messages if m["role"] == "user")
            if self.path.startswith("/first/"):  # the second turn's reply, to the first
                status, payload = SECOND_REPLY[self.path.removeprefix("/first")]
            elif turn == 1 or self.path == "/agent":
                status, payload = _booking(messages)
            elif self.path == "/hang":
                state.asked.set()
                state.release.wait(30)
                status, payload = 200, b'"too late"'
            else:
                status, payload = SECOND_REPLY[self.path]
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _request(turns: list[str], system: str | None = None) -> TrialRequest:
    return TrialRequest(case=Case(id="move", input=system, turns=turns), n=1, timeout_s=10.0)


def _run(uri: str, request: TrialRequest) -> Trace:
    target = make_target(uri, TargetOptions())

    async def go() -> Trace:
        await target.start()
        try:
            return await target.run(request)
        finally:
            await target.close()

    return asyncio.run(go())


def test_each_turn_posts_the_conversation_so_far_and_the_reply_answers_it(
        agent: Agent) -> None:
    trace = _run(f"{agent.base}/agent", _request([FIRST, SECOND], "You are a booking agent."))
    assert (trace.status, trace.settled, trace.steps) == ("ok", True, 2)
    assert trace.output == {"text": "Booked: Friday, 9:00.", "booking": "ABC123"}
    assert [(e.kind, e.turn) for e in trace.events] == [("user", 1), ("reply", 1),
                                                        ("user", 2), ("reply", 2)]
    assert [e.result for e in trace.events if e.kind == "reply"] == [
        "Which flight on Friday: 9am or 5pm?", trace.output]
    times = [e.t for e in trace.events]
    assert None not in times and times == sorted(times)
    # The system message first, then the turns; the agent's reply back as it gave it.
    (_, first), (_, second) = agent.seen
    assert first == {"messages": [{"role": "system", "content": "You are a booking agent."},
                                  {"role": "user", "content": FIRST}]}
    assert second["messages"][1:] == [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "Which flight on Friday: 9am or 5pm?"},
        {"role": "user", "content": SECOND}]


def test_without_an_input_there_is_no_system_message_and_an_object_reply_goes_back_whole(
        agent: Agent) -> None:
    trace = _run(f"{agent.base}/agent", _request([SECOND] * 3))
    # Asked straight away for 9am, it asks which flight first; then books, and books again.
    booked = {"text": "Booked: Friday, 9:00.", "booking": "ABC123"}
    assert [e.result for e in trace.events if e.kind == "reply"] == [
        "Which flight on Friday: 9am or 5pm?", booked, booked]
    (_, first), _, (_, third) = agent.seen
    assert first == {"messages": [{"role": "user", "content": SECOND}]}
    assert third["messages"][3] == {"role": "assistant", "content": booked}


def test_a_refusal_ends_the_conversation_in_its_turn(agent: Agent) -> None:
    trace = _run(f"{agent.base}/refuse", _request([FIRST, SECOND, "And a third thing."]))
    assert (trace.status, trace.error, trace.settled) == ("refused", "no changes on Fridays",
                                                          True)
    assert [(e.kind, e.turn) for e in trace.events] == [("user", 1), ("reply", 1), ("user", 2)]
    assert len(agent.seen) == 2  # the third message was never sent


def test_an_error_status_ends_the_conversation_with_its_body(agent: Agent) -> None:
    trace = _run(f"{agent.base}/error", _request([FIRST, SECOND, "And a third thing."]))
    assert (trace.status, trace.error, trace.output) == ("error", "HTTP 500",
                                                         {"error": "database down"})
    assert len(agent.seen) == 2


@pytest.mark.parametrize(("path", "why"), [("/html", "reply 200 is not JSON"),
                                           ("/empty", "replied with nothing")])
def test_a_turn_that_gives_no_reply_ends_it_as_an_error_with_the_turns_before_kept(
        agent: Agent, path: str, why: str) -> None:
    trace = _run(f"{agent.base}{path}", _request([FIRST, SECOND]))
    assert trace.status == "error" and trace.error is not None
    assert trace.error.startswith("turn 2: ") and why in trace.error
    assert [(e.kind, e.turn) for e in trace.events] == [("user", 1), ("reply", 1), ("user", 2)]
    assert trace.settled is False


@pytest.mark.parametrize(("path", "why"), [("/html", "not JSON"),
                                           ("/empty", "replied with nothing")])
def test_a_first_turn_that_gives_no_reply_breaks_the_trial(agent: Agent, path: str,
                                                           why: str) -> None:
    with pytest.raises(TrialBroken, match=why):
        _run(f"{agent.base}/first{path}", _request([FIRST, SECOND]))
    assert len(agent.seen) == 1


def test_a_hang_in_the_second_turn_keeps_the_first(agent: Agent) -> None:
    request = _request([FIRST, SECOND])
    target = make_target(f"{agent.base}/hang", TargetOptions())

    async def go() -> None:
        await target.start()
        try:
            running = asyncio.create_task(target.run(request))
            await asyncio.to_thread(agent.asked.wait, 30)
            running.cancel()  # what the battery's timeout does
            with pytest.raises(asyncio.CancelledError):
                await running
        finally:
            agent.release.set()
            await target.close()

    asyncio.run(go())
    kept = request.partial.trace()
    assert kept is not None and kept.status == "timeout"
    assert [(e.kind, e.turn) for e in kept.events] == [("user", 1), ("reply", 1), ("user", 2)]


def test_a_simulated_user_talks_with_the_http_agent(agent: Agent, tmp_path: Path) -> None:
    with user_server() as user:
        case, trace = converse(booking_suite(tmp_path, "http"),
                               make_target(f"{agent.base}/agent", TargetOptions()), user.url)
        assert_booked(case, trace, user.seen)
    assert trace.output == {"text": "Booked: Friday, 9:00.", "booking": "ABC123"}
    # Each POST carried the conversation so far, the system message first.
    (_, first), (_, second) = agent.seen
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert first["messages"][0] == {"role": "system", "content": "You are a booking agent."}

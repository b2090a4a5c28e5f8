"""Conversations on ``exec:`` and ``http`` targets end to end (SPEC §16): ``assay run`` takes
the suite (no target refuses it at load), holds each conversation and grades it per turn.

The agents are real: a shell script that speaks the line protocol with no JSON library,
and an HTTP server on loopback answering the messages it is POSTed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytestmark = pytest.mark.real

#: Replies to each user line with the line itself inside an object: no parser needed.
SHELL_AGENT = """\
#!/bin/sh
n=0
while IFS= read -r line; do
  case "$line" in
    *'"role": "user"'*)
      n=$((n + 1))
      printf '{"turn": %d, "heard": %s}\\n' "$n" "$line" ;;
  esac
done
"""

CASES = """\
cases:
  - id: move-booking
    input: You are a booking agent.
    turns:
      - Move booking ABC123 to Friday.
      - The 9am one, please.
    expect:
      - {turn: 1, contains: ABC123}
      - {turn: 2, contains: "9am"}
      - {turn: 1, not_contains: "9am"}
      - status: ok
"""


def _verdicts(project: Any) -> list[tuple[str, str]]:
    report = json.loads((project.root / "r.json").read_text())
    (case,) = report["cases"]
    (trial,) = case["trials"]
    return [(v["assertion"], v["outcome"]) for v in trial["verdicts"]]


GRADED = [("contains (turn 1)", "pass"), ("contains (turn 2)", "pass"),
          ("not_contains (turn 1)", "pass"), ("status", "pass")]


def test_an_exec_program_in_any_language_holds_a_conversation(project: Any) -> None:
    agent = project.write("evals/agent.sh", SHELL_AGENT)
    agent.chmod(0o755)
    project.write("evals/t.suite.yaml", "suite: t/talk@1\ntarget: exec:./agent.sh\n" + CASES)
    done = project.assay("run", "evals", "--no-store", "--json", "r.json")
    assert done.code == 0, done.out + done.err
    assert _verdicts(project) == GRADED


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[Any]]]:
    """An agent over HTTP: it answers the last user message, and says how many it has seen."""
    seen: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            seen.append(body)
            said = [m["content"] for m in body["messages"] if m["role"] == "user"]
            payload = json.dumps(f"({len(said)}) You said: {said[-1]}").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/agent", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_an_http_endpoint_holds_a_conversation(project: Any,
                                               endpoint: tuple[str, list[Any]]) -> None:
    url, seen = endpoint
    project.write("evals/t.suite.yaml", f"suite: t/talk@1\ntarget: {url}\n" + CASES)
    done = project.assay("run", "evals", "--no-store", "--json", "r.json")
    assert done.code == 0, done.out + done.err
    assert _verdicts(project) == GRADED
    assert [len(body["messages"]) for body in seen] == [2, 4]  # system + the turns so far

"""``http://…`` targets against a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from assay.errors import HarnessFailure
from assay.model import Evidence, Trace
from assay.model.storable import CUT_NOTE
from assay.targets import TrialBroken
from assay.targets.refusal import REASON_CHARS

from ..fuzz_corpus import HOSTILE, MARKUP

if TYPE_CHECKING:
    from conftest import Workspace


@dataclass
class Server:
    """A loopback server; ``seen`` holds (method, path, content type, body) of each request."""

    base: str
    seen: list[tuple[str, str, str, Any]] = field(default_factory=list)


REPLIES: dict[str, tuple[int, str, bytes | None]] = {
    "/error": (500, "application/json", b'{"error": "database down"}'),
    "/html": (200, "text/html", b"<html>not json</html>"),
    "/text500": (500, "text/plain", b"Internal Server Error"),
    "/empty": (200, "application/json", b""),
    # Refusals (SPEC §4): a 2xx saying so, a 403 or 451 with a JSON reason.
    "/refuse200": (200, "application/json",
                   b'{"status": "refused", "reason": "no refunds on weekends", "ticket": 7}'),
    "/refuse403": (403, "application/json", b'{"reason": "not your account"}'),
    "/refuse451": (451, "application/json",
                   b'{"status": "refused", "reason": "blocked in your region"}'),
    "/refuse403-bare": (403, "application/json", b'{"status": "refused"}'),
    "/refuse403-odd": (403, "application/json",
                       b'{"reason": {"code": 7, "rules": ["kyc",\n "aml"]}}'),
    "/forbidden-html": (403, "text/html", b"<h1>Forbidden</h1>"),
    "/forbidden-other": (403, "application/json", b'{"error": "no key"}'),
    "/forbidden-list": (403, "application/json", b'["not your account"]'),
    "/conflict-reason": (409, "application/json", b'{"reason": "already refunded"}'),
    "/not-refused": (200, "application/json", b'{"status": "Refused", "reason": "case"}'),
    "/refuse-hostile": (451, "application/json", json.dumps(
        {"status": "refused", "reason": HOSTILE + "y" * 1_000_000}).encode()),
    "/refuse-deep": (200, "application/json",
                     b'{"status": "refused", "reason": ' + b"[" * 500 + b"]" * 500 + b"}"),
}


@pytest.fixture
def server() -> Iterator[Server]:
    """Answers /echo with what it got; other paths as REPLIES says."""
    state = Server(base="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw) if raw else None
            state.seen.append(("POST", self.path, self.headers.get("Content-Type", ""), body))
            if self.path == "/echo":
                status, kind, payload = 200, "application/json", json.dumps(
                    {"got": body}).encode()
            else:
                status, kind, payload = REPLIES[self.path]
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload or b"")))
            self.end_headers()
            if payload:
                self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_json_reply_is_the_output_and_the_input_is_posted_as_json(ws: Workspace,
                                                                    server: Server) -> None:
    case_input = {"document": "fixtures/invoice.csv", "rows": [1, 2.5, None], "flag": True}
    uri = f"{server.base}/echo"
    a, b = ws.run(uri, ws.trial(case_input), ws.trial("just a prompt", n=2))
    assert a.status == "ok"
    assert a.error is None
    assert a.output == {"got": case_input}
    assert b.output == {"got": "just a prompt"}
    assert server.seen[0] == ("POST", "/echo", "application/json", case_input)
    assert server.seen[1][3] == "just a prompt"
    # An endpoint shows only its answer: no tool calls, no cost are vouched for.
    assert a.evidence_for("output") == Evidence.OBSERVED
    assert a.evidence_for("tool_calls") == Evidence.UNAVAILABLE
    assert a.evidence_for("cost") == Evidence.UNAVAILABLE
    assert a.facets["harness"] == "http"


def test_a_server_error_with_a_json_body_is_status_error(ws: Workspace, server: Server) -> None:
    (trace,) = ws.run(f"{server.base}/error", ws.trial({"q": 1}))
    assert trace.status == "error"
    assert trace.output == {"error": "database down"}
    assert trace.error is not None and "500" in trace.error


def test_a_server_error_with_a_text_body_is_status_error_with_the_text(ws: Workspace,
                                                                       server: Server) -> None:
    (trace,) = ws.run(f"{server.base}/text500", ws.trial(None))
    assert trace.status == "error"
    assert trace.output == "Internal Server Error"


def test_a_success_that_is_not_json_breaks_the_trial(ws: Workspace, server: Server) -> None:
    with pytest.raises(TrialBroken) as caught:
        ws.run(f"{server.base}/html", ws.trial({"q": 1}))
    assert "200" in str(caught.value)
    assert "not JSON" in str(caught.value)


def test_an_empty_success_is_no_output(ws: Workspace, server: Server) -> None:
    (trace,) = ws.run(f"{server.base}/empty", ws.trial({"q": 1}))
    assert (trace.status, trace.output) == ("ok", None)


def test_a_refused_connection_is_a_harness_failure_at_start(ws: Workspace) -> None:
    # A bound socket that never listens: its port refuses, and nobody else can take it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        target = ws.target(f"http://127.0.0.1:{port}/agent")
        with pytest.raises(HarnessFailure) as caught:
            asyncio.run(target.start())
    assert f"127.0.0.1:{port}" in str(caught.value)


def test_a_server_that_goes_away_breaks_the_trial_not_the_battery(ws: Workspace) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        with pytest.raises(TrialBroken, match="request failed"):
            ws.run(f"http://127.0.0.1:{httpd.server_address[1]}/", ws.trial(1))
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_pin_is_recorded_as_not_honoured_by_an_endpoint(ws: Workspace,
                                                          server: Server) -> None:
    from assay.model import Case
    from assay.targets import TrialRequest

    pinned = TrialRequest(case=Case(id="p", input={"a": 1}, effort="low",
                                    invocation="explicit"), n=1, timeout_s=5.0)
    (trace,) = ws.run(f"{server.base}/echo", pinned)
    assert trace.facets == {
        "harness": "http", "invocation": "explicit",
        "effort_pin": "low (not honoured: an HTTP endpoint picks its own model and effort)"}


# --------------------------------------------------------------------------- refusals


def test_a_reply_saying_refused_is_a_refusal_its_reason_the_error(ws: Workspace,
                                                                   server: Server) -> None:
    ok_200, forbidden, legal, bare = (
        ws.run(f"{server.base}{path}", ws.trial(1))[0]
        for path in ("/refuse200", "/refuse403", "/refuse451", "/refuse403-bare"))
    assert (ok_200.status, ok_200.error) == ("refused", "no refunds on weekends")
    assert ok_200.output == {"status": "refused", "reason": "no refunds on weekends",
                             "ticket": 7}  # the body stays the output
    assert (forbidden.status, forbidden.error) == ("refused", "not your account")
    assert forbidden.output == {"reason": "not your account"}
    assert (legal.status, legal.error) == ("refused", "blocked in your region")
    assert (bare.status, bare.error) == ("refused", None)  # refused, no reason given


def test_a_reason_that_is_not_text_is_kept_as_one_line_of_json(ws: Workspace,
                                                                 server: Server) -> None:
    odd, deep = (ws.run(f"{server.base}{path}", ws.trial(1))[0]
                 for path in ("/refuse403-odd", "/refuse-deep"))
    assert (odd.status, odd.error) == ("refused", '{"code":7,"rules":["kyc","aml"]}')
    assert deep.status == "refused" and deep.error is not None
    assert "\n" not in deep.error and len(deep.error) <= REASON_CHARS
    assert deep.error.startswith("[" * 60) and CUT_NOTE.strip() in deep.error


@pytest.mark.parametrize(("path", "status", "error"), [
    ("/forbidden-html", "error", "HTTP 403"),      # no JSON: as before
    ("/forbidden-other", "error", "HTTP 403"),     # JSON without a reason
    ("/forbidden-list", "error", "HTTP 403"),      # JSON, not an object
    ("/conflict-reason", "error", "HTTP 409"),     # a reason, but not a refusing status
    ("/not-refused", "ok", None),                  # "Refused" is not "refused"
])
def test_a_reply_that_does_not_say_refused_keeps_its_status(
        ws: Workspace, server: Server, path: str, status: str, error: str | None) -> None:
    (trace,) = ws.run(f"{server.base}{path}", ws.trial(1))
    assert (trace.status, trace.error) == (status, error)
    if path == "/forbidden-html":
        assert trace.output == "<h1>Forbidden</h1>"


def test_a_hostile_reason_is_cut_and_stored_as_text(ws: Workspace, server: Server) -> None:
    (trace,) = ws.run(f"{server.base}/refuse-hostile", ws.trial(1))
    assert trace.status == "refused" and trace.error is not None
    assert len(trace.error) == REASON_CHARS and trace.error.endswith("y…")
    assert trace.error.startswith(MARKUP["inst"])
    assert "lone\ufffdhigh" in trace.error and "\ud800" not in trace.error
    assert len(trace.output["reason"]) > 1_000_000  # the output keeps all of it
    assert Trace.model_validate_json(trace.model_dump_json()).error == trace.error

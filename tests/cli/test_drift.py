"""`assay drift` end to end: real `assay run` batteries of an ``openai:`` agent against an
OpenAI-compatible server on loopback whose answers and served model the test sets, then
the real `assay drift`, its JSON and its webhook POST to a loopback server.

The model server is examples/support/stub_model.py (imported by path, as
tests/targets/test_openai.py does); nothing of assay is patched.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assay.store.runs.record import save_run

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
CANARY = "CANARY-5be2"

SUITE = """
suite: demo/drift@1
target: openai:m
trials: 1
hidden: hidden/
cases:
  - id: greet
    input: hello
    expect: [{contains: hi}]
  - id: farewell
    input: bye
    expect: [{contains: goodbye}]
"""

HIDDEN = f"""
- id: {CANARY}-id
  input: {CANARY}-input
  model: {CANARY}-pin
  expect: [{{contains: {CANARY}-expected}}]
"""


def _load_stub() -> ModuleType:
    path = ROOT / "examples" / "support" / "stub_model.py"
    spec = importlib.util.spec_from_file_location("assay_example_stub_model_drift", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stub_model = _load_stub()


class Model:
    """The server's behaviour, set by the test between batteries.

    Each answer is looked up by the case's input; every reply names the model
    asked for with ``version`` appended (``m`` is served as ``m-2025-01``), as a
    provider's alias resolves to a dated model.
    """

    def __init__(self) -> None:
        self.version = "2025-01"
        self.answers = {"hello": "hi there", "bye": "goodbye", f"{CANARY}-input": "nope"}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        text = stub_model.first_user_text(body)
        return {"content": self.answers.get(text, "?"),
                "model": f"{body['model']}-{self.version}"}


class Hook:
    """A webhook receiver on loopback: keeps each POST's headers and body, answers 204."""

    def __init__(self) -> None:
        self.received: list[tuple[str | None, bytes]] = []
        #: What it answers; the test may make it fail.
        self.status = 204
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hook.received.append((self.headers.get("Content-Type"), body))
                self.send_response(hook.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet."""

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/hook/SECRET-TOKEN"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    def bodies(self) -> list[dict[str, Any]]:
        assert all(kind == "application/json" for kind, _ in self.received)
        return [json.loads(body) for _, body in self.received]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own server, prices, key or store must not leak into these tests."""
    for name in ("ASSAY_OPENAI_BASE_URL", "ASSAY_PRICES", "OPENAI_API_KEY", "ASSAY_DB"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model() -> Iterator[tuple[Model, str]]:
    behaviour = Model()
    with stub_model.StubServer(behaviour) as server:
        yield behaviour, server.url


@pytest.fixture
def hook() -> Iterator[Hook]:
    receiver = Hook()
    yield receiver
    receiver.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def drift_project(project):
    project.write("evals/drift.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    return project


def battery(project, url: str, *more: str) -> str:
    """One `assay run` against the stub; returns its run id."""
    done = project.assay("run", "--base-url", url, "--json", "r.json", *more)
    assert done.code in (0, 1), done.err
    return json.loads((project.root / "r.json").read_text())["run_id"]


def interrupted(project, run_id: str) -> None:
    """Store a sealed but interrupted copy of a run, newer than it (a battery stopped by ^C)."""
    from assay.store.database import open_store

    store = open_store(f"sqlite:///{project.root / '.assay' / 'assay.db'}")
    try:
        report = store.load_report(run_id)
        save_run(store, report.model_copy(update={
            "run_id": run_id + "-stopped", "interrupted": True,
            "started_at": "2999-01-01T00:00:00.000Z"}))
    finally:
        store.close()


def test_a_case_that_flips_under_the_same_model_is_drift(drift_project, model, hook,
                                                         closed_port):
    behaviour, url = model
    first = battery(drift_project, url)
    behaviour.answers["bye"] = "see you"  # the world moved: the same model answers otherwise
    second = battery(drift_project, url)

    done = drift_project.assay("drift", "demo/drift@1", "--json", "d.json",
                               "--notify", hook.url)
    assert done.code == 1, done.err
    assert done.err == ""
    assert "DRIFT" in done.out
    assert "flipped: farewell (public): pass → fail (regressed)" in done.out
    document = json.loads((drift_project.root / "d.json").read_text())
    assert document["schema"] == "assay.drift/1"
    assert document["status"] == "drift"
    assert document["suite"] == "demo/drift@1"
    assert document["target"]["uri"] == "openai:m"
    assert document["base"]["run_id"] == first and document["cand"]["run_id"] == second
    assert document["changed"] == []
    assert document["flipped"] == [{"case": "farewell", "split": "public", "base": "pass",
                                    "cand": "fail", "change": "regressed"}]
    assert hook.bodies() == [document]

    # A webhook that is down: said on stderr, the exit code is still drift's.
    down = f"http://127.0.0.1:{closed_port}/hook/SECRET-TOKEN"
    done = drift_project.assay("drift", "demo/drift@1", "--notify", down)
    assert done.code == 1
    assert done.err.startswith(f"assay: warning: could not notify http://127.0.0.1:{closed_port}")
    assert done.err.count("\n") == 1
    assert "SECRET-TOKEN" not in done.err  # a hook's path may be its secret
    assert "Traceback" not in done.err


def test_another_model_behind_the_same_alias_is_changed(drift_project, model):
    behaviour, url = model
    battery(drift_project, url)
    behaviour.version = "2025-06"  # a silent upgrade: same URI, same server, same digest
    battery(drift_project, url)

    done = drift_project.assay("drift", "demo/drift@1", "--json", "-")
    assert done.code == 1, done.err
    document = json.loads(done.out)
    assert document["status"] == "changed"
    assert document["flipped"] == []
    assert document["changed"] == [
        {"facet": "model", "base": "m-2025-01", "cand": "m-2025-06"},
        # The hidden case's pinned model moved too: named as a hidden case, nothing more.
        {"facet": "model", "base": None, "cand": None, "case": "holdout-1", "split": "hidden"},
    ]
    assert CANARY not in done.out

    done = drift_project.assay("drift", "demo/drift@1")
    assert done.code == 1
    assert "CHANGED" in done.out
    assert "changed: model: m-2025-01 → m-2025-06" in done.out
    assert CANARY not in done.out + done.err


def test_the_same_answers_from_the_same_model_are_stable(drift_project, model, hook):
    behaviour, url = model
    first = battery(drift_project, url)
    second = battery(drift_project, url)
    interrupted(drift_project, second)
    # A third battery of another agent version (another model alias) is newest: without
    # --target drift compares its batteries, and there is only one.
    battery(drift_project, url, "--target", "openai:other")

    done = drift_project.assay("drift", "demo/drift@1")
    assert done.code == 2
    assert done.err.startswith("assay: error: only one sealed battery of suite demo/drift@1")
    assert done.err.count("\n") == 1

    done = drift_project.assay("drift", "demo/drift@1", "--target", "openai:m",
                               "--notify", hook.url, "--json", "d.json")
    assert done.code == 0, done.err
    assert "STABLE" in done.out
    document = json.loads((drift_project.root / "d.json").read_text())
    assert (document["status"], document["changed"], document["flipped"]) == ("stable", [], [])
    # The interrupted run, newer than both, is no battery.
    assert (document["base"]["run_id"], document["cand"]["run_id"]) == (first, second)
    assert hook.bodies() == [document]  # stable is posted too: the heartbeat

    # A webhook that answers 500: said on stderr, without its path or credentials.
    hook.status = 500
    failing = hook.url.replace("http://", "http://user:PASSWORD@")
    done = drift_project.assay("drift", "demo/drift@1", "--target", "openai:m",
                               "--notify", failing)
    assert done.code == 0
    port = failing.split(":")[-1].split("/")[0]
    assert done.err == (f"assay: warning: could not notify http://127.0.0.1:{port}/…: "
                        "it answered HTTP 500\n")
    assert len(hook.received) == 2


def test_bad_input_is_one_line_and_exit_2(drift_project, model):
    _, url = model

    def refused(*args: str) -> str:
        done = drift_project.assay("drift", *args)
        assert done.code == 2, (args, done.out, done.err)
        assert done.err.startswith("assay: error: ") and done.err.count("\n") == 1, done.err
        assert "Traceback" not in done.err
        return done.err

    # Refused before anything: not even the store is made.
    assert "--notify" in refused("demo/drift@1", "--notify", "file:///etc/passwd")
    assert "--notify" in refused("demo/drift@1", "--notify", "not a url")
    assert not (drift_project.root / ".assay").exists()
    assert "not a suite id" in refused("drift-without-version")
    assert "no sealed battery of suite demo/drift@1" in refused("demo/drift@1")

    battery(drift_project, url)
    assert "only one sealed battery" in refused("demo/drift@1")
    assert "no sealed battery of suite demo/other@1" in refused("demo/other@1")
    assert "against openai:nobody" in refused("demo/drift@1", "--target", "openai:nobody")


def test_a_hidden_case_never_shows(drift_project, model, hook):
    behaviour, url = model
    battery(drift_project, url)
    # The hidden case flips (its expected text now in the answer) and is served another model.
    behaviour.answers[f"{CANARY}-input"] = f"{CANARY}-expected"
    behaviour.version = "2025-06"
    battery(drift_project, url)

    done = drift_project.assay("drift", "demo/drift@1", "--json", "d.json", "--notify", hook.url)
    assert done.code == 1, done.err
    written = (drift_project.root / "d.json").read_text()
    document = json.loads(written)
    assert document["status"] == "changed"
    assert {"case": "holdout-1", "split": "hidden", "base": "fail", "cand": "pass",
            "change": "fixed"} in document["flipped"]
    assert {"facet": "model", "base": None, "cand": None, "case": "holdout-1",
            "split": "hidden"} in document["changed"]
    assert "holdout-1" in done.out
    posted = [body for _, body in hook.received]
    assert len(posted) == 1
    for surface in (done.out, done.err, written, posted[0].decode()):
        assert CANARY not in surface

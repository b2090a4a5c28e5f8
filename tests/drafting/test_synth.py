"""`assay synth SUITE --model openai:MODEL --n K` through the real command line (SPEC §10).

The model is a small OpenAI-compatible server on loopback, written here: it
answers each chat completion with the next answer it was given and keeps
every request, so a test can read exactly what was sent — and check that no
hidden case (its id, input, expected value or fixture's tools) was in it.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from assay.suites import load_suite_file

from .conftest import Done, Project

CANARY = "CANARY-SYNTH-41f7"


class ModelServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers what it is told to.

    ``answers``: the texts (or ``(status, body)`` pairs) to answer with, in
    order; the last is repeated. ``bodies`` and ``headers``: every request's.
    """

    def __init__(self) -> None:
        self.answers: list[str | tuple[int, bytes]] = []
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                server.bodies.append(body)
                server.headers.append(dict(self.headers.items()))
                answer = server.answers[min(len(server.bodies), len(server.answers)) - 1]
                if isinstance(answer, tuple):
                    status, data = answer
                else:
                    status, data = 200, json.dumps({
                        "id": "c1", "object": "chat.completion", "created": 0,
                        "model": "drafter-2025",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer}}],
                        "usage": {"prompt_tokens": 900, "completion_tokens": 300},
                    }).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def prompts(self) -> list[str]:
        return [m["content"] for b in self.bodies for m in b["messages"]]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()


AGENT = """
def agent(input, tools):
    who = tools.call("crm.lookup", {"customer": input.get("customer")})
    if who and who.get("tier") == "gold":
        tools.call("erp.refund", {"order": input.get("order")})
        return "refunded"
    return "could not find you"
"""

SUITE = """
suite: demo/support@1
title: Refunds
target: python:synth_agent:agent
trials: 1
hidden: hidden/
cases:
  - id: refund-gold
    input: {customer: C-1, order: A-1}
    fixture: tools.yaml
    expect:
      - contains: refunded
      - calls: erp.refund
  - id: unknown-customer
    input: {customer: C-9, order: A-2}
    fixture: tools.yaml
    expect:
      - contains: could not find
      - never_calls: [erp.*]
"""

TOOLS = """
tools:
  - name: crm.lookup
    results:
      - when: {customer: C-1}
        result: {tier: gold}
      - result: {tier: none}
  - name: erp.refund
    result: {ok: true}
"""

# A hidden case, with a fixture only it uses: none of it may reach the model.
HIDDEN = f"""
id: {CANARY}-id
input: {{customer: {CANARY}-input}}
expected: {CANARY}-expected
fixture: ../secret_tools.yaml
expect: [{{contains: {CANARY}-contains}}]
"""

SECRET_TOOLS = f"""
tools:
  - name: {CANARY}.tool
    result: {{ok: true}}
"""


def draft(case_id: str, **more: Any) -> dict[str, Any]:
    return {"id": case_id, "input": {"customer": "C-1", "order": "B-7"}, "fixture": "tools.yaml",
            "expect": [{"contains": "refunded"}, {"calls": "crm.lookup"}], **more}


GOOD = json.dumps({"cases": [
    draft("refund-second-order"),
    {"id": "silver-customer", "input": {"customer": "C-5"}, "fixture": "tools.yaml",
     "tags": ["edge"], "expect": [{"contains": "could not find"}, {"never_calls": ["erp.*"]}]},
]})


@pytest.fixture
def suite(project: Project) -> Project:
    project.write("synth_agent.py", AGENT)
    project.write("evals/support.suite.yaml", SUITE)
    project.write("evals/tools.yaml", TOOLS)
    project.write("evals/hidden/case.yaml", HIDDEN)
    project.write("evals/secret_tools.yaml", SECRET_TOOLS)
    return project


def synth(project: Project, model: ModelServer, *more: str, n: str = "2") -> Done:
    return project.assay("synth", "evals/support.suite.yaml", "--model", "openai:drafter",
                         "--n", n, "--base-url", model.base_url, *more)


def header(text: str) -> dict[str, str]:
    """The ``# key: value`` lines of a drafts file's header."""
    found = {}
    for line in text.splitlines():
        if line.startswith("# ") and ": " in line:
            key, _, value = line[2:].partition(": ")
            found[key] = value
    return found


def test_good_drafts_become_a_synthetic_suite_beside_the_source(suite: Project,
                                                                 model: ModelServer) -> None:
    model.answers = [GOOD]
    done = synth(suite, model, "--seed", "7")
    assert done.code == 0, done.err
    out = suite.root / "evals" / "support.synth.yaml"
    assert "wrote 2 of 2 draft(s) to evals/support.synth.yaml" in done.err
    text = out.read_text()
    # The header records the model, the digest of the very prompt sent, and the seed.
    [prompt] = model.prompts
    fields = header(text)
    assert fields["model"] == "openai:drafter (answered as drafter-2025)"
    assert fields["prompt"] == "sha256:" + hashlib.sha256(prompt.encode()).hexdigest()
    assert fields["seed"] == "7" and model.bodies[0]["seed"] == 7
    assert model.bodies[0]["model"] == "drafter"
    # A suite file of its own, read back by the real loader: every case synthetic.
    loaded = load_suite_file(out)
    assert loaded.suite.id == "demo/support-synth@1"
    assert loaded.suite.target == "python:synth_agent:agent"
    assert [(c.id, c.synthetic) for c in loaded.suite.cases] == [
        ("refund-second-order", True), ("silver-customer", True)]
    assert loaded.suite.hidden is None and not loaded.suite.hidden_cases()
    # Not picked up by discovery: drafts run only when someone asks for them.
    listed = suite.assay("list", "evals")
    assert "support-synth" not in listed.out
    # Run on purpose, they are scored apart, and alone they never pass.
    ran = suite.assay("run", "evals/support.synth.yaml", "--json", "r.json")
    assert ran.code == 1, ran.err
    report = json.loads((suite.root / "r.json").read_text().splitlines()[0])
    assert report["scores"]["synthetic"] == 1.0 and report["scores"]["overall"] is None
    assert "no-observed-cases" in report["scores"]["flags"]


def test_the_prompt_holds_the_public_cases_and_nothing_hidden(suite: Project,
                                                              model: ModelServer) -> None:
    model.answers = [GOOD]
    done = synth(suite, model)
    assert done.code == 0, done.err
    [prompt] = model.prompts
    assert "refund-gold" in prompt and "unknown-customer" in prompt
    assert '"customer": "C-9"' in prompt and "crm.lookup" in prompt and "tools.yaml" in prompt
    assert "Write 2 new case(s)" in prompt
    assert CANARY not in json.dumps(model.bodies)
    assert "secret_tools" not in prompt
    # Nor does anything of it reach the file or the terminal.
    assert CANARY not in (suite.root / "evals" / "support.synth.yaml").read_text()
    assert CANARY not in done.out + done.err


def test_a_fresh_seed_is_drawn_and_recorded_when_none_is_given(suite: Project,
                                                               model: ModelServer) -> None:
    model.answers = [GOOD]
    done = synth(suite, model)
    assert done.code == 0, done.err
    seed = header((suite.root / "evals" / "support.synth.yaml").read_text())["seed"]
    assert int(seed) == model.bodies[0]["seed"]
    assert f"seed {seed}" in done.err


def test_an_invalid_draft_is_refused_by_number_and_the_rest_written(suite: Project,
                                                                  model: ModelServer) -> None:
    model.answers = [json.dumps({"cases": [
        draft("first-good"),
        draft("misspelt", expect=[{"containz": "refunded"}]),
        draft("refund-gold"),                        # the id of a public case
        draft("no-checks", expect=[]),
        "just a sentence",
        draft("last-good", synthetic=False),         # marked synthetic whatever it says
        draft("beyond-what-was-asked"),
    ]})]
    done = synth(suite, model, n="6")
    assert done.code == 0, done.err
    assert "draft 2 refused: unknown assertion 'containz' (did you mean 'contains'?)" in done.err
    assert "draft 3 refused: its id 'refund-gold' is taken" in done.err
    assert "draft 4 refused: its expect is empty" in done.err
    assert "draft 5 refused: a draft is an object with id, input and expect, not a string" \
        in done.err
    assert "the model gave 1 draft(s) more than asked" in done.err
    assert "wrote 2 of 6 draft(s)" in done.err
    out = suite.root / "evals" / "support.synth.yaml"
    loaded = load_suite_file(out)
    assert [(c.id, c.synthetic) for c in loaded.suite.cases] == [
        ("first-good", True), ("last-good", True)]
    assert header(out.read_text())["drafts"].startswith(
        "6 asked, 7 given, 2 written, 4 refused (draft 2: unknown assertion 'containz'")


@pytest.mark.parametrize(("answer", "says"), [
    ("Here are some cases you might like!", "the model's answer is not JSON (Expecting value"),
    ('{"cases": [{"id": "x"', "the model's answer is not JSON"),
    ("[NaN]", "the model's answer is not JSON (NaN is not a JSON number)"),
    ('{"drafts": []}', 'the model\'s answer is a JSON object without "cases"'),
    ('"cases"', "the model's answer is a string, not a list of cases"),
    ('{"cases": {"id": "x"}}', 'the model\'s answer gives "cases" as an object, not a list'),
    ("[]", "the model's answer holds no cases"),
    ('[1, ["two"], null]', "none of the 2 draft(s) is a valid case"),
])
def test_a_garbage_answer_writes_nothing(suite: Project, model: ModelServer, answer: str,
                                         says: str) -> None:
    model.answers = [answer]
    done = synth(suite, model)
    assert done.code == 2, done.err
    assert says in done.err and "nothing written" in done.err
    assert "Traceback" not in done.err
    assert not (suite.root / "evals" / "support.synth.yaml").exists()


def test_a_fenced_answer_is_read(suite: Project, model: ModelServer) -> None:
    model.answers = ["```json\n" + GOOD + "\n```"]
    done = synth(suite, model)
    assert done.code == 0, done.err


def test_an_existing_file_is_kept_unless_forced(suite: Project, model: ModelServer) -> None:
    model.answers = [GOOD]
    out = suite.write("evals/support.synth.yaml", "# mine\n")
    kept = synth(suite, model)
    assert kept.code == 2 and "exists already" in kept.err and "--force" in kept.err
    assert out.read_text() == "# mine\n" and model.bodies == []  # the model was not asked
    forced = synth(suite, model, "--force")
    assert forced.code == 0, forced.err
    assert load_suite_file(out).suite.id == "demo/support-synth@1"
    # A fixture resolves against the drafts file's own folder: the project root has no
    # tools.yaml, so drafts written there that name it would not load, and are refused.
    other = synth(suite, model, "--out", "elsewhere.yaml")
    assert other.code == 2, other.err
    assert "draft 1 refused: fixture 'tools.yaml' does not exist" in other.err
    assert not (suite.root / "elsewhere.yaml").exists()


def test_the_model_server_failing_is_the_harness_failing(suite: Project,
                                                         model: ModelServer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    refused = suite.assay("synth", "evals/support.suite.yaml", "--model", "openai:drafter",
                          "--n", "1", "--base-url", closed)
    assert refused.code == 3 and "could not ask openai:drafter: refused connection" \
        in refused.err
    model.answers = [(500, json.dumps({"error": f"{CANARY} in the prompt"}).encode())]
    erred = synth(suite, model)
    assert erred.code == 3 and "HTTP 500" in erred.err
    for done in (refused, erred):
        assert "Traceback" not in done.err
        assert not (suite.root / "evals" / "support.synth.yaml").exists()
    assert CANARY not in erred.err


def test_bad_usage_is_told_before_anything_is_asked(suite: Project, model: ModelServer) -> None:
    cases = [
        (("--model", "gpt-x", "--n", "1", "--base-url", model.base_url), "openai:MODEL"),
        (("--model", "openai:m", "--n", "1"), "give --base-url URL or set ASSAY_OPENAI_BASE_URL"),
        (("--model", "openai:m", "--n", "1", "--base-url", "ftp://x"), "not an http(s):// URL"),
        (("--model", "openai:m", "--base-url", model.base_url), "--n K is required"),
        (("--n", "1", "--base-url", model.base_url), "--model is required"),
    ]
    env = {"ASSAY_OPENAI_BASE_URL": ""}
    for args, says in cases:
        done = suite.assay("synth", "evals/support.suite.yaml", *args, env=env)
        assert done.code == 2 and says in done.err, (args, done.err)
    missing = suite.assay("synth", "evals/nope.suite.yaml", "--model", "openai:m", "--n", "1",
                          "--base-url", model.base_url)
    assert missing.code == 2 and "no such suite file" in missing.err
    by_id = suite.assay("synth", "demo/nope@1", "--model", "openai:m", "--n", "1",
                        "--base-url", model.base_url)
    assert by_id.code == 2 and "no suite demo/nope@1 under evals/" in by_id.err
    assert model.bodies == []


def test_a_suite_id_is_found_under_evals(suite: Project, model: ModelServer) -> None:
    model.answers = [GOOD]
    done = suite.assay("synth", "demo/support@1", "--model", "openai:drafter", "--n", "2",
                       "--base-url", model.base_url)
    assert done.code == 0, done.err
    assert yaml.safe_load((suite.root / "evals" / "support.synth.yaml").read_text())[
        "suite"] == "demo/support-synth@1"


def test_no_key_is_sent(suite: Project, model: ModelServer) -> None:
    model.answers = [GOOD]
    done = suite.assay("synth", "evals/support.suite.yaml", "--model", "openai:drafter", "--n",
                       "2", "--base-url", model.base_url,
                       env={"OPENAI_API_KEY": "sk-" + CANARY})
    assert done.code == 0, done.err
    assert model.headers[0]["Authorization"] == "Bearer unused"
    assert CANARY not in json.dumps([model.bodies, model.headers])


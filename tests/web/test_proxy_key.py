"""The real key an ``exec:`` agent's model calls went out with is on no page of the
workbench, no JSON twin, no download, no live event and not in its log (SPEC §15);
what the wire saw is shown, and the agent's hostile text stays text in Chromium.

The agent is a program that calls the scripted model (tests/model_server.py)
with the ``openai`` SDK through the recording proxy, and does what a hostile
one would: prints its whole environment (it holds only the stand-in key), prints
markup, asks for a model whose gateway refuses quoting the key it was sent, and
prints what it was told. The model's tool call arguments and its answer carry
markup too, seen on the wire. One run is made by ``assay run``, the other
started from the workbench (a live run); the workbench's process holds the real
key in its environment all along, as a user's shell would give it.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import HOSTILE, Project, Served, Watched
from .test_crawl import _crawl
from .test_live import events, start

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.targets.wire.proxy import KEY_CUT, STAND_IN_KEY  # noqa: E402
from model_server import REFUSING, SERVED, ModelServer  # noqa: E402

pytestmark = pytest.mark.real

#: The real key; ``SECRET`` is its middle, so that a key cut or masked at either end is
#: still found.
KEY = "sk-proj-WEBKEY-CANARY-3e9d51"
SECRET = "WEBKEY-CANARY"

PYTHON = shlex.quote(sys.executable)
TARGET = f"exec:{PYTHON} key_agent.py"
#: The second version: it shouts, so both cases flip.
TARGET_V2 = f"exec:{PYTHON} key_agent.py --v2"

#: Markup in a tool call's arguments, as the model sent them.
ARGUMENTS = {"order": HOSTILE, "note": '<b onmouseover="window.__pwned = 5">hover</b>'}

AGENT = '''
"""Calls its model with the openai SDK, and tries what a hostile program would."""
import json
import os
import sys

import openai
from openai import OpenAI

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look an order up.",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"},
                                                    "note": {"type": "string"}}}}}]

asked = json.load(sys.stdin)
# Everything it can see of its environment, and markup, on stderr (kept as its prints).
print("my environment:", json.dumps(dict(os.environ), sort_keys=True), file=sys.stderr)
print(json.loads(HOSTILE_JSON), file=sys.stderr)
client = OpenAI(max_retries=0)
told = None
if "REFUSED-FIRST" in asked:
    try:
        client.chat.completions.create(model=REFUSING_JSON,
                                       messages=[{"role": "user", "content": "hi"}])
    except openai.APIStatusError as error:
        told = str(error)
        print("the gateway told me:", told, file=sys.stderr)
messages = [{"role": "user", "content": asked}]
while True:
    reply = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
    message = reply.choices[0].message
    if not message.tool_calls:
        break
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": "ran " + call.function.name + " with "
                                    + call.function.arguments})
answer = message.content.upper() if "--v2" in sys.argv else message.content
print(json.dumps({"reply": answer, "my_key": os.environ.get("OPENAI_API_KEY"),
                  "told": told}))
'''.replace("HOSTILE_JSON", repr(json.dumps(HOSTILE))) \
    .replace("REFUSING_JSON", repr(REFUSING))


def _script(*turns: dict[str, Any]) -> str:
    return "SCRIPT:" + json.dumps(list(turns))


LOOKS_UP = "Where is A-1? " + _script({"call": "lookup", "args": ARGUMENTS},
                                      {"say": "A-1 has shipped. " + HOSTILE})
REFUSED = "REFUSED-FIRST, then answer. " + _script({"say": "ok"})

SUITE = f"""
suite: web/keyed@1
target: {TARGET}
cases:
  - id: looks-up
    input: {json.dumps(LOOKS_UP)}
    expect:
      - calls: {{tool: lookup}}
      - {{path: $.reply, contains: shipped}}
  - id: refused-first
    input: {json.dumps(REFUSED)}
    expect:
      - {{path: $.reply, equals: ok}}
"""


@dataclass
class Keyed:
    """Two sealed runs of ``web/keyed@1`` (the CLI's, the workbench's), served."""

    project: Project
    served: Served
    first: str
    second: str
    #: What the live run's event stream said, as read while it ran.
    live: list[tuple[str, Any]]

    def trial(self, run_id: str, case: int, n: int = 1) -> str:
        return f"/runs/{run_id}/cases/{case}/trials/{n}"


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, model: ModelServer) -> Iterator[Keyed]:
    project = Project(tmp_path_factory.mktemp("keyed"))
    project.write("evals/key_agent.py", AGENT)
    project.write("evals/keyed.suite.yaml", SUITE)
    env = {"OPENAI_BASE_URL": model.url + "/v1", "OPENAI_API_KEY": KEY}
    done = project.assay("run", "evals", "--json", "r.json", env=env, timeout=300)
    assert done.code == 0, done.out + done.err
    first = json.loads((project.root / "r.json").read_text())["run_id"]
    for case in ("looks-up", "refused-first"):
        added = project.assay("review", "--add", first, "--case", case, env=env)
        assert added.code == 0, added.err
    for uri in (TARGET, TARGET_V2):
        published = project.assay("agent", "publish", uri, "--dir", "evals",
                                  "--name", "keyed", env=env)
        assert published.code == 0, published.err
    served = Served(project.root, "evals", env=env)
    try:
        # The second version, run from the workbench: its child gets the real key too.
        second = start(served, "web/keyed@1", target=TARGET_V2)
        live = events(served, second)
        yield Keyed(project, served, first, second, live)
    finally:
        log = served.stop()
    assert SECRET not in log, "the workbench's log holds the real key"


@pytest.fixture(scope="module")
def crawled(keyed: Keyed) -> dict[str, tuple[int, str, str]]:
    seeds = ["/", "/runs", "/suites", "/compare", "/trends", "/review", "/ledger", "/agents",
             f"/compare?base={keyed.first}&cand={keyed.second}", "/trends?suite=web/keyed@1",
             "/review?show=all", "/agents/keyed"]
    for run_id in (keyed.first, keyed.second):  # a sealed run's stream and progress too
        seeds += [f"/api/runs/{run_id}/events", f"/api/runs/{run_id}/progress"]
    return _crawl(keyed.served, seeds)


def test_the_real_key_is_on_no_page_twin_download_or_live_event(
        keyed: Keyed, crawled: dict[str, tuple[int, str, str]], model: ModelServer) -> None:
    # The key was live: every call reached the model with it, through the proxy.
    assert len(model.requests) >= 8
    assert all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in model.requests)
    assert len(crawled) >= 40, sorted(crawled)
    for path, (status, _kind, body) in crawled.items():
        assert SECRET not in body, path
        assert status < 500, (path, status)
    reached = " ".join(crawled)
    for part in ("/runs/", "/trials/", "/api/runs/", "/trace.json", "/compare?", "/review/",
                 "/ledger", "/ledger/receipts/", "/trends", "/suites", "/agents/keyed",
                 "/agents/keyed/comparison?", "/events"):
        assert part in reached, part
    # The live run was watched to its end, and said nothing of the key either.
    assert [name for name, _data in keyed.live][-1] == "end"
    assert SECRET not in json.dumps(keyed.live)
    # Both runs are complete and sealed, and the second flipped both cases: the pages
    # crawled hold real runs, not empty ones.
    runs = {run["run_id"]: run for run in keyed.served.get("/api/runs").json()["runs"]}
    assert runs[keyed.first]["scores"]["passed"] is True
    assert runs[keyed.second]["counts"]["public"]["failed"] == 2


def test_the_trial_page_shows_what_the_wire_saw_and_what_the_agent_could_see(
        keyed: Keyed, crawled: dict[str, tuple[int, str, str]]) -> None:
    looks_up = keyed.served.get("/api" + keyed.trial(keyed.first, 1)).json()
    assert looks_up["case"]["label"] == "looks-up"
    trace = looks_up["trace"]
    assert trace["facets"]["model"] == SERVED  # a fact only the wire gave
    [call] = [e for e in trace["events"] if e["kind"] == "tool_call"]
    assert (call["name"], call["arguments"]) == ("lookup", ARGUMENTS)
    assert any(e["kind"] == "message" and HOSTILE in e["text"] for e in trace["events"])
    # What the agent held: the stand-in, in its environment and its output.
    assert trace["output"]["my_key"] == STAND_IN_KEY
    assert f'"OPENAI_API_KEY": "{STAND_IN_KEY}"' in trace["stdout"]
    html = crawled[keyed.trial(keyed.first, 1)][2]
    assert SERVED in html and '<code class="name">lookup</code>' in html
    assert STAND_IN_KEY in html and "my environment:" in html

    # The refused call is on the page as the http event it was, the gateway's message
    # shown with the key cut out of it — as the agent itself was told it.
    refused = keyed.served.get("/api" + keyed.trial(keyed.first, 2)).json()
    assert refused["case"]["label"] == "refused-first"
    [http] = [e for e in refused["trace"]["events"] if e["kind"] == "http"]
    assert http["result"]["status"] == 401 and http["is_error"] is True
    assert f"Incorrect API key provided: Bearer {KEY_CUT}" in http["text"]
    told = refused["trace"]["output"]["told"]
    assert told.endswith(f"Incorrect API key provided: Bearer {KEY_CUT}")
    html = crawled[keyed.trial(keyed.first, 2)][2]
    assert '<span class="kind">http</span>' in html and "Incorrect API key provided" in html


def test_every_page_renders_the_agents_markup_inert(
        keyed: Keyed, crawled: dict[str, tuple[int, str, str]], page: Watched) -> None:
    from playwright.sync_api import expect

    html = [p for p, (s, kind, _b) in crawled.items()
            if kind.startswith("text/html") and s == 200 and not p.startswith("/api/")]
    assert len(html) >= 15, html
    tab = page.page
    for path in html:
        tab.goto(keyed.served.url + path)
        tab.wait_for_load_state("load")
        assert SECRET not in tab.content(), path
        assert tab.evaluate("typeof window.htmx") == "object", path  # our script ran
        assert tab.evaluate("typeof window.__pwned") == "undefined", path
        assert page.clean(), (path, page.errors, page.violations)
    # The markup is there, as text: in the tool call the model made, its answer and the
    # agent's prints.
    tab.goto(keyed.served.url + keyed.trial(keyed.first, 1))
    expect(tab.locator("li.tool_call pre.arguments")).to_contain_text(
        '<b onmouseover=\\"window.__pwned = 5\\">hover</b>')
    expect(tab.locator("li.message pre.text")).to_contain_text(
        "<script>window.__pwned = 1</script>")
    expect(tab.locator("pre.stdout")).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    assert tab.evaluate("document.querySelectorAll('img, iframe, svg, [onerror], [onload], "
                        "[onmouseover]').length") == 0
    assert page.clean(), page.errors + page.violations

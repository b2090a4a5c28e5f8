"""A stored run of a suite of conversations (SPEC §16), for the tests of its surfaces.

The agent is the ``openai:`` loop against the scripted model of
examples/support/stub_model.py on loopback (a real OpenAI-compatible HTTP
server): the real ``assay run`` holds each conversation and stores it. The
suite has a public conversation that fails, with markup of every kind in what
the user says and what the agent replies (``HOSTILE``) and a tool call in
its first turn; one that passes; a single question; and a private hidden
conversation whose id, messages, replies and tool arguments carry
``CANARY``, which no surface may show.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from .cli.conftest import Project

STUB_FILE = Path(__file__).resolve().parents[1] / "examples" / "support" / "stub_model.py"

#: Upper and lower case both appear; a leak is found either way.
CANARY = "CANARY-TALK-5E1D"
#: What the agent answers first: script, an event handler, Rich markup, an escape sequence.
HOSTILE = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
           '[bold red]rich[/] \x1b[31mansi\x1b[0m {{ 7*7 }} </pre></li>')
#: What the user says first in the public conversation, markup too (YAML, double-quoted).
USER_FIRST = "Move booking ABC123 to Friday. <b>now</b> [blink]please[/blink] \x1b[7mloud"
USER_SECOND = "The 9am one, please."

SUITE = f"""
suite: web/talk@1
target: openai:m
hidden: hidden/
cases:
  - id: change-flight
    input: You are a booking agent.
    fixture: tools.yaml
    turns:
      - "{USER_FIRST.replace(chr(27), chr(92) + 'e')}"
      - "{USER_SECOND}"
    expect:
      - calls: {{tool: update_booking, args: {{booking: ABC123}}}}
      - {{turn: 2, contains: "10:00"}}
  - id: says-hello
    turns: ["Hello there"]
    expect: [{{contains: Hello}}]
  - id: single
    input: What is two and two?
    expect: [{{equals: "4"}}]
"""

HIDDEN = f"""
- id: {CANARY}-talk
  fixture: ../tools.yaml
  turns:
    - "{CANARY} first user message"
    - "{CANARY} second user message"
  expect:
    - {{turn: 2, contains: never-said}}
"""

TOOLS = """
tools:
  - name: update_booking
    parameters: {type: object, properties: {booking: {type: string}, day: {type: string}}}
    result: {ok: true}
"""


def stub() -> ModuleType:
    """examples/support/stub_model.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location("assay_talk_stub_model", STUB_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve() -> Any:
    """The scripted model on loopback (``.url``; ``.close()`` stops it)."""
    model = stub()
    return model.StubServer(model.by_prompt({
        USER_FIRST: [
            {"tool_calls": [{"name": "update_booking",
                             "arguments": {"booking": "ABC123", "day": "Friday"}}]},
            {"content": "Which one: 9am or 5pm? " + HOSTILE},
            {"content": "Booked: Friday, 9:00."}],
        "Hello there": [{"content": "Hello! How can I help?"}],
        "What is two and two?": [{"content": "4"}],
        f"{CANARY} first user message": [
            {"tool_calls": [{"name": "update_booking",
                             "arguments": {"booking": f"{CANARY}-booking"}}]},
            {"content": f"{CANARY} first reply"},
            {"content": f"{CANARY} second reply"}],
    }))


def write(project: Project) -> None:
    """The suite, its tools and its private hidden case, in ``project``."""
    project.write("evals/talk.suite.yaml", SUITE)
    project.write("evals/tools.yaml", TOOLS)
    project.write("evals/hidden/cases.yaml", HIDDEN)


def record(project: Project, base_url: str) -> dict[str, Any]:
    """One stored, sealed run with every report file; the report and every text shown.

    ``texts`` maps a surface (``stdout``, ``stderr``, ``r.json``, ``r.xml``,
    ``r.md``, ``show``, ``show --json``) to what it printed or wrote.
    """
    write(project)
    done = project.assay("run", "evals", "--json", "r.json", "--junit", "r.xml",
                         "--markdown", "r.md", "--base-url", base_url)
    assert done.code == 1, done.out + done.err
    report = json.loads((project.root / "r.json").read_text())
    shown = project.assay("show", report["run_id"])
    as_json = project.assay("show", report["run_id"], "--json")
    texts = {"stdout": done.out, "stderr": done.err, "show": shown.out + shown.err,
             "show --json": as_json.out + as_json.err}
    for name in ("r.json", "r.xml", "r.md"):
        texts[name] = (project.root / name).read_text()
    return {"report": report, "texts": texts, "project": project}

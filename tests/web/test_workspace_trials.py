"""What an agent left behind, on every surface (SPEC §14): shown for a public trial (the
change set, the diff, the command's output, the file read), in Chromium as text; and a
hidden case's paths, diff, file text and command output on none.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .conftest import HOSTILE, Project, Served, Watched
from .test_crawl import _crawl

pytestmark = pytest.mark.real

CANARY = "CANARY-WS-4B2E"

AGENT = '''
import json

def agent(prompt, tools):
    ws = tools.workspace
    if "hidden" in prompt:
        # Every kind of hidden content: a path, a file's text, a diff, a command's output.
        (ws / "CANARY_NAME.txt").write_text("CANARY_TEXT-created\\n")
        (ws / "notes.txt").write_text("CANARY_TEXT-diffed\\n")
        tools.call("log", {"line": "CANARY_TEXT-state"})
        return "ok"
    tools.call("log", {"line": "public-state-line"})
    (ws / "notes.txt").write_text("first line\\n" + json.loads(HOSTILE_JSON) + "\\n")
    (ws / "made.txt").write_text("made\\n")
    return "ok"
'''.replace("CANARY_NAME", CANARY + "-path").replace("CANARY_TEXT", CANARY) \
    .replace("HOSTILE_JSON", repr(json.dumps(HOSTILE)))

SUITE = """
suite: web/workspace@1
target: python:ws_agent:agent
workspace: ws
hidden: hidden/
cases:
  - id: edits
    input: public
    fixture: log.tools.yaml
    expect:
      - state: {path: $.lines, includes: public-state-line}
      - files: {unchanged: [notes.txt]}
      - file: made.txt
        equals: "made\\n"
      - command: "cat notes.txt"
        contains: never-there
"""

HIDDEN = f"""
- id: secret-one
  input: hidden please
  fixture: ../log.tools.yaml
  expect:
    - state: {{path: $.lines, equals: [{CANARY}-never]}}
    - files: {{unchanged: [notes.txt]}}
    - file: {CANARY}-path.txt
      equals: {CANARY}-expected
    - command: "cat *.txt; echo {CANARY}-cmd"
      exit_code: 7
"""


@pytest.fixture
def recorded(project: Project) -> dict[str, Any]:
    project.write("ws_agent.py", AGENT)
    project.write("evals/ws/notes.txt", "first line\nsecond line\n")
    project.write("evals/ws.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    project.write("evals/log_tools.py", """
        def log(arguments, state):
            state["lines"].append(arguments["line"])
            return len(state["lines"])
        """)
    project.write("evals/log.tools.yaml", """
        tools:
          - {name: log, handler: "log_tools:log"}
        state: {lines: []}
        """)
    done = project.assay("run", "evals", "--json", "r.json", "--junit", "r.xml",
                         "--markdown", "r.md", "--keep-workspaces", "kept")
    assert done.code == 1, done.out + done.err
    report = json.loads((project.root / "r.json").read_text())
    shown = project.assay("show", report["run_id"])
    as_json = project.assay("show", report["run_id"], "--json")
    texts = {"stdout": done.out, "stderr": done.err, "show": shown.out + shown.err,
             "show --json": as_json.out + as_json.err}
    for name in ("r.json", "r.xml", "r.md"):
        texts[name] = (project.root / name).read_text()
    for path in (project.root / "kept").rglob("*"):
        texts[str(path)] = path.read_text() if path.is_file() else ""
    return {"report": report, "texts": texts, "project": project}


def test_the_change_set_is_in_every_report_and_no_hidden_content_is(recorded) -> None:
    report, texts = recorded["report"], recorded["texts"]
    public = report["cases"][0]
    assert public["id"] == "edits" and public["outcome"] == "fail"
    changes = public["trials"][0]["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("made.txt", "created"),
                                                           ("notes.txt", "modified")]
    assert changes[0]["size"] == 5 and changes[0]["sha256"].startswith("sha256:")
    # The public trial's changes reach the terminal, JUnit and Markdown too.
    for name in ("stdout", "r.xml", "r.md", "show"):
        assert "created made.txt" in texts[name], name
    # The hidden case is a holdout with an outcome, and nothing of it is anywhere.
    assert report["cases"][1] == {"id": "holdout-1", "split": "hidden", "outcome": "fail"}
    for name, text in texts.items():
        assert CANARY not in text, name
    # Only the public trial's workspace was kept.
    kept = sorted(p.relative_to(recorded["project"].root / "kept").parts[1:]
                  for p in (recorded["project"].root / "kept").glob("*/*/*"))
    assert kept == [("edits", "1")]


def test_the_workbench_shows_the_diff_of_a_public_trial_and_nothing_of_a_hidden_one(
        recorded, page: Watched) -> None:
    project, run_id = recorded["project"], recorded["report"]["run_id"]
    served = Served(project.root, "evals")
    try:
        trial = served.get(f"/runs/{run_id}/cases/1/trials/1")
        assert trial.status_code == 200
        html = trial.text
        assert "Workspace" in html and "made.txt" in html and "created" in html
        assert re.search(r'<span class="add">\+first line|<span class="add">\+&lt;script&gt;',
                         html), html
        assert "&lt;script&gt;window.__pwned" in html  # the agent's markup stays text
        assert "cat notes.txt" in html  # the command and its output
        assert "Final state" in html and "public-state-line" in html
        api = served.get(f"/api/runs/{run_id}/cases/1/trials/1").json()
        assert "made.txt" in json.dumps(api)
        pages = _crawl(served, ["/", "/runs", f"/runs/{run_id}",
                                f"/runs/{run_id}/cases/2/trials/1"])
        assert len(pages) >= 8, sorted(pages)
        for path, (status, _kind, body) in pages.items():
            assert CANARY not in body, path
            assert status < 500, (path, status)

        tab = page.page
        tab.goto(served.url + f"/runs/{run_id}/cases/1/trials/1")
        tab.wait_for_load_state("load")
        added = tab.locator("pre.diff span.add")
        assert added.count() >= 2
        assert "<script>window.__pwned = 1</script>" in added.all_inner_texts()[-1]
        assert tab.evaluate("window.__pwned") is None  # shown, never run
        assert tab.locator("table.changes tr.created").count() == 1
        assert page.clean(), page.errors + page.violations
    finally:
        served.stop()

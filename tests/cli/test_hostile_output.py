"""Agent output is hostile input: the fuzz corpus through every surface of the real CLI.

An agent returns, prints, raises and calls tools with Rich markup, escape
sequences, control characters, lone surrogates, a megabyte and 2,000 levels
of nesting; a suite's ids, title and tags hold the same; a hidden case holds
it with a canary. `assay run` (store on) writes its three report files, and
`list`, `runs`, `show`, `replay` and `ledger verify` read it all back: each
exits with its usual code, prints no traceback and nothing raw, and the
canary appears nowhere.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ..fuzz_corpus import (
    HOSTILE_ENCODABLE,
    INVALID_UTF8,
    MARKUP,
    NAME,
    assert_inert,
    nested,
    python_source,
)

CANARY = "CANARY-c0ffee"


def _y(text: str) -> str:
    """A YAML double-quoted scalar holding ``text`` exactly (JSON's escapes are YAML's)."""
    return json.dumps(text)


ECHO_ID = "echo " + NAME
TAGS = ["[bold]tag[/bold]", "\x1b[31mred-tag", "[link=http://x]t"]

AGENT = python_source() + '''
from assay import AgentError

def agent(input, tools):
    kind = input["kind"]
    if kind == "echo":
        tools.call(HOSTILE, {"arg": HOSTILE, HOSTILE: [HOSTILE]})
        print(HOSTILE)
        return {"out": HOSTILE, "key " + HOSTILE: HOSTILE}
    if kind == "raise":
        raise ValueError(HOSTILE)
    if kind == "error":
        raise AgentError(HOSTILE)
    if kind == "raise_big":
        raise ValueError(MEGABYTE)
    if kind == "big":
        return {"out": MEGABYTE}
    if kind == "deep":
        return nested(2000)
    if kind == "deep_args":
        tools.call("deep", nested(2000))
        return "ok"
    if kind == "string":
        return HOSTILE
    if kind == "hidden":
        tools.call("lookup", {"q": input["secret"] + HOSTILE})
        print(input["secret"])
        return {"echo": input["secret"] + HOSTILE}
    if kind == "hidden_raise":
        raise ValueError(input["secret"] + HOSTILE)
    raise AssertionError(kind)
'''

SUITE = f"""
suite: fuzz/hostile@1
title: {_y("title " + HOSTILE_ENCODABLE)}
target: python:hostile_agent:agent
timeout_s: 60
hidden: hidden/
cases:
  - id: {_y(ECHO_ID)}
    tags: [{", ".join(_y(t) for t in TAGS)}]
    input: {{kind: echo}}
    expect:
      - {{path: $.out, equals: nope}}
      - never_calls: ["*"]
      - calls: {{tool: lookup, args: {{q: {_y(HOSTILE_ENCODABLE)}}}}}
  - id: "raise [/INST] [bold]"
    input: {{kind: raise}}
    expect: [{{path: $.out, equals: x}}]
  - id: "error [red]"
    input: {{kind: error}}
    expect: [status: ok]
  - id: raise-big
    input: {{kind: raise_big}}
    expect: [status: ok]
  - id: big
    input: {{kind: big}}
    expect: [{{path: $.out, contains: "[/INST]"}}]
  - id: deep
    input: {{kind: deep}}
    expect: [{{path: $.a.a.a, type: object}}, {{contains: leaf}}]
  - id: deep-args
    input: {{kind: deep_args}}
    expect: [{{calls: {{tool: deep, args: {{a: {{type: object}}}}}}}}]
  - id: string
    input: {{kind: string}}
    expect: [{{contains: "[/INST]"}}, {{contains: "\\ufffd"}}]
"""

HIDDEN = f"""
- id: {_y(CANARY + "-id [bold]x[/bold] " + NAME)}
  input: {{kind: hidden, secret: {CANARY}-input}}
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
- id: {CANARY}-raise
  input: {{kind: hidden_raise, secret: {CANARY}-raised}}
  expect: [{{path: $.echo, equals: x}}]
"""

PUBLIC_IDS = [ECHO_ID, "raise [/INST] [bold]", "error [red]", "raise-big", "big", "deep",
              "deep-args", "string"]
OUTCOMES = {ECHO_ID: "fail", "raise [/INST] [bold]": "broken", "error [red]": "fail",
            "raise-big": "broken", "big": "pass", "deep": "pass", "deep-args": "pass",
            "string": "pass"}


@pytest.fixture
def hostile(project: Any) -> Any:
    project.write("evals/hostile_agent.py", AGENT)
    project.write("evals/hostile.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    return project


def _clean(done: Any, what: str, code: int) -> None:
    """Exit code as usual, no traceback, nothing raw, no canary, on both streams."""
    assert done.code == code, f"{what}: exit {done.code}\n{done.err[-3000:]}"
    for name, text in (("stdout", done.out), ("stderr", done.err)):
        assert "Traceback" not in text, f"{what} {name}: {text[-3000:]}"
        assert_inert(text, f"{what} {name}")
        assert CANARY not in text, f"{what} {name} leaks the hidden case"


def _markdown_cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line)[1:-1]


def test_the_corpus_goes_through_every_surface(hostile: Any) -> None:
    listed = hostile.assay("list")
    _clean(listed, "list", 0)
    # Markup and emoji codes are shown as written, not acted on.
    for text in (MARKUP["inst"], "[bold]tag[/bold]", "[link=http://x]t", MARKUP["emoji"],
                 "title [/INST]"):
        assert text in listed.out, text
    assert "␛[31mred-tag" in listed.out  # an escape is shown as a picture, not obeyed

    done = hostile.assay("run", "--json", "r.json", "--junit", "r.xml", "--markdown", "r.md",
                         timeout=300)
    _clean(done, "run", 1)
    assert "[/INST] [bold]" in done.out and MARKUP["emoji"] in done.out

    # The report files: written, parsed back, each case once, content exact where it is data.
    files = {name: (hostile.root / name).read_text(encoding="utf-8")
             for name in ("r.json", "r.xml", "r.md")}
    for name, text in files.items():
        assert CANARY not in text, f"{name} leaks the hidden case"
    report = json.loads(files["r.json"])
    assert [c["id"] for c in report["cases"]] == [*PUBLIC_IDS, "holdout-1", "holdout-2"]
    assert {c["id"]: c["outcome"] for c in report["cases"] if c["split"] == "public"} \
        == OUTCOMES
    assert report["counts"]["hidden"]["total"] == 2
    assert report["seal"]["hash"].startswith("sha256:")
    raised = next(c for c in report["cases"] if c["id"] == "raise [/INST] [bold]")
    assert "[/INST]" in raised["reason"] and "\x1b[31m" in raised["reason"]
    # A megabyte of reason is kept whole in the report, cut on the terminal.
    big = next(c for c in report["cases"] if c["id"] == "raise-big")
    assert len(big["reason"]) > 1_000_000
    assert len(done.out) < 100_000

    xml = ET.fromstring(files["r.xml"].encode("utf-8"))
    names = [case.get("name") or "" for case in xml.iter("testcase")]
    assert len(names) == len(PUBLIC_IDS) + 2
    assert names[1] == "raise [/INST] [bold]" and names[-2:] == ["holdout-1", "holdout-2"]
    assert_inert(files["r.xml"], "r.xml")

    markdown = files["r.md"]
    assert_inert(markdown, "r.md")
    # No HTML, image or link survives unescaped (CommonMark reads "\<" as a plain "<").
    assert re.search(r"(?<!\\)[<>]|(?<!\\)!(?<!\\)\[", markdown) is None
    assert "\\<script\\>" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    case_rows = rows[rows.index("| case | split | outcome | pass@1 | pass^k | why |") + 1:]
    assert len(case_rows) == len(PUBLIC_IDS) + 2
    for row in case_rows:
        assert len(_markdown_cells(row)) == 6, row

    run_id = report["run_id"]
    runs = hostile.assay("runs")
    _clean(runs, "runs", 0)
    assert run_id in runs.out
    shown = hostile.assay("show", run_id)
    _clean(shown, "show", 0)
    assert "raise [/INST] [bold]" in shown.out
    as_json = hostile.assay("show", run_id, "--json")
    _clean(as_json, "show --json", 0)
    assert [c["id"] for c in json.loads(as_json.out)["cases"]] == [
        *PUBLIC_IDS, "holdout-1", "holdout-2"]
    replayed = hostile.assay("replay", run_id)
    _clean(replayed, "replay", 0)
    assert "all match" in replayed.out
    verified = hostile.assay("ledger", "verify")
    _clean(verified, "ledger verify", 0)


@pytest.mark.parametrize(("case_id", "why"), [
    ("esc \x1b[31m", "no control characters"),
    ("nul \x00", "no control characters"),
    ("x" * 201, "at most 200 characters"),
])
def test_a_case_id_that_no_store_or_surface_can_hold_is_refused_at_load(
        project: Any, case_id: str, why: str) -> None:
    project.write("evals/a.py", "def agent(input):\n    return input\n")
    project.write("evals/ids.suite.yaml", f"""
        suite: fuzz/ids@1
        target: python:a:agent
        cases:
          - {{id: fine, input: x, expect: [status: ok]}}
          - id: {_y(case_id)}
            input: x
            expect: [status: ok]
        """)
    for command in ("list", "run"):
        done = project.assay(command)
        _clean(done, command, 2)
        assert "ids.suite.yaml:5:" in done.err and why in done.err


def test_a_harness_failure_quoting_hostile_text_is_shown_inert(project: Any) -> None:
    project.write("evals/broken_agent.py",
                  python_source() + "raise ImportError(HOSTILE)\n")
    project.write("evals/broken.suite.yaml", """
        suite: fuzz/broken@1
        target: python:broken_agent:agent
        cases:
          - {id: one, input: x, expect: [status: ok]}
        """)
    done = project.assay("run", "--json", "r.json")
    _clean(done, "run", 3)
    assert "harness failure" in done.err and "[/INST]" in done.err


CALM_AGENT = """
def agent(input):
    return {"out": input}
"""

CALM_SUITE = """
suite: calm/echo@1
target: python:calm_agent:agent
cases:
  - {id: big, input: hello, expect: [{path: $.out, equals: hello}]}
  - {id: other, input: x, expect: [{path: $.out, equals: y}]}
"""


@pytest.fixture
def calm(project: Any) -> Any:
    project.write("evals/calm_agent.py", CALM_AGENT)
    project.write("evals/calm.suite.yaml", CALM_SUITE)
    return project


def test_report_files_are_written_before_the_terminal_and_survive_its_failure(
        calm: Any) -> None:
    """A terminal that cannot be written (a full disk) loses neither the files nor the run."""
    with open("/dev/full", "w") as full:  # noqa: PTH123 - a device, not a file we own
        done = subprocess.run(
            [sys.executable, "-m", "assay", "run", "--json", "r.json", "--junit", "r.xml",
             "--markdown", "r.md"], cwd=calm.root, stdout=full, stderr=subprocess.PIPE,
            text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "report failure" in done.stderr and "terminal report" in done.stderr
    assert "Traceback" not in done.stderr
    assert_inert(done.stderr, "stderr")
    report = json.loads((calm.root / "r.json").read_text(encoding="utf-8"))
    ET.parse(calm.root / "r.xml")
    assert "# assay results" in (calm.root / "r.md").read_text(encoding="utf-8")
    listed = calm.assay("runs", "--json")
    assert [(r["run_id"], r["status"]) for r in json.loads(listed.out)] == [
        (report["run_id"], "sealed")]


def test_a_report_file_that_cannot_be_written_loses_no_other_report(calm: Any) -> None:
    (calm.root / "taken").write_text("a file where a folder should be")
    done = calm.assay("run", "--json", "taken/r.json", "--junit", "r.xml", "--markdown", "r.md")
    _clean(done, "run", 3)
    assert "report failure: --json taken/r.json" in done.err
    ET.parse(calm.root / "r.xml")
    assert "| big | public | pass |" in (calm.root / "r.md").read_text(encoding="utf-8")
    assert "calm/echo@1" in done.out  # the terminal report still printed
    runs = json.loads(calm.assay("runs", "--json").out)
    assert [r["status"] for r in runs] == ["sealed"]


#: 2,000 levels of JSON, as text (the stdlib cannot write it).
DEEP_JSON = b'{"a":' * 2000 + b'"leaf"' + b"}" * 2000


class _Replies(BaseHTTPRequestHandler):
    """An HTTP agent answering with broken encodings, surrogate escapes and deep nesting."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        kind = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["kind"]
        status, body = {
            "bad-utf8": (200, INVALID_UTF8),
            "bad-utf8-error": (500, INVALID_UTF8),
            "surrogates": (200, b'{"out": "\\ud800 \\u001b[31m [bold]x[/] \\udfff"}'),
            "deep": (200, DEEP_JSON),
        }[kind]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def http_agent() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Replies)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/agent"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_an_http_agent_sending_invalid_utf8_and_surrogates(project: Any, http_agent: str) -> None:
    project.write("evals/http.suite.yaml", """
        suite: fuzz/http@1
        cases:
          - {id: bad-utf8, input: {kind: bad-utf8}, expect: [status: ok]}
          - {id: bad-utf8-error, input: {kind: bad-utf8-error}, expect: [status: ok]}
          - {id: surrogates, input: {kind: surrogates}, expect: [{path: $.out, contains: "[bold]"}]}
          - {id: deep, input: {kind: deep}, expect: [status: ok, contains: leaf]}
        """)
    done = project.assay("run", "--target", http_agent, "--json", "r.json", "--junit", "r.xml",
                         "--markdown", "r.md")
    _clean(done, "run", 1)
    report = json.loads((project.root / "r.json").read_text(encoding="utf-8"))
    outcomes = {c["id"]: (c["outcome"], c.get("reason") or "") for c in report["cases"]}
    assert outcomes["bad-utf8"][0] == "broken" and "not JSON" in outcomes["bad-utf8"][1]
    assert outcomes["bad-utf8-error"][0] == "fail"  # an error reply, its text decoded
    assert outcomes["surrogates"][0] == "pass"      # stored, graded, the surrogates replaced
    assert outcomes["deep"][0] == "pass"            # too deep to parse: kept whole, as text
    ET.parse(project.root / "r.xml")
    replayed = project.assay("replay", report["run_id"])
    _clean(replayed, "replay", 0)
    _clean(project.assay("ledger", "verify"), "ledger verify", 0)


def test_the_corpus_module_is_what_the_agents_hold() -> None:
    """The generated agent source carries the corpus exactly (surrogates included)."""
    space: dict[str, Any] = {}
    exec(python_source(), space)  # noqa: S102 - our own generated source
    from ..fuzz_corpus import HOSTILE, MEGABYTE

    assert space["HOSTILE"] == HOSTILE and space["MEGABYTE"] == MEGABYTE
    assert space["nested"](3) == nested(3)
    assert Path(__file__).name.startswith("test_")

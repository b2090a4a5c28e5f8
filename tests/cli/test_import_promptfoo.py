"""``assay import promptfoo``: a config in promptfoo's documented format becomes a suite."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from .conftest import Project

ROOT = Path(__file__).resolve().parents[2]


def _stub() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "assay_import_stub_model", ROOT / "examples" / "support" / "stub_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The documented shape: prompts (inline and file://), providers, tests with vars and
# assert, defaultTest, evaluateOptions.repeat; some assertions assay has no check for.
CONFIG = """\
description: Translate greetings
prompts:
  - 'Translate to {{language}}: {{ text }}'
  - file://polite.txt
providers:
  - openai:chat:gpt-4o-mini
  - anthropic:messages:claude-sonnet-4-5
defaultTest:
  assert:
    - type: not-contains
      value: error
tests:
  - description: French
    vars: {language: French, text: Hello world}
    assert:
      - type: icontains
        value: bonjour
      - type: contains-any
        value: [monde, Monde]
      - type: javascript
        value: output.length < 100
  - vars: {language: German, text: Good night}
    assert:
      - type: starts-with
        value: Gute
      - type: cost
        threshold: 0.01
      - type: latency
        threshold: 5000
evaluateOptions:
  repeat: 2
"""


def reply(body: dict[str, Any]) -> dict[str, Any]:
    [asked] = [m["content"] for m in body["messages"] if m.get("role") == "user"]
    if "French" in asked:
        return {"content": "Bonjour le monde", "usage": [12, 4]}
    return {"content": "Gute Nacht", "usage": [12, 3]}


def test_a_config_becomes_a_suite_that_runs_and_names_what_it_did_not_map(
        project: Project) -> None:
    project.write("promptfooconfig.yaml", CONFIG)
    project.write("polite.txt", "Please translate into {{language}}: {{text}}\n")
    done = project.assay("import", "promptfoo", "promptfooconfig.yaml")
    assert done.code == 0, done.err
    path = project.root / "evals" / "translate-greetings.suite.yaml"
    assert "wrote evals/translate-greetings.suite.yaml: 4 case(s)" in done.out.replace(
        str(project.root) + "/", "")
    for missing in ("test 1: assertion javascript ('output.length < 100')",
                    "test 2: assertion latency",
                    "provider anthropic:messages:claude-sonnet-4-5"):
        assert f"not mapped: {missing}" in done.out
        assert missing in path.read_text()  # and in the suite's header
    suite = yaml.safe_load(path.read_text())
    assert suite["suite"] == "imported/translate-greetings@1"
    assert (suite["target"], suite["trials"]) == ("openai:gpt-4o-mini", 2)
    first = suite["cases"][0]
    assert first["id"] == "test-1-prompt-1"
    assert first["input"] == "Translate to French: Hello world"
    assert first["expect"] == [{"not_contains": "error"}, {"icontains": "bonjour"},
                               {"regex": "monde|Monde"}]
    assert suite["cases"][1]["input"] == "Please translate into French: Hello world\n"
    assert suite["cases"][2]["expect"] == [
        {"not_contains": "error"}, {"regex": "^Gute"},
        {"costs_at_most": {"usd": 0.01}, "min_evidence": "inferred"}]
    # The suite runs as written against an OpenAI-compatible server.
    server = _stub().StubServer(reply)
    try:
        ran = project.assay("run", "evals", "--base-url", server.url, "--json", "r.json")
    finally:
        server.close()
    report = json.loads((project.root / "r.json").read_text())
    outcomes = {case["id"]: case["outcome"] for case in report["cases"]}
    # gpt-4o-mini is priced, so the cost check decides; every case passes.
    assert outcomes == dict.fromkeys(
        ["test-1-prompt-1", "test-1-prompt-2", "test-2-prompt-1", "test-2-prompt-2"],
        "pass"), ran.out
    assert ran.code == 0


def test_a_broken_config_names_the_file_and_line_and_exits_2(project: Project) -> None:
    project.write("bad.yaml", "prompts:\n  - 'x'\ntests:\n  - vars: {a: [1, 2}\n")
    done = project.assay("import", "promptfoo", "bad.yaml")
    assert done.code == 2 and "Traceback" not in done.err
    assert "bad.yaml:4" in done.err and "not a promptfoo config" in done.err
    project.write("none.yaml", "prompts: ['x']\n")
    done = project.assay("import", "promptfoo", "none.yaml")
    assert done.code == 2 and "missing required key 'tests'" in done.err
    project.write("files.yaml", "prompts: ['x']\ntests: file://cases.csv\n")
    done = project.assay("import", "promptfoo", "files.yaml")
    assert done.code == 2 and "files.yaml:2" in done.err and "not imported" in done.err
    assert not (project.root / "evals").exists()
    project.write("ok.yaml", "description: again\nprompts: ['x']\ntests:\n  - vars: {}\n")
    assert project.assay("import", "promptfoo", "ok.yaml").code == 0
    again = project.assay("import", "promptfoo", "ok.yaml")
    assert again.code == 2 and "exists already" in again.err

"""Hidden cases never leak: canaries in a hidden case's input, expected values,
the agent's output, its exceptions and its prints appear on no surface
(stdout, stderr, JSON, JUnit, Markdown), while the hidden outcomes are counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CANARY = "CANARY-7f3a"

AGENT = """
import asyncio

def agent(input):
    text = str(input)
    print("agent saw", text)                  # a print carrying the canary
    if "explode" in text:
        raise ValueError("cannot handle " + text)   # an exception carrying it
    if "garbage" in text:
        return object()                        # garbage output
    if "hang" in text:
        import threading
        threading.Event().wait(30)
    return {"echo": text}                      # output carrying it
"""

SUITE = """
suite: leak/canary@1
target: python:leaky_agent:agent
trials: 2
timeout_s: 2
hidden: hidden/
cases:
  - id: public-one
    input: PUBLIC-MARK
    expect: [{path: $.echo, equals: PUBLIC-MARK}]
"""

HIDDEN = f"""
- id: {CANARY}-id-pass
  input: {CANARY}-input-pass
  expect: [{{path: $.echo, contains: pass}}]
- id: {CANARY}-id-fail
  input: {CANARY}-input-fail
  expect:
    - {{path: $.echo, equals: {CANARY}-expected}}
    - {{path: $.echo, regex: "{CANARY}-regex"}}
- id: {CANARY}-id-explode
  input: {CANARY}-explode
  expect: [{{path: $.echo, equals: x}}]
- id: {CANARY}-id-garbage
  input: {CANARY}-garbage
  expect: [{{equals: {CANARY}-never}}]
"""

PRIVATE = f"""
id: {CANARY}-private-hang
input: {CANARY}-hang
expect: [{{path: $.echo, equals: {CANARY}-private-expected}}]
"""


@pytest.fixture
def leak_project(project):
    project.write("evals/leaky_agent.py", AGENT)
    project.write("evals/leak.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    return project


def surfaces(project, done) -> dict[str, str]:
    found = {"stdout": done.out, "stderr": done.err}
    for name in ("r.json", "r.xml", "r.md"):
        path = Path(project.root / name)
        found[name] = path.read_text() if path.exists() else ""
    return found


def test_canaries_reach_no_surface(leak_project):
    done = leak_project.assay("run", "--json", "r.json", "--junit", "r.xml", "--markdown", "r.md")
    assert done.code == 1
    seen = surfaces(leak_project, done)
    for name, text in seen.items():
        assert CANARY not in text, f"hidden content leaked into {name}"
    # Not vacuous: the run happened, public content shows, hidden outcomes are counted.
    report = json.loads(seen["r.json"])
    assert "public-one" in seen["r.json"] and "public-one" in seen["stdout"]
    assert report["counts"]["hidden"] == {"total": 4, "passed": 1, "failed": 1,
                                          "inconclusive": 0, "broken": 2}
    assert [c["id"] for c in report["cases"] if c["split"] == "hidden"] == [
        "holdout-1", "holdout-2", "holdout-3", "holdout-4"]
    assert "holdout-2" in seen["stdout"] and "holdout-2" in seen["r.xml"]
    assert report["suite"]["hidden_set"].startswith("sha256:")


def test_private_hidden_dir_replaces_samples_without_leaking(leak_project, tmp_path):
    private = tmp_path / "private"
    case_dir = private / "leak" / "canary@1"
    case_dir.mkdir(parents=True)
    (case_dir / "one.yaml").write_text(PRIVATE)
    done = leak_project.assay("run", "--hidden-dir", str(private), "--json", "r.json",
                              "--junit", "r.xml", "--markdown", "r.md")
    assert done.code == 1
    for name, text in surfaces(leak_project, done).items():
        assert CANARY not in text, f"hidden content leaked into {name}"
    report = json.loads((leak_project.root / "r.json").read_text())
    assert report["suite"]["hidden_source"] == "private"
    assert report["counts"]["hidden"]["total"] == 1
    assert report["counts"]["hidden"]["broken"] == 1  # the hanging one timed out
    samples = leak_project.assay("run", "--json", "s.json")
    sample_report = json.loads((leak_project.root / "s.json").read_text())
    assert sample_report["suite"]["hidden_source"] == "samples"
    assert sample_report["suite"]["hidden_set"] != report["suite"]["hidden_set"]
    assert sample_report["suite"]["digest"] == report["suite"]["digest"]
    assert CANARY not in samples.out + samples.err
    assert "has no folder" not in done.err + samples.err  # used, or not asked for: no note


def test_a_hidden_dir_without_the_suites_folder_says_so_and_leaks_nothing(
        leak_project, tmp_path):
    # The private root holds another version of the suite, not this one: a wrong
    # version or a typo must not pass silently as "the private set ran".
    private = tmp_path / "private"
    (private / "leak" / "canary@2").mkdir(parents=True)
    (private / "leak" / "canary@2" / "one.yaml").write_text(PRIVATE)
    looked_for = private / "leak" / "canary@1"
    done = leak_project.assay("run", "--hidden-dir", str(private), "--json", "r.json",
                              "--junit", "r.xml", "--markdown", "r.md")
    assert done.code == 1
    note = (f"assay: note: --hidden-dir has no folder {looked_for} for suite leak/canary@1; "
            f"using its sample hidden cases (evals/hidden) instead")
    assert note in done.err
    assert "has no folder" not in done.out  # stderr only: stdout stays the report
    for name, text in surfaces(leak_project, done).items():
        assert CANARY not in text, f"hidden content leaked into {name}"
    report = json.loads((leak_project.root / "r.json").read_text())
    assert report["suite"]["hidden_source"] == "samples"
    listed = leak_project.assay("list", "--hidden-dir", str(private))
    assert listed.code == 0 and note in listed.err and CANARY not in listed.out + listed.err
    by_env = leak_project.assay("list", env={"ASSAY_HIDDEN_DIR": str(private)})
    assert note in by_env.err


def test_a_hidden_dir_that_does_not_exist_is_refused(leak_project):
    # A typo must not silently run the public samples in place of the private set.
    done = leak_project.assay("run", "--hidden-dir", "no/such/private")
    assert done.code == 2
    assert "no/such/private" in done.err and "does not exist" in done.err


@pytest.mark.parametrize("bad", [
    f"id: {CANARY}-a\ninput: x\nexpect: [{{{CANARY}_check: 1}}]\n",
    f"id: {CANARY}-a\ninput: x\nexpect: [{{min_rows: {CANARY}}}]\n",
    f"id: {CANARY}-a\ninput: x\ntrials: {CANARY}\n",
    f"id: {CANARY}-a\ninput: [{CANARY}\n",
    f"id: public-one\ninput: {CANARY}\n",
    f"id: {CANARY}-a\ninput: x\nexpect: [{{path: '$.[{CANARY}', equals: 1}}]\n",
    f"id: {CANARY}-a\ninput: x\n{CANARY}: 1\n",
])
def test_a_bad_hidden_file_is_refused_without_quoting_it(leak_project, bad):
    leak_project.write("evals/hidden/bad.yaml", bad)
    done = leak_project.assay("run")
    assert done.code == 2
    assert "evals/hidden/bad.yaml:" in done.err
    assert CANARY not in done.out + done.err
    assert "Traceback" not in done.err

"""`assay run --agent-cache` end to end: the real command against an OpenAI-compatible
server on loopback that counts the calls it is sent (examples/support/stub_model.py,
imported by path as tests/targets/test_openai.py does); then compare and drift on what
it stored. Nothing of assay is patched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
CANARY = "CANARY-a9d3"

SUITE = """
suite: demo/cached@1
target: openai:m
trials: 2
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
  expect: [{{contains: {CANARY}-expected}}]
"""

AGENT = """
def agent(text):
    return "hi"
"""


def _load_stub() -> ModuleType:
    path = ROOT / "examples" / "support" / "stub_model.py"
    spec = importlib.util.spec_from_file_location("assay_example_stub_model_cli_cache", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stub_model = _load_stub()


def answer(body: dict[str, Any]) -> dict[str, Any]:
    text = stub_model.first_user_text(body)
    said = {"hello": "hi there", "bye": "goodbye"}.get(text, f"{CANARY}-said")
    return {"content": said, "model": f"{body['model']}-2025-01", "usage": [10, 3]}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own server, prices, key, store or cache must not leak into these tests."""
    for name in ("ASSAY_OPENAI_BASE_URL", "ASSAY_PRICES", "OPENAI_API_KEY", "ASSAY_DB",
                 "ASSAY_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[Any]:
    with stub_model.StubServer(answer) as running:
        yield running


@pytest.fixture
def cached_project(project):
    project.write("evals/cached.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    project.write("agent_ok.py", AGENT)
    return project


def run(project, url: str, *more: str, report: str = "r.json") -> tuple[Any, dict[str, Any]]:
    done = project.assay("run", "--base-url", url, "--json", report, *more)
    assert done.code in (0, 1), done.err
    assert CANARY not in done.out + done.err
    return done, json.loads((project.root / report).read_text())


def outcomes(report: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(c["id"], c["outcome"], [t["outcome"] for t in c.get("trials", [])])
            for c in report["cases"]]


def kept(root: Path) -> list[tuple[str, bytes]]:
    """The entries on disk, from the logs' lines (not through a cache): (key, value).

    Past a segment's last newline is a line cut short, not an entry.
    """
    entries = []
    for path in sorted(root.glob("*.log")):
        for line in path.read_bytes().split(b"\n")[:-1]:
            entries.append((line[:64].decode("ascii"), line[65:]))
    return entries


def test_a_second_run_with_the_cache_makes_no_call(cached_project, server) -> None:
    first_done, first = run(cached_project, server.url, "--agent-cache")
    assert len(server.seen) == 6  # three cases, two trials each: one call per trial
    cache = cached_project.root / ".assay" / "cache" / "agent"
    entries = kept(cache)
    assert len(entries) == 6  # trials 1 and 2 asked the same thing, and are kept apart
    assert len({key for key, _ in entries}) == 6
    assert "--agent-cache: model calls are served from .assay/cache/agent" in first_done.err

    second_done, second = run(cached_project, server.url, "--agent-cache", report="r2.json")
    assert len(server.seen) == 6  # not one call more
    assert outcomes(second) == outcomes(first)
    assert first["scores"] == second["scores"]
    # Marked, so that it is never read as fresh calls: a facet and a flag.
    for report in (first, second):
        assert report["target"]["facets"]["agent_cache"] == "on"
        assert "agent-cache" in report["scores"]["flags"]
    assert "agent-cache" in second_done.out  # the flags line on the terminal
    # The usage is the recorded calls': the agent's cost, not spent again (trace: inferred).
    assert second["cost"]["input_tokens"] == first["cost"]["input_tokens"] == 60
    assert len(kept(cache)) == 6  # nothing kept again: every call was served
    # The kept entries hold the hidden case (they are the agent's answers to it): only there.
    assert any(CANARY.encode() in value for _, value in entries)


def test_without_the_flag_nothing_is_kept(cached_project, server) -> None:
    _, report = run(cached_project, server.url)
    assert len(server.seen) == 6
    assert not (cached_project.root / ".assay" / "cache" / "agent").exists()
    assert "agent_cache" not in report["target"]["facets"]
    assert "agent-cache" not in report["scores"]["flags"]


def test_the_folder_is_assay_cache_dir(cached_project, server, tmp_path: Path) -> None:
    elsewhere = tmp_path / "kept-elsewhere"
    done = cached_project.assay("run", "--base-url", server.url, "--agent-cache",
                                env={"ASSAY_CACHE_DIR": str(elsewhere)})
    assert done.code in (0, 1), done.err
    assert len(kept(elsewhere / "agent")) == 6
    assert not (cached_project.root / ".assay" / "cache" / "agent").exists()


def test_a_cached_run_is_not_compared_with_a_fresh_one(cached_project, server) -> None:
    run(cached_project, server.url, "--agent-cache")
    _, cached = run(cached_project, server.url, "--agent-cache", report="cached.json")
    _, fresh = run(cached_project, server.url)
    _, fresh_again = run(cached_project, server.url)

    done = cached_project.assay("compare", cached["run_id"], fresh["run_id"], "--json", "-")
    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert document["verdict"] == "non-comparable"
    assert {r["alignment"] for r in document["rows"]} == {"non-comparable"}
    assert all(r["differs"] == ["agent_cache"] for r in document["rows"])
    assert CANARY not in done.out

    # A report file against a stored run: the holdout is held apart just the same.
    done = cached_project.assay("compare", "cached.json", fresh["run_id"], "--json", "-")
    document = json.loads(done.out)
    assert document["verdict"] == "non-comparable"
    assert [(r["case"], r["differs"]) for r in document["rows"]] == [
        ("greet", ["agent_cache"]), ("farewell", ["agent_cache"]),
        ("holdout-1", ["agent_cache"])]

    # Two fresh runs still align (the facet's default is what they did).
    done = cached_project.assay("compare", fresh["run_id"], fresh_again["run_id"], "--json", "-")
    assert {r["alignment"] for r in json.loads(done.out)["rows"]} == {"aligned"}

    # Drift of the newest two batteries: a cached one after a fresh one is a change.
    run(cached_project, server.url, "--agent-cache")
    done = cached_project.assay("drift", "demo/cached@1", "--json", "-")
    document = json.loads(done.out)
    assert document["status"] == "changed"
    assert document["changed"] == [{"facet": "agent_cache", "base": "off", "cand": "on"}]


def test_refused_when_no_target_can_use_it(cached_project, server) -> None:
    done = cached_project.assay("run", "--agent-cache", "--target", "python:agent_ok:agent")
    assert done.code == 2
    assert "--agent-cache keeps the model calls assay makes for openai:MODEL targets" in done.err
    assert "Traceback" not in done.err
    assert not (cached_project.root / ".assay" / "cache" / "agent").exists()


def test_with_other_targets_only_openai_is_cached(cached_project, server) -> None:
    done = cached_project.assay("run", "--base-url", server.url, "--agent-cache",
                                "--target", "openai:m", "--target", "python:agent_ok:agent",
                                "--json", "r.json")
    assert done.code in (0, 1), done.err
    assert "--agent-cache: python:agent_ok:agent makes no model calls through assay; " \
           "it runs uncached" in done.err
    reports = [json.loads(line) for line in
               (cached_project.root / "r.json").read_text().splitlines()]
    facets = {r["target"]["uri"]: r["target"]["facets"] for r in reports}
    assert facets["openai:m"]["agent_cache"] == "on"
    assert "agent_cache" not in facets["python:agent_ok:agent"]
    assert len(kept(cached_project.root / ".assay" / "cache" / "agent")) == 6


def test_refused_with_a_window(cached_project, server) -> None:
    done = cached_project.assay("run", "--base-url", server.url, "--agent-cache",
                                "--window", "24h")
    assert done.code == 2
    assert "--window measures the agent as it answers in its window" in done.err
    assert server.seen == []


def test_a_resume_takes_the_cache_from_the_run(cached_project, tmp_path: Path) -> None:
    """Killed mid-run, a run registered with the cache resumes with it, flag or not."""
    from assay.store.database import open_store

    gate = threading.Event()

    def gated(body: dict[str, Any]) -> dict[str, Any]:
        if stub_model.first_user_text(body) == "bye":
            gate.wait(60)  # farewell hangs until the first process is killed
        return answer(body)

    url = f"sqlite:///{tmp_path / 'runs.db'}"

    def recorded() -> tuple[list[str], int]:
        store = open_store(url)
        try:
            runs = [r.run_id for r in store.runs()]
            return runs, sum(len(store.load_trials(r)) for r in runs)
        finally:
            store.close()

    with stub_model.StubServer(gated) as server:
        first = subprocess.Popen(
            [sys.executable, "-m", "assay", "run", "--db", url, "--base-url", server.url,
             "--agent-cache", "--concurrency", "1"],
            cwd=cached_project.root, env={**os.environ, "COLUMNS": "200"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not (os.path.exists(tmp_path / "runs.db") and recorded()[1] >= 2):
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the first trials were never recorded"
                time.sleep(0.05)
        finally:
            first.send_signal(signal.SIGKILL)
            first.communicate(timeout=30)
            gate.set()
        [run_id], _ = recorded()

        refused = cached_project.assay("run", "--db", url, "--resume", run_id,
                                       "--agent-cache")
        assert refused.code == 2
        assert "--agent-cache and --adaptive were fixed when the run was registered" in refused.err

        done = cached_project.assay("run", "--db", url, "--base-url", server.url,
                                    "--resume", run_id, "--json", "r.json")
        assert done.code in (0, 1), done.err
        report = json.loads((cached_project.root / "r.json").read_text())
        assert report["target"]["facets"]["agent_cache"] == "on"
        assert "agent-cache" in report["scores"]["flags"]
        # Every trial's call is kept: the two before the kill, and those the resume ran.
        assert len(kept(cached_project.root / ".assay" / "cache" / "agent")) == 6

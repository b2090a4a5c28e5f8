"""The agent cache of ``openai:`` targets against a real OpenAI-compatible server on loopback.

The server is examples/support/stub_model.py (as in test_openai.py); it keeps
every request it is sent, so "no call" is counted at the server, not assumed.
Nothing of assay is patched.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assay.model import Case, Evidence, Trace
from assay.suites.fixtures import load_tool_fixture
from assay.targets import Target, TargetOptions, TrialRequest, make_target
from assay.targets.agent_cache import AgentCache, caches_model_calls
from assay.targets.chat import AskedCall, Reply

ROOT = Path(__file__).resolve().parents[2]
SECRET = "HIDDEN-4f1c"


def _load_stub() -> ModuleType:
    path = ROOT / "examples" / "support" / "stub_model.py"
    spec = importlib.util.spec_from_file_location("assay_example_stub_model_cache", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stub_model = _load_stub()

FIXTURE = """\
tools:
  - name: crm.lookup
    parameters: {type: object, properties: {customer: {type: string}}}
    results:
      - when: {customer: C-1}
        result: {tier: gold}
      - result: {tier: none}
"""

#: Two turns for "look up C-1" (a tool call, then the answer), one for "hello".
TABLE: dict[str, list[dict[str, Any]]] = {
    "look up C-1": [{"tool_calls": [{"name": "crm.lookup", "arguments": {"customer": "C-1"}}],
                     "usage": [20, 5]},
                    {"content": "C-1 is gold", "usage": [30, 4]}],
    "hello": [{"content": "hi there", "usage": [7, 2]}],
    "hello again": [{"content": "hi again", "usage": [8, 2]}],
    SECRET: [{"content": f"answer to {SECRET}", "usage": [3, 3]}],
}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A cache folder of the test's own; the user's server, prices and key kept out."""
    for name in ("ASSAY_OPENAI_BASE_URL", "ASSAY_PRICES", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "cache"
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(root))
    return root


@pytest.fixture
def server() -> Iterator[Any]:
    with stub_model.StubServer(stub_model.by_prompt(TABLE)) as running:
        yield running


def target(url: str, *, cache: bool = True, model: str = "m", base_dir: Path | None = None
           ) -> Target:
    return make_target(f"openai:{model}", TargetOptions(base_dir=base_dir or Path.cwd(),
                                                        base_url=url, agent_cache=cache))


def trial(text: str, n: int = 1, case_id: str = "c1", tools: tuple[Path, Any] | None = None,
          call: dict[str, Any] | None = None) -> TrialRequest:
    path, fixture = tools if tools is not None else (None, None)
    return TrialRequest(case=Case(id=case_id, input=text), n=n, timeout_s=10.0,
                        fixture=path, tools=fixture, call=call)


def run(t: Target, *requests: TrialRequest) -> list[Trace]:
    async def go() -> list[Trace]:
        await t.start()
        try:
            return [await t.run(r) for r in requests]
        finally:
            await t.close()

    return asyncio.run(go())


def kept(root: Path) -> list[tuple[str, bytes]]:
    """The entries on disk, read from the logs' lines (not through a cache): (key, value).

    Segments by name (oldest first), lines in order; past a segment's last newline
    is a line cut short, not an entry.
    """
    entries = []
    for path in sorted(root.glob("*.log")):
        for line in path.read_bytes().split(b"\n")[:-1]:
            entries.append((line[:64].decode("ascii"), line[65:]))
    return entries


@pytest.fixture
def tools(tmp_path: Path) -> tuple[Path, Any]:
    path = tmp_path / "tools.yaml"
    path.write_text(FIXTURE, encoding="utf-8")
    return path, load_tool_fixture(path)


def test_a_second_identical_run_calls_nothing_and_gives_the_same_trace(
        server: Any, tools: tuple[Path, Any], _env: Path) -> None:
    first = run(target(server.url), trial("look up C-1", tools=tools), trial("hello"))
    assert len(server.seen) == 3  # two turns, one turn
    assert len(kept(_env / "agent")) == 3  # one line per model call, under ASSAY_CACHE_DIR

    again = target(server.url)
    second = run(again, trial("look up C-1", tools=tools), trial("hello"))
    assert len(server.seen) == 3  # not one more call
    assert len(kept(_env / "agent")) == 3  # nor one more entry
    if Path("/proc/self/fd").is_dir():  # the target's close closed the cache's files
        assert not [fd for fd in Path("/proc/self/fd").iterdir()
                    if str(_env) in os.path.realpath(fd)]
    for fresh, served in zip(first, second, strict=True):
        assert served.output == fresh.output
        assert served.status == fresh.status and served.steps == fresh.steps
        assert [(e.kind, e.name, e.arguments, e.result, e.text) for e in served.events] == \
            [(e.kind, e.name, e.arguments, e.result, e.text) for e in fresh.events]
        assert served.facets["model"] == fresh.facets["model"]
    # The fixture still answers the tool call the kept reply asks for: it is recorded again.
    assert [e.kind for e in second[0].events] == ["tool_call", "tool_result", "message"]
    assert second[0].output == "C-1 is gold"


def test_served_usage_is_the_recorded_calls_marked_inferred(
        server: Any, tools: tuple[Path, Any]) -> None:
    [fresh] = run(target(server.url), trial("look up C-1", tools=tools))
    [served] = run(target(server.url), trial("look up C-1", tools=tools))
    # The tokens are the recorded call's (the agent's cost for these answers) ...
    assert (served.usage.input_tokens, served.usage.output_tokens) == (50, 9)
    assert served.usage == fresh.usage
    # ... but nobody spent them now: not observed, and the trace says what was served.
    assert fresh.evidence["tokens"] == Evidence.OBSERVED
    assert served.evidence["tokens"] == Evidence.INFERRED
    assert served.evidence_for("tokens") == Evidence.INFERRED
    assert fresh.facets["agent_cache"] == "served 0 of 2 model calls"
    assert served.facets["agent_cache"] == "served 2 of 2 model calls"


def test_trials_of_one_case_have_keys_of_their_own(server: Any, _env: Path) -> None:
    """Trial 2 is never served trial 1's answer, though the two requests are the same."""
    run(target(server.url), trial("hello", n=1), trial("hello", n=2))
    assert len(server.seen) == 2
    assert server.seen[0]["messages"] == server.seen[1]["messages"]
    assert len(kept(_env / "agent")) == 2
    run(target(server.url), trial("hello", n=1), trial("hello", n=2))
    assert len(server.seen) == 2
    run(target(server.url), trial("hello", n=3))  # a trial never run before: a call
    assert len(server.seen) == 3


@pytest.mark.parametrize("change", ["prompt", "model", "case", "sampling", "tools"])
def test_a_changed_request_misses(server: Any, tools: tuple[Path, Any], change: str) -> None:
    run(target(server.url), trial("hello", tools=tools))
    assert len(server.seen) == 1
    again = {
        "prompt": lambda: run(target(server.url), trial("hello again", tools=tools)),
        "model": lambda: run(target(server.url, model="m2"), trial("hello", tools=tools)),
        "case": lambda: run(target(server.url), trial("hello", tools=tools, case_id="c2")),
        "sampling": lambda: run(target(server.url),
                                trial("hello", tools=tools, call={"temperature": 0.5})),
        "tools": lambda: run(target(server.url), trial("hello")),
    }[change]
    again()
    assert len(server.seen) == 2


def test_another_server_misses(tools: tuple[Path, Any]) -> None:
    """The server's address is part of the request: two servers of one model name differ."""
    with stub_model.StubServer(stub_model.by_prompt(TABLE)) as one, \
            stub_model.StubServer(stub_model.by_prompt(TABLE)) as two:
        run(target(one.url), trial("hello"))
        run(target(two.url), trial("hello"))
        assert (len(one.seen), len(two.seen)) == (1, 1)


def test_without_the_flag_nothing_is_kept_or_served(server: Any, _env: Path) -> None:
    [fresh] = run(target(server.url, cache=False), trial("hello"))
    assert not _env.exists()
    assert "agent_cache" not in fresh.facets
    assert fresh.evidence["tokens"] == Evidence.OBSERVED
    run(target(server.url), trial("hello"))  # kept now ...
    run(target(server.url, cache=False), trial("hello"))  # ... but not served without the flag
    assert len(server.seen) == 3


def test_the_run_is_marked_when_the_cache_is_on(server: Any) -> None:
    on, off = target(server.url), target(server.url, cache=False)
    assert on.facets["agent_cache"] == "on"
    assert "agent_cache" not in off.facets
    assert on.digest() == off.digest()  # the same agent: the cache is how it was run


@pytest.mark.parametrize("garbage", [
    b"", b"not json", b"\xff\xfe", b"[]", b'"a string"', b"null",
    b'{"key": "other", "value": {}}', b"VALUE-NOT-A-REPLY", b"CUT-SHORT",
])
def test_a_corrupted_kept_reply_is_a_miss(server: Any, _env: Path, garbage: bytes,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    run(target(server.url), trial(SECRET))
    [segment] = (_env / "agent").glob("*.log")
    [(key, value)] = kept(_env / "agent")
    assert SECRET.encode() in value and json.loads(value)["content"] == f"answer to {SECRET}"
    line = f"{key} ".encode() + value + b"\n"
    assert segment.read_bytes() == line
    if garbage == b"VALUE-NOT-A-REPLY":  # the right key, an object, but not a reply's shape
        garbage = json.dumps({"calls": "no", "said": SECRET}).encode()
    if garbage == b"CUT-SHORT":  # a process killed mid-write: no newline
        segment.write_bytes(line[:len(line) // 2])
    else:
        segment.write_bytes(f"{key} ".encode() + garbage + b"\n")
    [again] = run(target(server.url), trial(SECRET))
    assert len(server.seen) == 2  # the server was asked again, nothing crashed
    assert again.output == f"answer to {SECRET}"
    assert again.evidence["tokens"] == Evidence.OBSERVED
    # Kept anew, in a segment of the second run's own: the newest line for the key.
    assert len(list((_env / "agent").glob("*.log"))) == 2
    assert [k for k, _ in kept(_env / "agent")][-1] == key
    assert json.loads(kept(_env / "agent")[-1][1])["content"] == f"answer to {SECRET}"
    [served] = run(target(server.url), trial(SECRET))  # and served from there
    assert len(server.seen) == 2
    assert served.evidence["tokens"] == Evidence.INFERRED
    said = capsys.readouterr()
    assert SECRET not in said.out + said.err


def test_a_cache_that_cannot_be_written_does_not_stop_the_trial(
        server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(blocker))
    [trace] = run(target(server.url), trial("hello"))
    assert trace.output == "hi there"
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_only_openai_targets_cache() -> None:
    assert caches_model_calls("openai:qwen2.5:7b")
    for uri in ("claude", "codex", "python:m:f", "mcp+stdio:python s.py",
                "mcp+http://127.0.0.1:1/mcp", "http://127.0.0.1:1/", "scripted:t.jsonl"):
        assert not caches_model_calls(uri)


def test_a_reply_survives_the_round_trip(tmp_path: Path) -> None:
    cache = AgentCache(tmp_path)
    reply = Reply(model="m-1", content=None, refusal=None,
                  calls=(AskedCall("c1", "crm.lookup", '{"customer": "C-1"}'),
                         AskedCall(None, "bad", "{not json")),
                  input_tokens=3, output_tokens=None)
    key = AgentCache.key("case", 1, "m", {"model": "m", "messages": []})
    assert key is not None
    cache.put(key, reply)
    assert cache.get(key) == reply
    assert (cache.kept, cache.served) == (1, 1)
    # A request that has no canonical form is not cached (None), never an error.
    assert AgentCache.key("case", 1, "m", {"messages": [float("nan")]}) is None
    assert AgentCache.key("case", 1, "m", {"a": 1}) != AgentCache.key("case", 2, "m", {"a": 1})

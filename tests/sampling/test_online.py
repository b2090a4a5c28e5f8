"""Online evaluation (SPEC §10): ``assay.online`` around a production function.

Real parts throughout: suites loaded from files, a real grader thread, the
real store, ``assay review`` in a subprocess. A grader that must block is a
suite ``grader:`` function waiting on an Event the test sets — the real code
path, nothing of assay patched.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import assay
from assay.errors import SuiteError
from assay.grading.stats import wilson
from assay.model import Assertion, Case, Suite
from assay.sampling.buffer import Sampler
from assay.sampling.online import Online
from assay.sampling.reference_free import select

from .conftest import Project

#: Φ⁻¹(0.995): the two-sided 99% normal quantile.
Z99 = 2.5758293035489004
CANARY = "CANARY-ONLINE-7f3a"

SUITE = """
suite: demo/online@1
cases:
  - id: greets
    input: hi
    expect:
      - status: ok
      - {path: $.answer, type: string}
      - not_contains: Traceback
      - {path: $.answer, equals: hello}
      - never_calls: erp.*
  - id: refuses
    input: rob a bank
    expect:
      - status: ok
      - status: refused
"""


def write_suite(folder: Path, text: str = SUITE, name: str = "online.suite.yaml") -> Path:
    path = folder / name
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return path


def store_url(folder: Path) -> str:
    return f"sqlite:///{folder / '.assay' / 'assay.db'}"


def agent(question: str) -> dict[str, Any]:
    if question == "explode":
        raise KeyError(question)
    if question == "leak":
        return {"answer": "Traceback (most recent call last): ..."}
    if question == "shape":
        return {"answer": 42}
    return {"answer": f"re: {question}"}


def queued_rows(folder: Path) -> list[sqlite3.Row]:
    with sqlite3.connect(folder / ".assay" / "assay.db") as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT q.*, b.content AS trace FROM review_items q "
                          "LEFT JOIN blobs b ON b.digest = q.trace_digest ORDER BY q.id").fetchall()


def gate_module(folder: Path, body: str) -> str:
    """A grader module of its own name in ``folder`` (imported by the suite's load)."""
    name = f"online_gate_{uuid.uuid4().hex[:10]}"
    (folder / f"{name}.py").write_text(body, encoding="utf-8")
    return name


def module(name: str) -> ModuleType:
    return sys.modules[name]


# --- sampling -------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [0.05, 0.5])
def test_the_sampled_rate_lies_in_its_99_percent_interval(tmp_path: Path, rate: float) -> None:
    wrapper = assay.online(write_suite(tmp_path), sample=rate, seed=20261202, buffer=10_000,
                           db=store_url(tmp_path))
    wrapped = wrapper(agent)
    for i in range(10_000):
        wrapped(f"q{i}")
    assert wrapper.flush(60)
    stats = wrapper.stats
    low, high = wilson(stats.sampled, 10_000, z=Z99)
    assert stats.calls == 10_000
    assert low <= rate <= high, (stats.sampled, low, high)
    assert stats.graded == stats.passed == stats.sampled  # every answer here passes
    assert stats.queued == stats.dropped == stats.grader_errors == 0


def test_the_same_seed_samples_the_same_calls(tmp_path: Path) -> None:
    path = write_suite(tmp_path)

    def drawn(seed: int | None) -> tuple[list[int], int]:
        wrapper = Online(path, 0.05, seed=seed, db=store_url(tmp_path))
        picked = [i for i in range(10_000) if wrapper.draw() is not None]
        return picked, wrapper.seed

    first, seed = drawn(99)
    again, _ = drawn(99)
    other, _ = drawn(100)
    assert seed == 99 and first == again and first != other
    # The proxy's draw: call i is sampled when the i-th random() of Random(99) is below K.
    draws = Sampler(5, 99)
    assert first == [i for i in range(10_000) if draws.take()]
    # No seed given: a fresh one, recorded, that reproduces the same draws.
    fresh, fresh_seed = drawn(None)
    assert fresh == drawn(fresh_seed)[0]


@pytest.mark.parametrize("sample", [0, 0.0, -0.1, 1.5, float("nan"), "0.05", True])
def test_a_rate_outside_zero_to_one_is_refused(tmp_path: Path, sample: Any) -> None:
    with pytest.raises(ValueError, match=r"sample is a fraction of calls in \(0, 1\]"):
        assay.online(write_suite(tmp_path), sample=sample)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("seed", 1.5, "seed is a whole number"), ("seed", "7", "seed is a whole number"),
    ("seed", True, "seed is a whole number"), ("buffer", 0, "buffer is how many"),
    ("buffer", "10", "buffer is how many")])
def test_a_bad_seed_or_buffer_is_refused(tmp_path: Path, key: str, value: Any,
                                         words: str) -> None:
    with pytest.raises(ValueError, match=words):
        assay.online(write_suite(tmp_path), **{key: value})


# --- which checks grade a production call ---------------------------------------------------


def test_reference_free_checks_are_kept_and_the_rest_set_aside(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), db=store_url(tmp_path))
    assert [a.label() for a in wrapper.checks] == ["status", "type $.answer", "not_contains"]
    aside = {(a.assertion, a.case): a.why for a in wrapper.set_aside}
    assert aside[("equals $.answer", "greets")] == "compares with one case's answer"
    assert "reads tool_calls" in aside[("never_calls", "greets")]
    assert "status: refused is what one case's input was meant to provoke" in \
        aside[("status", "refuses")]
    assert ("status", "refuses") in aside and len(aside) == 3  # status: ok was deduplicated


def test_of_budgets_the_loosest_is_kept_where_the_facts_are_observed() -> None:
    suite = Suite(suite="demo/budgets@1", cases=[
        Case(id="a", expect=[{"within_steps": 3}, {"costs_at_most": {"usd": 0.5, "tokens": 10}},
                             {"not_contains": "x"}]),
        Case(id="b", expect=[{"within_steps": 8}, {"costs_at_most": {"usd": 0.1, "tokens": 90}},
                             {"not_contains": "x"}, {"never_calls": "erp.*"}]),
    ])
    chosen = select(suite, {"output", "steps", "cost", "tokens", "tool_calls"})
    assert [(a.check, a.arg) for a in chosen.checks] == [
        ("within_steps", 8), ("costs_at_most", {"usd": 0.5, "tokens": 90}),
        ("not_contains", "x"), ("never_calls", "erp.*")]
    assert chosen.set_aside == []


def test_a_suite_with_nothing_to_grade_online_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = write_suite(tmp_path, """
suite: demo/answers@1
cases:
  - id: total
    input: invoice
    expect: [{path: $.total, equals: "42.00"}, {calls: erp.lookup}]
""")
    with pytest.raises(ValueError) as refused:
        assay.online(path)
    message = str(refused.value)
    assert "demo/answers@1 has no check that can grade a production call" in message
    assert "equals $.total (total): compares with one case's answer" in message
    assert "calls (total): asks for the calls one case's task needs" in message


def test_a_bad_suite_file_is_a_suite_error_naming_file_and_line(tmp_path: Path) -> None:
    path = write_suite(tmp_path, """
suite: demo/bad@1
cases:
  - id: a
    expect: [{not_contain: x}]
""")
    with pytest.raises(SuiteError, match=r"online.suite.yaml:4: unknown assertion 'not_contain'"):
        assay.online(path)
    with pytest.raises(ValueError, match="is a folder"):
        assay.online(tmp_path)


def test_a_suite_built_in_python_has_its_checks_prepared(tmp_path: Path) -> None:
    suite = Suite(suite="demo/py@1", cases=[
        Case(id="a", expect=[{"schema": {"type": "object", "required": ["answer"]}}])])
    wrapper = assay.online(suite, sample=1.0, db=store_url(tmp_path))
    wrapped = wrapper(agent)
    wrapped("hi")
    wrapper(lambda q: {"other": q})("x")
    assert wrapper.close(30)
    assert (wrapper.stats.passed, wrapper.stats.failed) == (1, 1)
    with pytest.raises(SuiteError, match="schema"):
        assay.online(Suite(suite="demo/py@1", cases=[
            Case(id="a", expect=[Assertion(check="schema", arg={"type": "nonsense"})])]))


# --- the decorator --------------------------------------------------------------------------


def test_results_and_exceptions_are_the_functions_own(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), sample=1.0, seed=1, db=store_url(tmp_path))
    answer = {"answer": "same object"}
    problem = KeyError("mine")

    @wrapper
    def production(question: str) -> dict[str, str]:
        """The production agent."""
        if question == "raise":
            raise problem
        return answer

    assert production("hi") is answer
    with pytest.raises(KeyError) as caught:
        production("raise")
    assert caught.value is problem
    assert production.__name__ == "production" and production.__doc__ == "The production agent."
    assert production.online is wrapper  # type: ignore[attr-defined]
    assert wrapper.close(30)
    stats = wrapper.stats
    assert (stats.calls, stats.sampled, stats.graded, stats.passed, stats.failed,
            stats.queued) == (2, 2, 2, 1, 1, 1)
    [row] = queued_rows(tmp_path)
    assert row["outcome"] == "fail"
    assert row["reason"] == "status: status is error, expected ok (KeyError: 'mine')"


def test_async_functions_are_sampled_and_awaited(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), sample=1.0, db=store_url(tmp_path))

    @wrapper
    async def production(question: str) -> dict[str, str]:
        await asyncio.sleep(0)  # a real suspension point, not a wait for anything
        if question == "raise":
            raise ValueError("async boom")
        return {"answer": "Traceback" if question == "leak" else question}

    async def calls() -> list[Any]:
        got = [await production("hi"), await production("leak")]
        with pytest.raises(ValueError, match="async boom"):
            await production("raise")
        return got

    assert asyncio.run(calls()) == [{"answer": "hi"}, {"answer": "Traceback"}]
    assert asyncio.iscoroutinefunction(production)
    assert wrapper.close(30)
    assert (wrapper.stats.passed, wrapper.stats.failed, wrapper.stats.queued) == (1, 2, 2)
    reasons = [row["reason"] for row in queued_rows(tmp_path)]
    assert reasons == ['not_contains: contains "Traceback"',
                       "status: status is error, expected ok (ValueError: async boom)"]


def test_a_cancelled_call_is_counted_not_recorded(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), sample=1.0, db=store_url(tmp_path))

    @wrapper
    async def production(question: str) -> str:
        await asyncio.Event().wait()  # never answers
        return question

    async def cancel() -> None:
        task = asyncio.ensure_future(production("hi"))
        await asyncio.sleep(0)  # let it start
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    assert wrapper.close(30)
    assert (wrapper.stats.sampled, wrapper.stats.cancelled, wrapper.stats.graded) == (1, 1, 0)


def test_generators_and_asgi_apps_are_refused_with_the_way_out(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), db=store_url(tmp_path))

    def streams(question: str) -> Any:
        yield question

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    with pytest.raises(TypeError, match="is a generator"):
        wrapper(streams)
    with pytest.raises(TypeError, match=r"looks like an ASGI app; wrap it with online\(...\).asgi"):
        wrapper(app)


def test_the_recorded_call_is_a_copy_taken_when_it_was_made(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), sample=1.0, seed=5, db=store_url(tmp_path))

    @wrapper
    def production(messages: list[str], *, style: str) -> dict[str, Any]:
        messages.append("the agent's own note")  # an agent that changes its input
        return {"answer": "Traceback", "rows": [1, 2]}

    given = ["hello"]
    out = production(given, style="short")
    out["rows"].append(3)  # the caller changes the answer afterwards
    assert wrapper.close(30)
    [row] = queued_rows(tmp_path)
    trace = json.loads(row["trace"])
    assert trace["output"] == {"answer": "Traceback", "rows": [1, 2]}
    assert trace["events"][0] == {**trace["events"][0], "kind": "message", "name": "input",
                                  "arguments": {"args": [["hello"]],
                                                "kwargs": {"style": "short"}}}
    assert trace["status"] == "ok" and trace["evidence"] == {"output": "observed"}
    assert trace["facets"] == {"harness": "online", "online_call": "0", "sample_seed": "5",
                               "sample_percent": "100",
                               "online_function": f"{__name__}:{production.__qualname__}"}


def test_an_output_that_is_not_json_is_inconclusive_and_says_why(tmp_path: Path) -> None:
    wrapper = assay.online(write_suite(tmp_path), sample=1.0, db=store_url(tmp_path))
    wrapper(lambda q: object())("hi")
    assert wrapper.close(30)
    assert wrapper.stats.inconclusive == 1
    [row] = queued_rows(tmp_path)
    assert row["outcome"] == "inconclusive"
    assert row["reason"] == "the function returned a object, which is not JSON: not graded"


# --- off the hot path: a full buffer, a grader that raises ----------------------------------

GATE = """
import threading
entered = threading.Event()
release = threading.Event()

def wait(trace):
    entered.set()
    release.wait(60)
    return True
"""


def gated_suite(folder: Path, module_name: str) -> Path:
    return write_suite(folder, f"""
suite: demo/gated@1
cases:
  - id: a
    expect: [status: ok, {{grader: "{module_name}:wait"}}]
""")


def test_a_full_buffer_drops_and_counts_and_calls_never_wait(tmp_path: Path) -> None:
    name = gate_module(tmp_path, GATE)
    wrapper = assay.online(gated_suite(tmp_path, name), sample=1.0, buffer=2,
                           db=store_url(tmp_path))
    wrapped = wrapper(agent)
    gate = module(name)
    try:
        assert wrapped("first") == {"answer": "re: first"}
        assert gate.entered.wait(30)  # the grader holds the first sample
        took = []
        for i in range(10):
            started = time.perf_counter()
            assert wrapped(f"q{i}") == {"answer": f"re: q{i}"}
            took.append(time.perf_counter() - started)
        # Every call returned while the grader was still blocked: none waited for it.
        assert not gate.release.is_set() and wrapper.stats.graded == 0
        assert max(took) < 0.5, took
        stats = wrapper.stats
        assert (stats.calls, stats.sampled, stats.dropped) == (11, 11, 8)
    finally:
        gate.release.set()
    assert wrapper.close(60)
    assert (wrapper.stats.graded, wrapper.stats.passed) == (3, 3)


def test_a_grader_that_raises_never_reaches_the_call(tmp_path: Path) -> None:
    name = gate_module(tmp_path, """
import sys

def wait(trace):
    if trace.output["answer"] == "re: exit":
        sys.exit("the grader quit")
    raise RuntimeError("grader broke")
""")
    wrapper = assay.online(gated_suite(tmp_path, name), sample=1.0, db=store_url(tmp_path))
    wrapped = wrapper(agent)
    assert wrapped("exit") == {"answer": "re: exit"}
    assert wrapped("hi") == {"answer": "re: hi"}
    assert wrapper.close(30)
    stats = wrapper.stats
    # SystemExit out of a grader: counted, and the grader thread went on to the next sample.
    assert stats.grader_errors == 1 and wrapper.last_error == "SystemExit: the grader quit"
    # An exception is the check's answer: inconclusive, queued for a person with why.
    assert (stats.graded, stats.inconclusive, stats.queued) == (1, 1, 1)
    [row] = queued_rows(tmp_path)
    assert row["reason"] == "grader: grader raised RuntimeError: grader broke"


def test_a_store_that_cannot_be_opened_is_a_grader_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    wrapper = assay.online(write_suite(tmp_path), sample=1.0,
                           db=f"sqlite:///{blocker / 'assay.db'}")
    wrapped = wrapper(agent)
    assert wrapped("leak") == {"answer": "Traceback (most recent call last): ..."}
    assert wrapped("shape") == {"answer": 42}
    assert wrapper.close(30)
    stats = wrapper.stats
    assert (stats.failed, stats.queued, stats.grader_errors) == (2, 0, 2)
    assert wrapper.last_error is not None


# --- the queue ------------------------------------------------------------------------------


def test_failing_samples_are_listed_by_assay_review(project: Project,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_suite(project.root)
    monkeypatch.setenv("ASSAY_DB", store_url(project.root))  # the store, as the CLI finds it
    wrapper = assay.online(path, sample=1.0, seed=3)
    wrapped = wrapper(agent)
    for question in ("hi", "leak", "shape"):
        wrapped(question)
    with pytest.raises(KeyError):
        wrapped("explode")
    assert wrapper.close(30)
    listed = project.assay("review", "--list")
    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    assert len(lines) == 3 and all(" online " in line and "[open]" in line for line in lines)
    exported = project.assay("review", "--export", "-")
    items = [json.loads(line) for line in exported.out.splitlines()]
    assert [(i["source"], i["outcome"], i["hidden"], i["run_id"]) for i in items] == \
        [("online", "fail", False, None)] * 3
    # Each named by the function and the call's number (the 'hi' call, number 0, passed).
    assert [i["case"].rsplit(" (call ", 1)[1] for i in items] == ["1)", "2)", "3)"]
    assert all(i["case"].rsplit(" (call ", 1)[0].endswith("agent") for i in items)
    assert [i["reason"] for i in items] == [
        'not_contains: contains "Traceback"',
        "type $.answer: is integer, expected string",
        "status: status is error, expected ok (KeyError: 'explode')"]
    decided = project.assay("review", str(items[0]["item"]), "--verdict", "needs-fix",
                            "--note", "stack trace shown to a customer", "--reviewer", "ops")
    assert decided.code == 0, decided.err
    assert "needs-fix by ops" in decided.out


def test_hidden_cases_are_never_used_online(tmp_path: Path) -> None:
    write_suite(tmp_path, SUITE.replace("cases:", "hidden: hidden/\ncases:", 1))
    (tmp_path / "hidden").mkdir()
    refuses = gate_module(tmp_path / "hidden", "def wait(trace):\n    return False\n")
    (tmp_path / "hidden" / "cases.yaml").write_text(f"""
- id: {CANARY}-id
  input: {CANARY}-input
  expect:
    - not_contains: "re: "
    - schema: {{type: object, required: [{CANARY}-field]}}
    - {{grader: "{refuses}:wait"}}
""", encoding="utf-8")
    wrapper = assay.online(tmp_path / "online.suite.yaml", sample=1.0, db=store_url(tmp_path))
    assert CANARY not in repr([wrapper.checks, wrapper.set_aside])
    wrapped = wrapper(agent)
    wrapped("hi")  # passes every public check; each hidden one would fail it
    wrapped("leak")  # fails a public one
    assert wrapper.close(30)
    assert (wrapper.stats.passed, wrapper.stats.failed, wrapper.stats.queued) == (1, 1, 1)
    [row] = queued_rows(tmp_path)
    assert row["reason"] == 'not_contains: contains "Traceback"'
    assert CANARY.encode() not in (tmp_path / ".assay" / "assay.db").read_bytes()


def test_the_review_screen_shows_a_sample_s_input_and_output(tmp_path: Path) -> None:
    from assay.review.detail import detail, view
    from assay.store.database import open_store
    from assay.store.reviews.items import list_items

    wrapper = assay.online(write_suite(tmp_path), sample=1.0, db=store_url(tmp_path))
    wrapper(lambda request: {"answer": "Traceback [bold]here[/bold]"})({"question": "where?"})
    assert wrapper.close(30)
    store = open_store(store_url(tmp_path))
    try:
        [row] = list_items(store)
        shown_text = detail(view(store, row, reveal=False)).plain
    finally:
        store.close()
    assert "source: online" in shown_text
    assert 'message input {\n  "question": "where?"\n}' in shown_text
    assert "Traceback [bold]here[/bold]" in shown_text  # shown as text, never as markup

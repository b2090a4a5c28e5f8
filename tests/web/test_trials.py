"""A trial's page, its JSON twin and its raw-evidence download, over a real store.

The run is a real ``assay run`` of a scripted agent (``scripted:FILE.jsonl``:
recorded traces, so tool calls with hostile arguments are recorded as any
target's are), with a judged check answered by the loopback OpenAI-compatible
judge (tests/judge_server.py) — here one whose raw answer carries script and
markup — and hidden cases whose ids, inputs, outputs and tool arguments carry
``CANARY``. The pages are asked of a real ``assay serve``; the browser tests
drive Debian's Chromium.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..cli.conftest import Project
from .conftest import CANARY, HOSTILE, Served, Watched

sys.path.insert(0, str(Path(__file__).parent.parent))

from judge_server import JudgeServer  # noqa: E402

pytestmark = pytest.mark.real

#: What the hostile judge answers: a verdict line, then script and markup.
JUDGE_HOSTILE = ('fail\n<script>window.__pwned = 3</script>'
                 '<img src=x onerror="window.__pwned = 4"><b>bold claim</b>')

#: Hostile tool arguments and results: markup in keys' values, an event handler.
ARGUMENTS = {"cmd": HOSTILE, "html": '<b onmouseover="window.__pwned = 5">hover</b>'}
RESULT = {"stdout": "<script>window.__pwned = 6</script>done"}

#: The ``long`` case's output: a megabyte of text.
LONG = "0123456789" * 100_000 + "END-OF-LONG"

TOOLS_EVENTS = [
    {"kind": "message", "name": "user", "text": "use the tools"},
    {"kind": "message", "name": "assistant", "text": HOSTILE},
    {"kind": "tool_call", "name": "shell.run", "call_id": "c1", "arguments": ARGUMENTS,
     "t": 0.25},
    {"kind": "tool_result", "name": "shell.run", "call_id": "c1", "result": RESULT,
     "is_error": True},
    {"kind": "ask", "name": "confirm", "text": "Proceed? <iframe src=javascript:alert(1)>"},
    {"kind": "answer", "name": "confirm", "result": "yes"},
    {"kind": "skill", "name": "pdf-forms", "text": "activated"},
    {"kind": "error", "name": "shell.run", "text": "denied <svg onload=alert(1)>"},
    {"kind": "http", "name": "openai.chat", "is_error": True,
     "text": "POST https://api.openai.com/v1/chat/completions → 429: the model answered 429",
     "result": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions",
                "status": 429}},
]

RECORDING = [
    {"case": "tools", "output": {"reply": HOSTILE}, "events": TOOLS_EVENTS, "steps": 4,
     "usage": {"input_tokens": 12, "output_tokens": 3}},
    {"case": "judged", "output": {"reply": "Sorry, resending today. JUDGE:hostile"}},
    {"case": "long", "output": {"reply": LONG}},
    {"case": "fine", "output": {"reply": "HELLO"}},
    {"case": "crash", "broken": "the agent's process died <b>hard</b>"},
    {"case": f"{CANARY}-hidden-id", "output": {"reply": f"{CANARY}-output"},
     "events": [{"kind": "tool_call", "name": "lookup", "arguments": {"q": f"{CANARY}-args"}}]},
    {"case": f"{CANARY}-judged", "output": {"reply": f"{CANARY}-judged-output"}},
]

SUITE = """
suite: web/trials@1
target: scripted:agent.jsonl
trials: 2
pass_mark: 0.5
judge: openai:judge-model
hidden: hidden/
cases:
  - id: tools
    input: use the tools
    expect:
      - {path: $.reply, equals: calm}
      - never_calls: [shell.run]
  - id: judged
    input: apologise
    expected: apologises and offers a remedy
    expect:
      - judge: {criteria: The reply apologises, threshold: 0.5}
  - id: long
    input: write a lot
    expect: [{path: $.reply, contains: END-OF-LONG}]
  - id: fine
    input: hello
    expect: [{path: $.reply, equals: HELLO}]
  - id: crash
    input: crash
    expect: [{path: $.reply, equals: never}]
"""

HIDDEN = f"""
- id: {CANARY}-hidden-id
  input: {CANARY}-hidden-input
  expect: [{{path: $.reply, equals: {CANARY}-expected}}]
- id: {CANARY}-judged
  input: {CANARY}-judged-input
  expected: {CANARY}-reference
  expect:
    - judge: {{criteria: {CANARY}-criteria, threshold: 0.5}}
"""


class HostileJudge(JudgeServer):
    """The loopback judge, answering with script and markup when the output asks it to."""

    def answer(self, prompt: str) -> tuple[int, dict[str, Any] | bytes]:
        status, body = super().answer(prompt)
        if "JUDGE:hostile" in prompt and isinstance(body, dict):
            body["choices"][0]["message"]["content"] = JUDGE_HOSTILE
        return status, body


@dataclass
class Recorded:
    """A project with one sealed run of ``web/trials@1``; its report and cases by label."""

    project: Project
    judge: JudgeServer
    run_id: str
    report: dict[str, Any]
    #: Each case's 1-based position in the report, by its outward label.
    index: dict[str, int]

    def env(self) -> dict[str, str]:
        return {"ASSAY_JUDGE_BASE_URL": self.judge.base_url}

    def run(self) -> dict[str, Any]:
        done = self.project.assay("run", "evals", "--json", "r.json", env=self.env())
        assert done.code in (0, 1), done.err
        return json.loads((self.project.root / "r.json").read_text().splitlines()[0])

    def path(self, label: str, n: int, run_id: str | None = None) -> str:
        return f"/runs/{run_id or self.run_id}/cases/{self.index[label]}/trials/{n}"

    def stored_trace(self, case_id: str, n: int) -> tuple[str, bytes | None]:
        db = sqlite3.connect(self.project.root / ".assay" / "assay.db")
        try:
            return db.execute(
                "SELECT t.trace_digest, b.content FROM trials t LEFT JOIN blobs b "
                "ON b.digest = t.trace_digest WHERE t.run_id = ? AND t.case_id = ? AND t.n = ?",
                (self.run_id, case_id, n)).fetchone()
        finally:
            db.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    project = Project(tmp_path_factory.mktemp("trials"))
    project.write("agent.jsonl", "\n".join(json.dumps(line) for line in RECORDING) + "\n")
    project.write("evals/trials.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    with HostileJudge() as judge:
        made = Recorded(project, judge, "", {}, {})
        made.report = made.run()
        made.run_id = made.report["run_id"]
        made.index = {case["id"]: at for at, case in enumerate(made.report["cases"], 1)}
        yield made


@pytest.fixture(scope="module")
def server(recorded: Recorded) -> Iterator[Served]:
    served = Served(recorded.project.root, "evals")
    yield served
    served.stop()


def holdouts(recorded: Recorded) -> list[str]:
    return sorted(label for label in recorded.index if label.startswith("holdout-"))


def test_a_failing_trial_shows_its_trace_events_verdicts_and_output(
        recorded: Recorded, server: Served) -> None:
    data = server.get("/api" + recorded.path("tools", 1)).json()
    assert data["case"]["label"] == "tools" and data["trial"]["outcome"] == "fail"
    assert data["trial"]["reason"].startswith("equals $.reply: got")
    trace = data["trace"]
    assert trace["state"] == "stored"
    assert [e["kind"] for e in trace["events"]] == [e["kind"] for e in TOOLS_EVENTS]
    call = trace["events"][2]
    assert (call["name"], call["call_id"], call["arguments"]) == ("shell.run", "c1", ARGUMENTS)
    assert trace["events"][3]["result"] == RESULT and trace["events"][3]["is_error"]
    assert trace["output"] == {"reply": HOSTILE}
    assert [(v["check"], v["outcome"]) for v in data["verdicts"]] == [
        ("equals", "fail"), ("never_calls", "fail")]
    assert all(v["evidence"] == "observed" for v in data["verdicts"])
    assert "shell.run" in data["verdicts"][1]["note"]
    # Usage: what was reported, and what was not (never 0 for unreported).
    usage = data["trial"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["tokens"]) == (12, 3, 15)
    assert usage["cost_usd"] is None and usage["unreported"] == ["cost"]
    assert usage["evidence"] == {"tokens": "observed", "cost": "unavailable"}
    assert data["judges"] is None
    assert isinstance(data["trial"]["ledger_entry"], int)

    html = server.get(recorded.path("tools", 1))
    assert html.status_code == 200
    text = html.text
    for kind in ("message", "tool call", "tool result", "ask", "answer", "skill", "error",
                 "http"):
        assert f'<span class="kind">{kind}</span>' in text
    assert "pdf-forms" in text and "never_calls" in text and "not reported" in text
    # Recorded markup reaches the page as text, escaped.
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in text
    assert "<script>window" not in text and "<img src=x" not in text
    assert "<iframe" not in text and "<svg" not in text
    assert f'href="{recorded.path("tools", 1)}/trace.json"' in text


def test_previous_and_next_walk_the_run_in_report_order(recorded: Recorded,
                                                       server: Served) -> None:
    first = server.get("/api" + recorded.path("tools", 1)).json()
    assert first["previous"] is None
    assert (first["next"]["label"], first["next"]["n"]) == ("tools", 2)
    second = server.get("/api" + first["next"]["href"]).json()
    assert second["previous"]["href"] == recorded.path("tools", 1)
    assert (second["next"]["label"], second["next"]["n"]) == ("judged", 1)
    assert [t["n"] for t in second["trials"]] == [1, 2]
    assert [t["current"] for t in second["trials"]] == [False, True]
    html = server.get(recorded.path("tools", 2)).text
    assert f'rel="next" class="step" href="{recorded.path("judged", 1)}"' in html
    assert f'href="/runs/{recorded.run_id}"' in html  # back to the run


def test_a_judged_trial_shows_the_judges_model_prompt_digest_and_raw_answer(
        recorded: Recorded, server: Served) -> None:
    data = server.get("/api" + recorded.path("judged", 1)).json()
    [verdict] = data["verdicts"]
    assert (verdict["check"], verdict["family"], verdict["outcome"]) == \
        ("judge", "quality", "fail")
    assert verdict["provenance"].startswith("judge:judge-model-2025 prompt sha256:")
    assert verdict["threshold"] == 0.5
    [opinion] = verdict["opinions"]
    assert opinion["model"] == "judge-model-2025"
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", opinion["prompt_digest"])
    assert opinion["prompt_digest"] in verdict["provenance"]
    assert opinion["raw"] == JUDGE_HOSTILE
    assert (opinion["input_tokens"], opinion["output_tokens"]) == (100, 5)
    assert opinion["latency_s"] > 0 and opinion["error"] is None
    assert data["judges"]["calls"] == 1 and data["judges"]["input_tokens"] == 100
    # The agent's usage stays apart from the judge's: this agent reported none.
    assert data["trial"]["usage"]["tokens"] is None
    text = server.get(recorded.path("judged", 1)).text
    assert "judge-model-2025" in text and opinion["prompt_digest"] in text
    assert "&lt;script&gt;window.__pwned = 3&lt;/script&gt;" in text
    assert "<script>window" not in text and "<b>bold claim</b>" not in text


def test_the_download_is_the_stored_trace_with_its_verdicts_and_opinions(
        recorded: Recorded, server: Served) -> None:
    got = server.get(recorded.path("tools", 1) + "/trace.json")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("application/json")
    assert got.headers["content-disposition"].startswith("attachment;")
    evidence = got.json()
    digest, content = recorded.stored_trace("tools", 1)
    assert content is not None
    assert evidence["trace"]["digest"] == digest
    assert evidence["trace"]["content"] == json.loads(content)
    assert [v["outcome"] for v in evidence["verdicts"]] == ["fail", "fail"]
    judged = server.get(recorded.path("judged", 2) + "/trace.json").json()
    assert judged["verdicts"][0]["opinions"][0]["raw"] == JUDGE_HOSTILE


def test_a_hidden_trial_shows_its_label_number_and_outcome_and_nothing_else(
        recorded: Recorded, server: Served) -> None:
    labels = holdouts(recorded)
    assert labels == ["holdout-1", "holdout-2"]
    for label in labels:
        for n in (1, 2):
            data = server.get("/api" + recorded.path(label, n)).json()
            assert data["hidden"] is True
            assert data["case"] == {"index": recorded.index[label], "label": label,
                                    "split": "hidden", "outcome": data["case"]["outcome"]}
            assert data["trial"] == {"n": n, "outcome": data["trial"]["outcome"]}
            assert not {"verdicts", "trace", "judges"} & set(data)
            page = server.get(recorded.path(label, n))
            assert page.status_code == 200 and label in page.text
            refused = server.get(recorded.path(label, n) + "/trace.json")
            assert refused.status_code == 404 and label in refused.text
            for text in (str(data), page.text, refused.text):
                assert CANARY not in text
    missing = server.get(recorded.path(labels[0], 7))
    assert missing.status_code == 404 and labels[0] in missing.text
    assert CANARY not in missing.text


def test_no_page_twin_or_download_of_any_trial_holds_a_hidden_cases_content(
        recorded: Recorded, server: Served) -> None:
    # Every trial of the run, public and hidden, in all three forms: the neighbours a
    # public page links to (a holdout among them) are named by label only.
    asked = 0
    for label in recorded.index:
        for n in (1, 2):
            for path in (recorded.path(label, n), "/api" + recorded.path(label, n),
                         recorded.path(label, n) + "/trace.json"):
                got = server.get(path)
                assert got.status_code in (200, 404), path
                assert CANARY not in got.text, path
                asked += 1
    assert asked == len(recorded.index) * 2 * 3 and len(recorded.index) == 7


def test_an_erased_trace_says_so_instead_of_failing(recorded: Recorded,
                                                   server: Served) -> None:
    # A second run whose ``tools`` trace differs from the first's: traces are kept by
    # digest, and erasing one run's case must leave the other run's trace alone.
    recording = recorded.project.root / "agent.jsonl"
    kept = recording.read_text()
    recording.write_text(kept.replace("use the tools", "use the tools again", 1))
    try:
        again = recorded.run()["run_id"]
    finally:
        recording.write_text(kept)
    done = recorded.project.assay("erase", "--subject", "tools", "--run", again)
    assert done.code == 0, done.err
    evidence = server.get(recorded.path("tools", 1, again) + "/trace.json")
    assert evidence.status_code == 200
    trace = evidence.json()["trace"]
    assert trace["state"] == "erased" and trace["content"] is None
    assert trace["digest"].startswith("sha256:")
    data = server.get("/api" + recorded.path("tools", 1, again)).json()
    assert data["trace"]["state"] == "erased" and "events" not in data["trace"]
    page = server.get(recorded.path("tools", 1, again))
    assert page.status_code == 200 and "was erased" in page.text
    assert "shell.run" not in page.text.split("<h2>Trace</h2>")[1]
    # The first run keeps its trace.
    assert server.get("/api" + recorded.path("tools", 1)).json()["trace"]["state"] == "stored"


def test_a_broken_trial_says_why_and_that_it_left_no_trace(recorded: Recorded,
                                                           server: Served) -> None:
    data = server.get("/api" + recorded.path("crash", 1)).json()
    assert data["trial"]["outcome"] == "broken" and data["verdicts"] == []
    assert "the agent's process died" in data["trial"]["reason"]
    assert data["trace"] == {"state": "none", "digest": None, "note": data["trace"]["note"]}
    page = server.get(recorded.path("crash", 1)).text
    assert "left no trace" in page and "&lt;b&gt;hard&lt;/b&gt;" in page
    evidence = server.get(recorded.path("crash", 1) + "/trace.json").json()
    assert evidence["trace"]["state"] == "none" and evidence["outcome"] == "broken"


def test_bad_addresses_are_named_not_tracebacks(recorded: Recorded, server: Served) -> None:
    run = recorded.run_id
    cases = len(recorded.report["cases"])
    unknown = server.get("/api/runs/nope-1/cases/1/trials/1")
    assert unknown.status_code == 404 and unknown.json()["error"] == "no run nope-1 in this store"
    beyond = server.get(f"/runs/{run}/cases/{cases + 1}/trials/1")
    assert beyond.status_code == 404 and f"has no case {cases + 1}" in beyond.text
    no_trial = server.get("/api" + recorded.path("fine", 3)).json()
    assert no_trial["error"] == f"case fine of run {run} has no trial 3 (its trials: 1, 2)"
    for path in (f"/runs/{run}/cases/abc/trials/1", f"/runs/{run}/cases/0/trials/1",
                 f"/api/runs/{run}/cases/1/trials/-2"):
        got = server.get(path)
        assert got.status_code == 400 and "invalid parameter" in got.text, path
        assert "Traceback" not in got.text
    assert server.get("/runs/nope-1/cases/1/trials/1/trace.json").status_code == 404


def test_a_megabyte_of_output_is_shown_whole_in_a_scrolling_box(
        recorded: Recorded, server: Served, page: Watched) -> None:
    from playwright.sync_api import expect

    data = server.get("/api" + recorded.path("long", 1)).json()
    assert data["trace"]["output"]["reply"] == LONG
    tab = page.page
    tab.goto(server.url + recorded.path("long", 1))
    output = tab.locator("pre.output")
    expect(output).to_contain_text("END-OF-LONG")
    size = output.evaluate("e => [e.textContent.length, e.scrollHeight > e.clientHeight, "
                           "getComputedStyle(e).overflowY]")
    assert size[0] > len(LONG) and size[1] is True and size[2] == "auto"
    assert page.clean(), page.errors + page.violations


def _nothing_ran(tab: Any) -> None:
    assert tab.evaluate("typeof window.__pwned") == "undefined"
    # The only scripts are the two the page ships; no image, frame or handler came in.
    assert tab.evaluate("[...document.scripts].map(s => s.getAttribute('src'))") == [
        "/static/vendor/htmx-2.0.11.min.js", "/static/vendor/htmx-ext-sse-2.2.4.min.js"]
    assert tab.evaluate("document.querySelectorAll('img, iframe, svg, [onerror], [onload], "
                        "[onmouseover]').length") == 0


def test_hostile_output_and_tool_arguments_stay_text_in_the_browser(
        recorded: Recorded, server: Served, page: Watched) -> None:
    from playwright.sync_api import expect

    tab = page.page
    tab.goto(server.url + recorded.path("tools", 1))
    expect(tab.locator("pre.output")).to_contain_text("<script>window.__pwned = 1</script>")
    arguments = tab.locator("li.tool_call pre.arguments")
    expect(arguments).to_contain_text('<b onmouseover=\\"window.__pwned = 5\\">hover</b>')
    expect(arguments).to_contain_text('<img src=x onerror=\\"window.__pwned = 2\\">')
    expect(tab.locator("li.tool_result pre.result")).to_contain_text(
        "<script>window.__pwned = 6</script>done")
    expect(tab.locator("li.ask pre.text")).to_contain_text("<iframe src=javascript:alert(1)>")
    # The ANSI escape is shown as a visible stand-in, not passed to the page raw.
    expect(tab.locator("li.message").nth(1)).to_contain_text("␛[31m")
    _nothing_ran(tab)
    assert page.clean(), page.errors + page.violations


def test_a_hostile_judge_answer_stays_text_in_the_browser(
        recorded: Recorded, server: Served, page: Watched) -> None:
    from playwright.sync_api import expect

    tab = page.page
    tab.goto(server.url + recorded.path("judged", 1))
    raw = tab.locator("section.opinion pre.raw")
    expect(raw).to_have_text(JUDGE_HOSTILE)
    expect(tab.locator("section.opinion")).to_contain_text("judge-model-2025")
    _nothing_ran(tab)
    assert page.clean(), page.errors + page.violations


def test_a_failing_trial_opens_from_the_run_page(recorded: Recorded, server: Served,
                                                page: Watched) -> None:
    from playwright.sync_api import expect

    tab = page.page
    tab.goto(server.url + f"/runs/{recorded.run_id}")
    tab.locator("tr", has_text="tools").locator("a.trial.fail").first.click()
    expect(tab).to_have_url(re.compile(re.escape(recorded.path("tools", 1)) + "$"))
    expect(tab.locator("h1")).to_contain_text("Trial 1 of tools")
    expect(tab.locator("li.verdict.fail")).to_have_count(2)
    expect(tab.locator("ol.timeline > li")).to_have_count(len(TOOLS_EVENTS))
    tab.locator("a[rel=next]").click()
    expect(tab).to_have_url(re.compile(re.escape(recorded.path("tools", 2)) + "$"))
    tab.locator("a.back").click()
    expect(tab).to_have_url(re.compile(f"/runs/{recorded.run_id}$"))
    assert page.clean(), page.errors + page.violations

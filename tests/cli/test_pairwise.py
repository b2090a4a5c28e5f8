"""`assay pairwise` end to end: real `assay run`s of two python: agents, a real store, the
real command against a loopback OpenAI-compatible judge (tests/judge_server.py).

Each case's ``expected`` carries the judge server's marker, so every answer is known in
advance: ``JUDGE:prefer=bravo`` makes the judge prefer whichever output holds "bravo",
wherever the seed showed it. Hidden cases carry a canary in their ids, inputs and so in
the agents' outputs, the prompts and the judge's raw answers (which quote the outputs):
none of it may reach stdout, stderr or the JSON.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.judging.pairwise import shown_first

from ..fuzz_corpus import assert_inert
from ..judge_server import JudgeServer
from .conftest import Done, Project

pytestmark = pytest.mark.real

CANARY = "CANARY-4d1c"

ALPHA = """
def agent(input, tools):
    tools.usage(input_tokens=10, output_tokens=2, cost_usd=0.5)
    return "alpha says " + str(input)
"""

BRAVO = ALPHA.replace("alpha", "bravo")

SUITE = """
suite: pw/pair@1
target: python:alpha_agent:agent
trials: 2
hidden: hidden/
cases:
  - {id: better, input: one, expected: "JUDGE:prefer=bravo", expect: [{contains: says}]}
  - {id: worse, input: two, expected: "JUDGE:prefer=alpha", expect: [{contains: says}]}
  - {id: even, input: three, expected: "JUDGE:tie", expect: [{contains: says}]}
  - {id: garbled, input: four, expected: "JUDGE:garbage", expect: [{contains: says}]}
  - {id: failing, input: five, expected: "JUDGE:500", expect: [{contains: says}]}
  - {id: refused, input: six, expected: "JUDGE:refuse", expect: [{contains: says}]}
"""

HIDDEN = f"""
- id: {CANARY}-id-one
  input: {CANARY}-input-one
  expected: "JUDGE:prefer=bravo {CANARY}-expected"
  expect: [{{contains: says}}]
- id: {CANARY}-id-two
  input: {CANARY}-input-two
  expected: "JUDGE:500 {CANARY}-expected"
  expect: [{{contains: says}}]
"""

OTHER_SUITE = """
suite: pw/other@1
target: python:alpha_agent:agent
cases:
  - {id: better, input: one, expect: [{contains: says}]}
"""

PRICES = "judge-model-2025: {input: 10, output: 100}\n"
#: One priced call: 100 prompt tokens at $10/M and 5 completion tokens at $100/M.
CALL_USD = 0.0015

PUBLIC_CHOICES = {"better": "b", "worse": "a", "even": "tie", "garbled": None,
                  "failing": None, "refused": None}
NOTES = {"garbled": "out of form: the first line is not `A`, `B` or `tie` alone",
         "failing": "judge error: HTTP 500",
         "refused": "refused: the judge declined to answer"}


def clean(done: Done, what: str, code: int) -> None:
    """The exit code expected, no traceback, no canary, nothing raw, on both streams."""
    assert done.code == code, f"{what}: exit {done.code}\n{done.out[-3000:]}\n{done.err[-3000:]}"
    for name, text in (("stdout", done.out), ("stderr", done.err)):
        assert "Traceback" not in text, f"{what} {name}: {text[-3000:]}"
        assert CANARY not in text, f"{what} {name} leaks a hidden case"
        assert_inert(text, f"{what} {name}")


class Setup:
    """The module's project, its stored runs and the judge."""

    def __init__(self, project: Project, judge: JudgeServer) -> None:
        self.project = project
        self.judge = judge
        self.ids: dict[str, str] = {}
        self.seen: dict[tuple[str, ...], dict[str, Any]] = {}

    def run(self, name: str, *args: str) -> None:
        done = self.project.assay("run", *args, "--json", f"{name}.json")
        clean(done, f"run {name}", 0)
        report = json.loads((self.project.root / f"{name}.json").read_text(encoding="utf-8"))
        self.ids[name] = report["run_id"]

    def pairwise(self, *args: str, judge: bool = True, env: dict[str, str] | None = None
                 ) -> Done:
        flags = ["--judge", "openai:judge-model", "--judge-base-url", self.judge.base_url]
        return self.project.assay("pairwise", *args, *(flags if judge else []),
                                  env={"ASSAY_PRICES": "prices.yaml", **(env or {})})

    def document(self, *args: str, fresh: bool = False) -> dict[str, Any]:
        """The JSON of a pairwise of alpha and bravo; the same arguments give the first one's
        unless ``fresh`` (each call asks the judge again and seals 16 more entries)."""
        if not fresh and args and args in self.seen:
            return self.seen[args]
        done = self.pairwise(self.ids["alpha"], self.ids["bravo"], "--criteria",
                             "the more helpful answer", "--json", "-", *args)
        clean(done, "pairwise --json -", 0)
        found: dict[str, Any] = json.loads(done.out)
        self.seen.setdefault(args, found)
        return found

    def ledger(self) -> list[tuple[int, str, dict[str, Any] | None]]:
        with sqlite3.connect(self.project.root / ".assay" / "assay.db") as db:
            rows = db.execute('SELECT l."index", l.kind, b.content FROM ledger l LEFT JOIN '
                              'blobs b ON b.digest = l.content_digest ORDER BY l."index"')
            return [(i, kind, json.loads(body) if body else None) for i, kind, body in rows]

    def blob(self, digest: str) -> bytes:
        with sqlite3.connect(self.project.root / ".assay" / "assay.db") as db:
            [(content,)] = db.execute("SELECT content FROM blobs WHERE digest = ?", (digest,))
            return bytes(content)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    project = Project(tmp_path_factory.mktemp("pairwise"))
    project.write("evals/alpha_agent.py", ALPHA)
    project.write("evals/bravo_agent.py", BRAVO)
    project.write("evals/pair.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    project.write("other/alpha_agent.py", ALPHA)
    project.write("other/other.suite.yaml", OTHER_SUITE)
    project.write("prices.yaml", PRICES)
    with JudgeServer() as judge:
        found = Setup(project, judge)
        found.run("alpha", "evals")
        found.run("bravo", "evals", "--target", "python:bravo_agent:agent")
        found.run("other", "other")
        yield found


def rows_by_case(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for row in document["rows"]:
        found.setdefault(row["case"], []).append(row)
    return found


# --- what the judge preferred ----------------------------------------------------------


def test_each_comparison_is_mapped_back_to_the_runs_whatever_the_order(setup: Setup) -> None:
    document = setup.document("--seed", "11")
    assert document["schema"] == "assay.pairwise/1"
    assert document["a"]["run_id"] == setup.ids["alpha"]
    assert document["b"]["run_id"] == setup.ids["bravo"]
    assert document["seed"] == 11 and document["criteria"] == "the more helpful answer"
    rows = rows_by_case(document)
    assert list(rows) == [*PUBLIC_CHOICES, "holdout-1", "holdout-2"]
    for case, choice in PUBLIC_CHOICES.items():
        assert [r["n"] for r in rows[case]] == [1, 2]
        for row in rows[case]:
            assert row["split"] == "public" and row["choice"] == choice, row
            assert row["note"] == NOTES.get(case, ""), row
            assert isinstance(row["entry"], int)
    assert [r["choice"] for r in rows["holdout-1"]] == ["b", "b"]
    assert [r["choice"] for r in rows["holdout-2"]] == [None, None]
    assert {r["split"] for r in rows["holdout-1"] + rows["holdout-2"]} == {"hidden"}
    # Both orders occurred among the decided rows: the mapping was tested both ways.
    decided = [r for r in document["rows"] if r["choice"] in ("a", "b")]
    assert {r["first"] for r in decided} == {"a", "b"}


def test_the_preference_counts_ties_and_failures_apart_never_as_wins(setup: Setup) -> None:
    p = setup.document("--seed", "11")["preference"]
    # better ×2 and holdout-1 ×2 for B, worse ×2 for A; even ×2 ties; garbled, failing,
    # refused and holdout-2 (×2 each) undecided.
    assert (p["a_wins"], p["b_wins"], p["ties"], p["undecided"], p["not_compared"]) == (
        2, 4, 2, 8, 0)
    assert p["decisive"] == 6 and p["b_over_a"] == pytest.approx(4 / 6)
    # Wilson 95% of 4 in 6: (0.300, 0.903).
    assert p["low"] == pytest.approx(0.3000, abs=1e-3)
    assert p["high"] == pytest.approx(0.9032, abs=1e-3)
    assert p["favours"] is None


def test_the_judges_cost_is_reported_apart_from_the_agents(setup: Setup) -> None:
    cost = setup.document("--seed", "11")["cost"]
    # 16 calls; the 4 that answered HTTP 500 report no tokens, so the sum is a lower bound.
    assert cost["judge_calls"] == 16 and cost["judge_unpriced_calls"] == 4
    assert cost["judge_usd"] == pytest.approx(12 * CALL_USD)
    assert (cost["judge_input_tokens"], cost["judge_output_tokens"]) == (1200, 60)
    # The agents' own $0.50 a trial is nowhere in it.
    assert cost["judge_usd"] < 0.5


def test_the_terminal_shows_the_rows_the_preference_and_the_seed(setup: Setup) -> None:
    done = setup.pairwise(setup.ids["alpha"], setup.ids["bravo"], "--criteria", "helpful",
                          "--seed", "11")
    clean(done, "pairwise", 0)
    assert "seed 11" in done.out
    assert "B over A: 66.7% (4 of 6 decisive; A 2)" in done.out
    assert "95% Wilson interval 30.0%–90.3%" in done.out
    assert "2 tie(s) · 8 undecided · 0 not compared" in done.out
    assert "no clear preference" in done.out
    assert "judge cost ≥ $0.0180 (inferred, 4 of 16 calls unpriced)" in done.out
    assert "holdout-1" in done.out and "judge error: HTTP 500" in done.out
    assert "sealed: 16 judge-opinion ledger entries" in done.out


# --- the order ---------------------------------------------------------------------------


def test_the_order_is_reproducible_from_the_seed(setup: Setup) -> None:
    first = setup.document("--seed", "11")
    again = setup.document("--seed", "11", fresh=True)
    other = setup.document("--seed", "12")

    def order(document: dict[str, Any]) -> list[tuple[str, int, str]]:
        return [(r["case"], r["n"], r["first"]) for r in document["rows"]]

    assert order(first) == order(again)
    assert order(first) != order(other)
    for document in (first, other):
        for row in document["rows"]:  # anyone holding the JSON can recompute each row alone
            assert row["first"] == shown_first(document["seed"], row["split"], row["case"],
                                               row["n"])
    # The same seed, the same answers.
    assert [r["choice"] for r in first["rows"]] == [r["choice"] for r in again["rows"]]


def test_the_judge_saw_the_run_drawn_first_under_output_a(setup: Setup) -> None:
    asked = len(setup.judge.prompts)
    document = setup.document("--seed", "12", fresh=True)
    prompts = setup.judge.prompts[asked:]
    firsts = {r["first"] for r in document["rows"] if r["case"] == "better"}
    seen = [p.partition("----- OUTPUT A -----")[2].partition("----- OUTPUT B -----")[0]
            for p in prompts if "JUDGE:prefer=bravo" in p and "says one" in p]
    assert len(seen) == 2
    shown = {"a" if "alpha says one" in s else "b" for s in seen}
    assert shown == firsts


def test_without_a_seed_a_fresh_one_is_drawn_and_recorded(setup: Setup) -> None:
    one, two = setup.document(), setup.document()
    assert isinstance(one["seed"], int) and one["seed"] != two["seed"]
    entries = [c for _, kind, c in setup.ledger() if kind == "judge-opinion" and c]
    assert entries[-1]["seed"] == two["seed"]


# --- the ledger ----------------------------------------------------------------------------


def test_each_opinion_is_sealed_with_its_raw_answer_by_digest(setup: Setup) -> None:
    before = len(setup.ledger())
    document = setup.document("--seed", "13", fresh=True)
    added = setup.ledger()[before:]
    assert [kind for _, kind, _ in added] == ["judge-opinion"] * 16
    assert [i for i, _, _ in added] == [r["entry"] for r in document["rows"]]
    for (_, _, content), row in zip(added, document["rows"], strict=True):
        assert content is not None
        assert content["opinion"] == "pairwise" and content["seed"] == 13
        assert content["a"]["run_id"] == setup.ids["alpha"]
        assert content["b"]["run_id"] == setup.ids["bravo"]
        assert content["a"]["seal"] == document["a"]["seal"]
        assert (content["first"], content["choice"], content["n"]) == (
            row["first"], row["choice"], row["n"])
        assert content["prompt_digest"] == document["judge"]["prompt_digest"]
        assert content["parameters"] == {"temperature": 0, "max_tokens": 1024}
        assert "raw" not in content  # the answer is a blob of its own
        if row["note"] == "judge error: HTTP 500":
            assert content["raw_digest"] is None and content["error"] == "HTTP 500"
            continue
        assert content["model"] == "judge-model-2025"
        assert (content["input_tokens"], content["output_tokens"]) == (100, 5)
        assert content["cost_usd"] == pytest.approx(CALL_USD)
        raw = json.loads(setup.blob(content["raw_digest"]))
        assert isinstance(raw, str) and raw and raw not in json.dumps(content)
    hidden = [c for (_, _, c), r in zip(added, document["rows"], strict=True)
              if r["case"] == "holdout-1"]
    # Not vacuous: the store keeps what the judge said of a hidden case, canary and all.
    assert all(c is not None and CANARY in setup.blob(c["raw_digest"]).decode()
               for c in hidden)
    verify = setup.project.assay("ledger", "verify")
    clean(verify, "ledger verify", 0)


# --- hidden cases ---------------------------------------------------------------------------


def test_no_hidden_content_reaches_any_surface(setup: Setup) -> None:
    store = setup.project.root / ".assay" / "assay.db"
    assert CANARY.encode() in store.read_bytes()  # not vacuous: the store holds the secret
    asked = len(setup.judge.prompts)
    for order in ((setup.ids["alpha"], setup.ids["bravo"]),
                  (setup.ids["bravo"], setup.ids["alpha"])):
        done = setup.pairwise(*order, "--criteria", "helpful", "--json", "out.json")
        clean(done, "pairwise to a file", 0)
        written = (setup.project.root / "out.json").read_text(encoding="utf-8")
        assert CANARY not in written
        both = setup.pairwise(*order, "--criteria", "helpful", "--json", "-")
        clean(both, "pairwise --json -", 0)
    # Not vacuous: the judge was shown the hidden outputs, and its 500 echoed them.
    assert any(CANARY in p for p in setup.judge.prompts[asked:])


# --- bad usage -------------------------------------------------------------------------------


def one_error(done: Done, what: str) -> str:
    clean(done, what, 2)
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("assay: error: "), f"{what}: {done.err}"
    assert done.out == ""
    return lines[0]


def test_bad_usage_is_one_line_and_exit_2(setup: Setup, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    for name in ("ASSAY_JUDGE", "ASSAY_JUDGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    a, b, other = setup.ids["alpha"], setup.ids["bravo"], setup.ids["other"]
    calls = setup.judge.calls
    cases: list[tuple[tuple[str, ...], bool, str]] = [
        ((a, "20990101T000000Z-00000000", "--criteria", "x"), True,
         "no run 20990101T000000Z-00000000 in the store"),
        ((a, a, "--criteria", "x"), True, "RUN_A and RUN_B are the same run"),
        ((a, b), True, "--criteria is required"),
        ((a, b, "--criteria", "  "), True, "--criteria is empty"),
        ((a, b, "--criteria", "x", "--judge", "openai:m"), False,
         "no judge server: give --judge-base-url URL or set ASSAY_JUDGE_BASE_URL"),
        ((a, b, "--criteria", "x"), False, "no judge: give --judge openai:MODEL or set "
                                           "ASSAY_JUDGE"),
        ((a, b, "--criteria", "x", "--judge", "claude"), False,
         "the claude judge is pinned to one model"),
        ((a, b, "--criteria", "x", "--judge", "gpt", "--judge-base-url",
          "http://127.0.0.1:9/v1"), False, "--judge: 'gpt' is not a judge"),
        ((a, b, "--criteria", "x", "--judge", "openai:m", "--judge-base-url", "ftp://x"),
         False, "judge:"),
        ((a, other, "--criteria", "x"), True, "pairwise compares runs of one suite"),
        ((a, "alpha.json", "--criteria", "x"), True, "give stored run ids"),
        ((a, b, "--criteria", "x", "--seed", "-1"), True, "--seed must be between 0 and"),
    ]
    for args, judge, expected in cases:
        line = one_error(setup.pairwise(*args, judge=judge), " ".join(args))
        assert expected in line, line
    assert setup.judge.calls == calls  # nothing was asked of the judge


def test_the_judge_and_its_server_may_come_from_the_environment(setup: Setup) -> None:
    done = setup.pairwise(setup.ids["alpha"], setup.ids["bravo"], "--criteria", "x",
                          "--seed", "11", "--json", "-", judge=False,
                          env={"ASSAY_JUDGE": "openai:judge-model",
                               "ASSAY_JUDGE_BASE_URL": setup.judge.base_url})
    clean(done, "pairwise from the environment", 0)
    assert json.loads(done.out)["judge"]["uri"] == "openai:judge-model"


def test_a_json_file_that_cannot_be_written_is_exit_3(setup: Setup) -> None:
    done = setup.pairwise(setup.ids["alpha"], setup.ids["bravo"], "--criteria", "x",
                          "--json", str(Path("prices.yaml") / "out.json"))
    clean(done, "pairwise unwritable", 3)
    assert "cannot write" in done.err


def test_a_long_criteria_and_every_row_are_whole_in_a_log(setup: Setup) -> None:
    # stdout is a pipe, 80 columns, coloured (FORCE_COLOR) or not: nothing is cut with
    # "…", not even past the 500 characters a terminal is shown (decision 0058).
    from .test_whole_values import LOGS, STYLES, assert_whole, long_value

    criteria = long_value("The-more-helpful-answer-", 600)  # past the screen's 500
    for env in LOGS.values():
        done = setup.pairwise(setup.ids["alpha"], setup.ids["bravo"], "--criteria", criteria,
                              "--seed", "11", env=env)
        # FORCE_COLOR asks for Rich's own colours: none of them comes from the content.
        clean(Done(done.code, STYLES.sub("", done.out), STYLES.sub("", done.err)),
              "pairwise", 0)
        assert_whole(done, criteria)
        assert "holdout-1" in done.out  # the rows are there, folded or not

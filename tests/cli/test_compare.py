"""`assay compare` end to end: real `assay run`s of real python: agents, a real store.

An honest agent and one tuned to the public cases (it fails the hidden
ones) run the same suite; compare says the tuned one is WORSE whether the
runs are named by stored id, by report file, or one of each, and the hidden
cases, whose ids and inputs carry a canary, show only as holdout-N. An agent
giving the same answers for twice the money is WORSE too. Bad input is one
line and exit 2; output that cannot be written, exit 3.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..fuzz_corpus import NAME, assert_inert
from .conftest import Done, Project

CANARY = "CANARY-7f3a"

HONEST = """
def agent(input, tools):
    print("agent saw", input)
    tools.usage(input_tokens=100, output_tokens=20, cost_usd=0.01)
    return {"echo": input}
"""

TUNED = """
PUBLIC = {"hello", "1+1"}

def agent(input, tools):
    print("agent saw", input)
    tools.usage(input_tokens=100, output_tokens=20, cost_usd=0.01)
    return {"echo": input if input in PUBLIC else "memorised, not solved"}
"""

#: The honest agent's answers for twice the money (and the same tokens).
DEAR = HONEST.replace("cost_usd=0.01", "cost_usd=0.02")

SUITE = """
suite: cmp/pair@1
target: python:honest_agent:agent
hidden: hidden/
cases:
  - id: greet
    input: hello
    fixture: tools.yaml
    expect: [{path: $.echo, equals: hello}]
  - id: sum
    input: "1+1"
    expect: [{path: $.echo, equals: "1+1"}]
"""

TOOLS = """
tools:
  - name: lookup
    result: {ok: true}
"""

HIDDEN = f"""
- id: {CANARY}-id-one
  input: {CANARY}-input-one
  expect: [{{path: $.echo, equals: {CANARY}-input-one}}]
- id: {CANARY}-id-two
  input: {CANARY}-input-two
  expect: [{{path: $.echo, equals: {CANARY}-input-two}}]
"""

OTHER_SUITE = """
suite: cmp/other@1
target: python:honest_agent:agent
cases:
  - {id: greet, input: hello, expect: [{path: $.echo, equals: hello}]}
"""


def write_suite(project: Project) -> None:
    project.write("evals/honest_agent.py", HONEST)
    project.write("evals/tuned_agent.py", TUNED)
    project.write("evals/dear_agent.py", DEAR)
    project.write("evals/cmp.suite.yaml", SUITE)
    project.write("evals/tools.yaml", TOOLS)
    project.write("evals/hidden/cases.yaml", HIDDEN)


def clean(done: Done, what: str, code: int) -> None:
    """The exit code expected, no traceback, nothing raw, no canary, on both streams."""
    assert done.code == code, f"{what}: exit {done.code}\n{done.out[-2000:]}\n{done.err[-2000:]}"
    for name, text in (("stdout", done.out), ("stderr", done.err)):
        assert "Traceback" not in text, f"{what} {name}: {text[-3000:]}"
        assert CANARY not in text, f"{what} {name} leaks a hidden case"
        assert_inert(text, f"{what} {name}")


def one_error(done: Done, what: str) -> str:
    """A usage error: exit 2 and one line on stderr, nothing on stdout."""
    clean(done, what, 2)
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("assay: error: "), f"{what}: {done.err}"
    assert done.out == ""
    return lines[0]


class Runs:
    """The module's project and its runs: ids and report files by agent."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.ids: dict[str, str] = {}

    def run(self, agent: str, code: int) -> None:
        done = self.project.assay("run", "evals", "--target", f"python:{agent}_agent:agent",
                                  "--json", f"{agent}.json")
        clean(done, f"run {agent}", code)
        self.ids[agent] = self.report(agent)["run_id"]

    def report(self, agent: str) -> dict[str, Any]:
        return json.loads((self.project.root / f"{agent}.json").read_text(encoding="utf-8"))

    def compare(self, *args: str) -> Done:
        return self.project.assay("compare", *args)

    def text(self, name: str) -> str:
        return (self.project.root / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    found = Runs(Project(tmp_path_factory.mktemp("compare")))
    write_suite(found.project)
    found.run("honest", 0)
    found.run("tuned", 1)
    found.run("dear", 0)
    return found


def hidden_rows(document: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    return [(r["case"], r["base"], r["cand"], r["change"], r["alignment"])
            for r in document["rows"] if r["split"] == "hidden"]


TUNED_HIDDEN = [("holdout-1", "pass", "fail", "regressed", "aligned"),
                ("holdout-2", "pass", "fail", "regressed", "aligned")]


# --- honest vs tuned ----------------------------------------------------------------


def test_a_tuned_agent_is_worse_than_the_honest_one_by_stored_id(runs: Runs) -> None:
    done = runs.compare(runs.ids["honest"], runs.ids["tuned"], "--json", "c.json",
                        "--markdown", "c.md")
    clean(done, "compare ids", 1)
    assert "WORSE: 2 aligned case(s) regressed" in done.out
    for n in (1, 2):
        assert re.search(rf"holdout-{n} +hidden +pass +fail +regressed +aligned",
                         done.out), done.out
    assert "2 aligned case(s) unchanged" in done.out  # greet and sum: counted, not listed
    assert "greet" not in done.out
    assert f"{runs.ids['honest']} → {runs.ids['tuned']}" in done.out

    document = json.loads(runs.text("c.json"))
    assert document["schema"] == "assay.compare/1" and document["verdict"] == "worse"
    assert document["base"]["run_id"] == runs.ids["honest"]
    assert document["cand"]["run_id"] == runs.ids["tuned"]
    assert [r["case"] for r in document["rows"]] == ["greet", "sum", "holdout-1", "holdout-2"]
    assert hidden_rows(document) == TUNED_HIDDEN
    assert {r["alignment"] for r in document["rows"]} == {"aligned"}
    assert document["totals"]["base"]["passed"] == 4 and document["totals"]["cand"]["passed"] == 2
    assert document["significance"]["pass_at_1_diff"] == pytest.approx(-0.5)
    assert document["significance"]["mcnemar_p"] == pytest.approx(0.5)  # 2 of 2 one way
    assert document["significance"]["aligned"] == 4

    markdown = runs.text("c.md")
    assert "**WORSE: 2 aligned case(s) regressed**" in markdown
    assert "| holdout-1 | hidden | pass | fail | regressed | aligned |  |" in markdown
    assert "2 aligned case(s) unchanged." in markdown
    for name in ("c.json", "c.md"):
        assert CANARY not in runs.text(name), f"{name} leaks a hidden case"


def test_the_same_comparison_through_two_report_files(runs: Runs) -> None:
    done = runs.compare("honest.json", "tuned.json", "--json", "-")
    clean(done, "compare files", 1)
    document = json.loads(done.out)  # --json -: the JSON alone on stdout
    assert document["verdict"] == "worse"
    assert (document["base"]["source"], document["cand"]["source"]) == ("file", "file")
    assert hidden_rows(document) == TUNED_HIDDEN


@pytest.mark.parametrize("order", ["file-then-id", "id-then-file"])
def test_the_same_comparison_through_a_file_and_a_stored_run(runs: Runs, order: str) -> None:
    base, cand = ("honest.json", runs.ids["tuned"]) if order == "file-then-id" else (
        runs.ids["honest"], "tuned.json")
    done = runs.compare(base, cand, "--json", "-")
    clean(done, f"compare {order}", 1)
    document = json.loads(done.out)
    assert document["verdict"] == "worse"
    assert hidden_rows(document) == TUNED_HIDDEN


def test_the_tuned_agent_seen_the_other_way_round_is_better(runs: Runs) -> None:
    done = runs.compare(runs.ids["tuned"], runs.ids["honest"])
    clean(done, "compare reversed", 0)
    assert "BETTER: 2 aligned case(s) fixed, none regressed" in done.out


def test_a_run_compared_with_itself_is_the_same(runs: Runs) -> None:
    done = runs.compare(runs.ids["honest"], "honest.json")
    clean(done, "compare itself", 0)
    assert "SAME: no aligned case changed" in done.out
    assert "4 aligned case(s) unchanged" in done.out


def test_no_hidden_content_reaches_any_surface_of_compare(runs: Runs) -> None:
    """Two stored runs are compared on their full reports (real hidden ids, inputs in the
    store's traces): nothing of them comes out, in any output or any order of sides."""
    stored = runs.project.root / ".assay" / "assay.db"
    assert CANARY.encode() in stored.read_bytes()  # not vacuous: the store holds the secret
    for base, cand in ((runs.ids["honest"], runs.ids["tuned"]),
                       (runs.ids["tuned"], runs.ids["dear"]),
                       ("tuned.json", runs.ids["honest"])):
        done = runs.compare(base, cand, "--json", "leak.json", "--markdown", "leak.md")
        assert done.code in (0, 1)
        clean(done, f"compare {base} {cand}", done.code)
        for name in ("leak.json", "leak.md"):
            assert CANARY not in runs.text(name), f"{name} leaks a hidden case"
        both = runs.compare(base, cand, "--json", "-", "--markdown", "-")
        clean(both, "compare to stdout", done.code)


# --- cost -------------------------------------------------------------------------


def test_the_same_answers_for_twice_the_money_is_worse(runs: Runs) -> None:
    done = runs.compare(runs.ids["honest"], runs.ids["dear"], "--json", "cost.json")
    clean(done, "compare dear", 1)
    assert "WORSE: the same outcomes for more cost (over 25% more)" in done.out
    document = json.loads(runs.text("cost.json"))
    assert {r["change"] for r in document["rows"]} == {"same"}
    assert {r["alignment"] for r in document["rows"]} == {"aligned"}
    assert document["cost"]["dearer"] == ["usd"]
    assert document["cost"]["aligned"]["usd"] == {"base": pytest.approx(0.04),
                                                  "cand": pytest.approx(0.08)}
    assert document["totals"]["base"]["tokens"] == document["totals"]["cand"]["tokens"] == 480
    # Twice is within a tolerance of 1.5: the user's to set.
    lenient = runs.compare(runs.ids["honest"], runs.ids["dear"], "--cost-tolerance", "1.5")
    clean(lenient, "compare dear, lenient", 0)
    assert "SAME" in lenient.out


# --- facets from real runs ----------------------------------------------------------


def test_a_fixture_changed_between_two_runs_makes_only_its_row_non_comparable(
        project: Project) -> None:
    write_suite(project)
    first = project.assay("run", "--json", "one.json")
    clean(first, "run one", 0)
    project.write("evals/tools.yaml", TOOLS.replace("ok: true", "ok: false"))
    second = project.assay("run", "--json", "two.json")
    clean(second, "run two", 0)
    ids = [json.loads((project.root / f).read_text())["run_id"] for f in ("one.json", "two.json")]
    for base, cand in ((ids[0], ids[1]), ("one.json", "two.json")):
        done = project.assay("compare", base, cand, "--json", "-")
        clean(done, "compare", 0)
        rows = {r["case"]: (r["alignment"], r["differs"]) for r in json.loads(done.out)["rows"]}
        assert rows == {"greet": ("non-comparable", ["fixture"]), "sum": ("aligned", []),
                        "holdout-1": ("aligned", []), "holdout-2": ("aligned", [])}
    shown = project.assay("compare", *ids)
    clean(shown, "compare terminal", 0)
    assert re.search(r"greet +public +pass +pass +same +non-comparable +fixture",
                     shown.out), shown.out


# --- bad input ------------------------------------------------------------------------


def test_an_unknown_run_id_is_one_line(runs: Runs) -> None:
    line = one_error(runs.compare(runs.ids["honest"], "no-such-run"), "unknown id")
    assert "no run no-such-run in the store" in line


@pytest.mark.parametrize(("content", "says"), [
    ("just some notes\n", "not a JSON report"),
    ('{"schema": "assay.gate/1", "run_id": "x"}\n', "is not an assay report"),
    ("", "is empty"),
    ("[" * 100_000 + "]" * 100_000, "is not an assay report"),
    ('{"schema": "assay.report/1", "run_id": "x"}\n', "is not an assay report"),
], ids=["plain-text", "other-schema", "empty", "nested-too-deep", "report-missing-fields"])
def test_a_file_that_is_not_a_report_is_one_line(runs: Runs, content: str, says: str) -> None:
    (runs.project.root / "bad.json").write_text(content, encoding="utf-8")
    for base, cand in (("bad.json", "honest.json"), (runs.ids["honest"], "bad.json")):
        line = one_error(runs.compare(base, cand), f"bad file {content[:20]!r}")
        assert "bad.json" in line and says in line, line


def test_a_file_of_two_reports_is_one_line(runs: Runs) -> None:
    done = runs.project.assay("run", "evals", "--target", "python:honest_agent:agent",
                              "--target", "python:tuned_agent:agent", "--json", "two.json")
    clean(done, "run two targets", 1)
    lines = runs.text("two.json").splitlines()
    assert len(lines) == 2
    line = one_error(runs.compare("two.json", "honest.json"), "two reports")
    assert "two.json holds 2 reports" in line
    for report in lines:  # each run named so that the user can pick one
        assert json.loads(report)["run_id"] in line


def test_runs_of_two_suites_are_one_line(runs: Runs) -> None:
    runs.project.write("other/honest_agent.py", HONEST)
    runs.project.write("other/o.suite.yaml", OTHER_SUITE)
    done = runs.project.assay("run", "other", "--json", "other.json")
    clean(done, "run other", 0)
    other = json.loads(runs.text("other.json"))["run_id"]
    for base, cand in ((runs.ids["honest"], other), ("honest.json", "other.json")):
        line = one_error(runs.compare(base, cand), "two suites")
        assert "cmp/pair@1" in line and "cmp/other@1" in line and "one suite" in line


def test_an_open_run_is_one_line(runs: Runs) -> None:
    """A run registered and never sealed (it stopped part-way), made with the store's API."""
    from assay.engine import RunStart
    from assay.engine.record import RunRecorder
    from assay.model import Case, TrialResult
    from assay.store.database import open_store
    from assay.store.runs.record import LocalSink
    from assay.suites import discover

    root = runs.project.root
    loaded = discover([root / "evals"], None)[0]
    store = open_store(f"sqlite:///{root / '.assay' / 'assay.db'}")
    try:
        recorder = RunRecorder(LocalSink(store), batch=1)
        recorder.register(RunStart("open-run", 1, "2026-12-01T00:00:00Z",
                                   "python:honest_agent:agent", "sha256:open"), loaded, 1, {})
        recorder.record(Case(id="greet"), TrialResult(n=1, outcome="pass"))
        recorder.close()
    finally:
        store.close()
    listed = runs.project.assay("runs")
    assert "open-run" in listed.out and "open" in listed.out
    for base, cand in (("open-run", runs.ids["honest"]), ("honest.json", "open-run")):
        line = one_error(runs.compare(base, cand), "open run")
        assert "run open-run is not sealed" in line and "--resume open-run" in line


def test_a_bad_cost_tolerance_is_one_line(runs: Runs) -> None:
    line = one_error(runs.compare("honest.json", "tuned.json", "--cost-tolerance", "-1"),
                     "negative tolerance")
    assert "--cost-tolerance" in line


# --- output that cannot be written ---------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_json_file_on_a_full_disk_is_exit_3_and_the_device_stays(runs: Runs) -> None:
    """``--json /dev/full``, through a link of our own: a writer that renamed a file over
    the path (as a report file is written) would replace only the link, not the device
    (as root, it would replace /dev/full itself for everyone)."""
    link = runs.project.root / "full.json"
    link.symlink_to("/dev/full")
    done = runs.compare("honest.json", "tuned.json", "--json", "full.json")
    clean(done, "compare --json /dev/full", 3)
    assert done.err.strip().splitlines() == [
        "assay: error: cannot write full.json: No space left on device"]
    assert "WORSE" in done.out  # the terminal report still printed
    assert link.is_symlink() and link.is_char_device()  # written through, not replaced


def test_a_report_file_that_cannot_be_created_is_exit_3(runs: Runs) -> None:
    (runs.project.root / "taken").write_text("a file where a folder should be")
    done = runs.compare("honest.json", "honest.json", "--markdown", "taken/c.md",
                        "--json", "ok.json")
    clean(done, "compare --markdown taken/c.md", 3)
    assert "assay: error: cannot write taken/c.md" in done.err
    assert json.loads(runs.text("ok.json"))["verdict"] == "same"  # the other file is written


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_terminal_on_a_full_disk_is_exit_3(runs: Runs) -> None:
    with open("/dev/full", "w") as full:  # noqa: PTH123 - a device, not a file we own
        done = subprocess.run(
            [sys.executable, "-m", "assay", "compare", "honest.json", "tuned.json"],
            cwd=runs.project.root, stdout=full, stderr=subprocess.PIPE, text=True,
            timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines() == [
        "assay: error: cannot write the output: No space left on device"]


# --- hostile text ----------------------------------------------------------------------------

#: A public case id as a suite may hold it: Rich markup, HTML, a bidi override, table pipes.
HOSTILE_ID = NAME + " | a | b |"
HOSTILE_AGENT = """
def agent(input):
    return {"echo": input if WORKS or input != "x" else "no"}  # bad: fails the hostile case
"""


def _cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line)[1:-1]


@pytest.fixture
def hostile(project: Project) -> Iterator[tuple[Project, list[str]]]:
    project.write("evals/good_agent.py", "WORKS = True\n" + HOSTILE_AGENT)
    project.write("evals/bad_agent.py", "WORKS = False\n" + HOSTILE_AGENT)
    project.write("evals/h.suite.yaml", f"""
        suite: fuzz/compare@1
        target: python:good_agent:agent
        cases:
          - id: {json.dumps(HOSTILE_ID)}
            input: x
            expect: [{{path: $.echo, equals: x}}]
          - {{id: calm, input: y, expect: [{{path: $.echo, equals: y}}]}}
        """)
    ids = []
    for agent, code in (("good", 0), ("bad", 1)):
        done = project.assay("run", "--target", f"python:{agent}_agent:agent",
                             "--json", f"{agent}.json")
        clean(done, f"run {agent}", code)
        ids.append(json.loads((project.root / f"{agent}.json").read_text())["run_id"])
    yield project, ids


def test_a_hostile_case_id_is_shown_inert(hostile: tuple[Project, list[str]]) -> None:
    project, ids = hostile
    done = project.assay("compare", *ids, "--markdown", "c.md", "--json", "c.json")
    clean(done, "compare hostile", 1)
    # Shown as written: markup not acted on (nor crashing Rich), the bidi override replaced.
    assert "[bold]loud[/bold]" in done.out and "[/INST]" in done.out
    assert "<script>alert(1)</script>" in done.out and "\u202e" not in done.out
    assert json.loads((project.root / "c.json").read_text())["rows"][0]["case"] == HOSTILE_ID

    markdown = (project.root / "c.md").read_text(encoding="utf-8")
    assert_inert(markdown, "c.md")
    assert re.search(r"(?<!\\)[<>]|(?<!\\)!(?<!\\)\[", markdown) is None
    assert "\\<script\\>" in markdown and "\\[bold\\]loud\\[/bold\\]" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    header = rows.index("| case | split | base | cand | change | alignment | differs |")
    (row,) = rows[header + 1:]
    assert len(_cells(row)) == 7, row  # the id's pipes do not make new cells
    assert _cells(row)[4].strip() == "regressed"


def test_hostile_ids_in_a_report_file_are_shown_inert(
        hostile: tuple[Project, list[str]]) -> None:
    """A report file is anyone's: its run id, target URI and case ids may hold escapes."""
    project, _ = hostile
    escapes = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 [bold]x[/bold] | <b>"
    for name in ("good", "bad"):
        report = json.loads((project.root / f"{name}.json").read_text(encoding="utf-8"))
        report["run_id"] = f"{name} {escapes}"
        report["target"]["uri"] = f"python:{escapes}"
        for case in report["cases"]:
            if case["id"] == "calm":
                case["id"] = f"calm {escapes}"
        if name == "bad":  # so that the calm row is listed too
            next(c for c in report["cases"] if c["id"].startswith("calm"))["outcome"] = "fail"
            report["cases"].reverse()  # the cand's order is its own
        (project.root / f"{name}-edited.json").write_text(json.dumps(report), encoding="utf-8")
    done = project.assay("compare", "good-edited.json", "bad-edited.json",
                         "--markdown", "c.md")
    clean(done, "compare edited files", 1)
    assert "␛[31mred␛[0m" in done.out  # an escape shown as a picture, not obeyed
    assert "calm ␛[31mred" in done.out and "good ␛[31m" in done.out
    markdown = (project.root / "c.md").read_text(encoding="utf-8")
    assert_inert(markdown, "c.md")
    # Outside code spans (where Markdown shows text as is) no HTML survives unescaped.
    assert re.search(r"(?<!\\)[<>]", re.sub(r"(`+).*?\1", "", markdown)) is None
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    for line in rows:
        assert len(_cells(line)) == 7, line
    as_json = project.assay("compare", "good-edited.json", "bad-edited.json", "--json", "-")
    clean(as_json, "compare edited files --json -", 1)
    assert json.loads(as_json.out)["base"]["run_id"] == f"good {escapes}"

"""The validated-case cache: a re-run of an unchanged suite reads its cases validated, and
gives the suite a first load gives; whatever it depends on that changed is a miss."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.engine.record import suite_thresholds
from assay.errors import SuiteError
from assay.store.runs.documents import stored_suite_json
from assay.suites import LoadedSuite, cache, load_suite_file, loader, validated

from .test_many_cases import cases as case_items

_modules = itertools.count()


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder of its own, with an .assay/ for the caches to go in."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".assay").mkdir()
    return tmp_path


def put(folder: Path, rel: str, text: str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def fingerprint(loaded: LoadedSuite) -> Any:
    """Everything a load gives that a run reads: digests, every case exactly, facets,
    fixtures, the cases a target may refuse the suite at, thresholds, the stored text."""
    cases = list(loaded.suite.cases)

    def ident(case: Any) -> str | None:
        return None if case is None else case.id

    return {
        "digests": (loaded.digest, loaded.hidden_digest, loaded.hidden_source),
        "suite": loaded.suite.model_dump(mode="json", by_alias=True),
        "cases": [(c.model_dump(mode="json"), c.line, c.file, c.model_fields_set,
                   type(c.invocation), type(c.user),
                   [(a.model_dump(mode="json"), a.line, a.file, a.model_fields_set,
                     type(a.arg), a.arg, type(a.min_evidence), type(a.breach_evidence))
                    for a in c.expect]) for c in cases],
        "facets": [loaded.case_facets(c) for c in cases],
        "fixtures": loaded.fixtures,
        "noted": [ident(loaded.workspace_case), ident(loaded.folder_fixture_case),
                  ident(loaded.conversation_case), ident(loaded.simulated_case),
                  ident(loaded.unmodelled_user_case)],
        "skills": [(u.case.id, u.hosts, u.found) for u in loaded.skill_uses],
        "thresholds": suite_thresholds(loaded),
        "stored": stored_suite_json(loaded.suite),
    }


def outcome(path: Path) -> Any:
    """The fingerprint of a load, or the error it raised (words, file and line)."""
    try:
        return fingerprint(load_suite_file(path))
    except SuiteError as error:
        return ("error", error.message, error.file, error.line)


def first_load(path: Path) -> Any:
    """What a load with no cache at all gives (both caches set aside, then put back)."""
    aside = Path(".assay-aside")
    shutil.move(".assay", aside)
    try:
        return outcome(path)
    finally:
        shutil.move(aside, ".assay")


def entries() -> list[Path]:
    return sorted(validated.FOLDER.glob("*.json"))


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A load that validates a case of the suite file fails the test: it must be a hit."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cases were validated again: not a hit")

    monkeypatch.setattr(loader, "make_cases", refuse)


def rich_suite(folder: Path) -> Path:
    """A suite with a value of every kind a case holds, and everything of the world a
    load reads: fixtures (tools with a state, a folder), a workspace with a skill, outcome
    checks, an equals_file, graders (a script, a function), conversations, hidden cases."""
    grader_module = f"kept_graders_{next(_modules)}"
    put(folder, "tools.yaml", "tools:\n  - name: add\n    result: 1\nstate: {items: []}\n")
    put(folder, "expected.json", '{"items": []}')
    put(folder, "fixdir/data.txt", "a folder given as it is\n")
    put(folder, "ws/readme.txt", "a project\n")
    put(folder, "ws/.claude/skills/greet/SKILL.md",
        "---\nname: greet\ndescription: Greets in the house style.\n---\n\nSay HELLO.\n")
    put(folder, "graders/check.py", "print('{\"outcome\": \"pass\"}')\n")
    put(folder, f"{grader_module}.py", "def ok(trace):\n    return True\n")
    put(folder, "hidden/h.yaml", "- id: secret-one\n  input: CANARY-7f3e\n"
                                 "  expect: [{equals: CANARY-7f3e}]\n"
                                 "- id: secret-two\n  fixture: ../tools.yaml\n"
                                 "  expect: [settles]\n")
    return put(folder, "s.suite.yaml", f"""\
suite: t/kept@1
title: every kind of value
target: python:agent:run
judge: openai:toy-judge
hidden: hidden
cases:
  - id: plain
    input: {{q: "ünïcode ☃ \\u2028", n: 1.5, tiny: 0.000030517578125, neg: -2,
             deep: [1, [2, {{x: null, "y": true}}]], empty: {{}}}}
    tags: [smoke, "ü"]
    trials: 2
    timeout_s: 3
    model: {{claude: opus, codex: gpt}}
    effort: low
    synthetic: true
    expected: {{total: 3}}
    expect:
      - equals: 3
        path: $.total
      - contains: x
        min_evidence: inferred
      - never_calls: [pay]
        breach_evidence: observed
      - regex: "^a+$"
      - schema: {{type: object, required: [total]}}
      - one_of: [1, 2]
      - calls: {{tool: orders.lookup, args: {{order: A-1}}, times: 1}}
      - judge: {{criteria: "Apologises.", threshold: 0.6}}
      - rubric:
          criteria:
            - {{name: remedy, weight: 2, description: "Offers a remedy."}}
          pass_at: 0.7
      - judge: "Is fair."
        threshold: 0.5
  - id: tools
    input: go
    fixture: tools.yaml
    expect: [{{state: {{equals_file: expected.json}}}}, settles]
  - id: folder
    input: go
    fixture: fixdir
    expect: [{{status: ok}}]
  - id: outcome
    input: edit the readme
    workspace: ws
    invocation: {{mode: explicit, skill: greet}}
    expect:
      - files: {{unchanged: [readme.txt]}}
      - {{file: readme.txt, contains: project}}
      - {{command: "true", exit_code: 0}}
  - id: forbid
    input: hi
    workspace: ws
    invocation: {{mode: none, skill: greet}}
    expect: [{{status: ok}}]
  - id: graded
    input: hi
    expect: [{{grader: ./graders/check.py}}, {{grader: "{grader_module}:ok"}}]
  - id: talk
    turns: [hi, bye]
    expect: [{{contains: bye, turn: 2}}, {{contains: b, turn: any}}]
  - id: sim
    user: {{instructions: be terse, max_turns: 3}}
    expect: [{{status: ok}}]
  - id: bare
    invocation: explicit
    expect: [settles]
""")


def test_a_hit_gives_the_suite_a_first_load_gives(here: Path,
                                                  request: pytest.FixtureRequest) -> None:
    path = rich_suite(here)
    fresh = first_load(path)
    assert isinstance(fresh, dict), fresh
    assert entries() == []
    assert outcome(path) == fresh  # the first load with .assay/: writes the entry
    [entry] = entries()
    request.getfixturevalue("no_validation")
    hit = outcome(path)
    assert hit == fresh
    assert hit["noted"] == ["outcome", "folder", "talk", "sim", "sim"]
    assert [skill[0] for skill in hit["skills"]] == ["outcome", "forbid"]
    assert hit["facets"][5]["graders"].startswith("sha256:")
    assert sorted(hit["fixtures"]) == [str((here / "tools.yaml").resolve())]
    # What the entry holds is data: JSON lines, the arguments as written.
    lines = entry.read_bytes().splitlines()
    assert all(isinstance(json.loads(line), dict | list) for line in lines)
    assert b'"equals_file":"expected.json"' in entry.read_bytes()
    assert b'"items"' not in entry.read_bytes()  # equals_file's document is read afresh


def test_a_hidden_case_is_never_in_the_cache(here: Path) -> None:
    path = rich_suite(here)
    first = outcome(path)
    hit = outcome(path)
    assert hit == first and hit["digests"][1] is not None
    assert [c[0]["id"] for c in hit["cases"]][-2:] == ["secret-one", "secret-two"]
    kept = b"".join(p.read_bytes() for p in Path(".assay/cache").rglob("*") if p.is_file())
    assert entries() and b"CANARY-7f3e" not in kept and b"secret-one" not in kept


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(case_items, max_size=4), st.sampled_from([None, True, False]))
def test_any_suite_loads_from_the_entry_as_the_file_does(here: Path, items: list[Any],
                                                         flow: bool | None) -> None:
    path = here / "s.suite.yaml"
    path.write_text(yaml.safe_dump({"suite": "demo/kept@1", "cases": items}, sort_keys=False,
                                   default_flow_style=flow))
    shutil.rmtree(".assay/cache", ignore_errors=True)
    fresh = first_load(path)
    assert outcome(path) == fresh
    assert bool(entries()) == (not isinstance(fresh, tuple))  # kept only after a success
    assert outcome(path) == fresh


@pytest.mark.parametrize(("change", "text"), [
    ("tools.yaml", None), ("expected.json", '{"items": ["tea"]}'), ("fixdir/data.txt", None),
    ("ws/readme.txt", None), ("ws/.claude/skills/greet/SKILL.md", None),
    ("graders/check.py", None)])
def test_what_a_case_reads_changed_is_what_a_first_load_sees(here: Path, change: str,
                                                             text: str | None) -> None:
    """A fixture, an equals_file, a folder fixture, a workspace, a skill, a grader edited
    since the entry was made: the load gives what a load without it gives."""
    path = rich_suite(here)
    before = outcome(path)
    assert entries()
    put(here, change, text if text is not None else (here / change).read_text() + "# edited\n")
    after = outcome(path)
    assert isinstance(after, dict), after
    assert after == first_load(path)
    assert after != before  # a digest or a facet moved with it


@pytest.mark.parametrize(("remove", "needle"), [
    ("graders/check.py", "grader: ./graders"),
    ("expected.json", "equals_file"),
    ("tools.yaml", "fixture: tools.yaml"),
    ("ws/.claude/skills/greet/SKILL.md", "id: outcome"),  # the case's line
])
def test_a_problem_on_a_hit_is_the_error_of_a_first_load(here: Path, remove: str,
                                                         needle: str) -> None:
    path = rich_suite(here)
    outcome(path)
    assert entries()
    (here / remove).unlink()
    found = outcome(path)
    assert found == first_load(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)
    assert found[0] == "error" and found[2] == str(path) and found[3] == line, found


def test_a_changed_suite_workspace_is_a_miss(here: Path) -> None:
    put(here, "ws/readme.txt", "a project\n")
    path = put(here, "s.suite.yaml",
               "suite: t/ws@1\nworkspace: ws\ncases:\n"
               "  - id: a\n    expect: [{files: {unchanged: [readme.txt]}}]\n")
    before = outcome(path)
    put(here, "ws/readme.txt", "another project\n")
    after = outcome(path)
    assert after == first_load(path) and after["digests"] != before["digests"]


def test_a_change_of_the_validating_code_is_a_miss(here: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The key covers the code that validates and digests: another code, another key."""
    path = rich_suite(here)
    first = outcome(path)
    [entry] = entries()
    key = json.loads(entry.read_bytes().splitlines()[0])["key"]
    monkeypatch.setattr(validated, "_code", "sha256 of some other validating code")
    validations = []
    make_cases = loader.make_cases
    monkeypatch.setattr(loader, "make_cases",
                        lambda *a, **k: validations.append(1) or make_cases(*a, **k))
    assert outcome(path) == first
    assert validations  # validated again, not read back
    [entry] = entries()  # and kept anew, under the new key
    assert json.loads(entry.read_bytes().splitlines()[0])["key"] not in (key, None)
    validations.clear()
    assert outcome(path) == first and not validations


def _damage(entry: Path, how: str) -> None:
    data = entry.read_bytes()
    lines = data.splitlines(keepends=True)
    if how == "cut short":
        entry.write_bytes(data[:len(data) // 2])
    elif how == "no end":
        entry.write_bytes(b"".join(lines[:-1]))
    elif how == "garbage":
        entry.write_bytes(data[:40] + b"\x00\xff not json \x00" + data[60:])
    elif how == "a case edited":
        entry.write_bytes(b"".join([lines[0], lines[1].replace(b'"plain"', b'"plain2"'),
                                    *lines[2:]]))
    elif how in ("a case malformed, the entry resealed", "an unknown check, resealed"):
        block = json.loads(lines[1])
        if how.startswith("a case"):
            block[0][0] = 42
        else:
            block[0][0][2][0][0] = "no_such_check"
        body = json.dumps(block, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        end = json.loads(lines[-1])
        end["end"]["lines"] = hashlib.sha256(body + b"".join(lines[2:-1])).hexdigest()
        entry.write_bytes(lines[0] + body + b"".join(lines[2:-1])
                          + json.dumps(end).encode() + b"\n")
    elif how == "not even a header":
        entry.write_bytes(b"[]\n")


@pytest.mark.parametrize("how", ["cut short", "no end", "garbage", "a case edited",
                                 "a case malformed, the entry resealed",
                                 "an unknown check, resealed", "not even a header"])
def test_a_damaged_entry_is_a_full_load(here: Path, how: str) -> None:
    path = rich_suite(here)
    first = outcome(path)
    [entry] = entries()
    _damage(entry, how)
    assert outcome(path) == first  # no traceback: the file loaded in full
    assert outcome(path) == first  # and kept again


@pytest.mark.parametrize("value", ["2024-01-01", "{1: one}", "!!binary aGk="])
def test_what_json_cannot_give_back_is_not_kept(here: Path, value: str) -> None:
    """A date, a key that is no string, bytes: no entry, the load as before."""
    path = put(here, "s.suite.yaml",
               f"suite: t/odd@1\ncases:\n  - id: a\n    input: {value}\n    expect: [settles]\n")
    first = outcome(path)
    assert first == first_load(path)
    assert entries() == []
    assert outcome(path) == first


def test_no_entry_without_the_assay_folder(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = rich_suite(tmp_path)
    load_suite_file(path)
    load_suite_file(path)
    assert not (tmp_path / ".assay").exists()


def test_the_entry_is_named_like_the_parse_entry_and_keyed_on_the_name_as_given(
        here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cases remember their file as given: the same file named otherwise is another key."""
    path = rich_suite(here)
    relative = outcome(Path("s.suite.yaml"))
    [entry] = entries()
    assert entry.name == next(cache.FOLDER.glob("*.json")).name
    absolute = outcome(path)
    assert absolute == first_load(path) and absolute != relative
    assert outcome(Path("s.suite.yaml")) == relative

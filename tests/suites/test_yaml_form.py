"""YAML suites (SPEC §2): load into the model; bad files name the file, the line and the fault."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.checks import PLANNED, REGISTRY
from assay.errors import SuiteError
from assay.model import Assertion, Evidence
from assay.suites import LoadedSuite

Write = Callable[[str, str], Path]

FULL = """
# a comment line
suite: demo/extraction.table@1
title: Extract tables from documents
target: python:table_agent:extract
call: {tool: extract_table}
trials: 3
pass_mark: 0.8
timeout_s: 20
cases:
  - id: invoice-simple
    input: {document: invoice.csv}
    fixture: fixtures/invoice.csv
    tags: [csv, money]
    expect:
      - status: ok
      - {path: $.rows, type: array}
      - {path: $.rows, min_rows: 3}
      - {path: "$.rows[2].total", equals: "42.00"}
      - not_contains: Traceback
      - {path: $.ratio, approx: {value: 0.5}}
      - {path: $.ratio, approx: {value: 0.5, tol: 0.01}, min_evidence: inferred}
  - id: prompt
    input: What is 2 + 3?
    trials: 5
    timeout_s: 2.5
    model: gpt-x
    effort: low
    synthetic: true
    invocation: explicit
    expect:
      - {equals: 5}
  - id: no-expect
"""


@pytest.fixture
def full(write: Write) -> Path:
    write("evals/fixtures/invoice.csv", "a,b\n1,2\n")
    return write("evals/table.suite.yaml", FULL)


def test_a_yaml_suite_loads_into_the_model(
    full: Path, load: Callable[..., LoadedSuite], line_of: Callable[..., int]
) -> None:
    loaded = load(full)
    s = loaded.suite
    assert loaded.path == full
    assert s.id == "demo/extraction.table@1"
    assert s.title == "Extract tables from documents"
    assert s.target == "python:table_agent:extract"
    assert s.call == {"tool": "extract_table"}
    assert (s.trials, s.pass_mark, s.timeout_s, s.hidden) == (3, 0.8, 20.0, None)
    assert s.source == str(full)
    assert [c.id for c in s.cases] == ["invoice-simple", "prompt", "no-expect"]
    assert all(c.split == "public" for c in s.cases)

    first, second, third = s.cases
    assert first.input == {"document": "invoice.csv"}
    assert first.fixture == "fixtures/invoice.csv"
    assert first.tags == ["csv", "money"]
    assert first.trials is None and first.timeout_s is None
    assert [(a.check, a.arg, a.path, a.min_evidence) for a in first.expect] == [
        ("status", "ok", None, None),
        ("type", "array", "$.rows", None),
        ("min_rows", 3, "$.rows", None),
        ("equals", "42.00", "$.rows[2].total", None),
        ("not_contains", "Traceback", None, None),
        ("approx", {"value": 0.5, "tol": 1e-9}, "$.ratio", None),  # tol defaulted at load
        ("approx", {"value": 0.5, "tol": 0.01}, "$.ratio", Evidence.INFERRED),
    ]
    assert [a.label() for a in first.expect][:4] == [
        "status", "type $.rows", "min_rows $.rows", "equals $.rows[2].total"]

    assert second.input == "What is 2 + 3?"
    assert (second.trials, second.timeout_s) == (5, 2.5)
    assert (second.model, second.effort) == ("gpt-x", "low")
    assert second.synthetic is True and second.invocation == "explicit"
    assert [assertion_tuple(a) for a in second.expect] == [("equals", 5, None, None, None)]
    assert third.expect == [] and third.input is None


def test_cases_and_assertions_remember_file_and_line(
    full: Path, load: Callable[..., LoadedSuite], line_of: Callable[..., int]
) -> None:
    s = load(full).suite
    first = s.cases[0]
    assert (first.file, first.line) == (str(full), line_of(full, "id: invoice-simple"))
    assert (s.cases[1].file, s.cases[1].line) == (str(full), line_of(full, "id: prompt"))
    assert [a.line for a in first.expect] == [
        line_of(full, "status: ok"),
        line_of(full, "type: array"),
        line_of(full, "min_rows: 3"),
        line_of(full, "equals: \"42.00\""),
        line_of(full, "not_contains"),
        line_of(full, "approx", 1),
        line_of(full, "approx", 2),
    ]
    assert {a.file for a in first.expect} == {str(full)}


def test_defaults(write: Write, load: Callable[..., LoadedSuite]) -> None:
    loaded = load(write("a.suite.yaml", """
        suite: ns/name@2
        cases:
          - id: only
            input: hi
            expect: [{contains: hi}]
    """))
    s = loaded.suite
    assert (s.trials, s.pass_mark, s.timeout_s) == (1, 1.0, 60.0)
    assert (s.title, s.target, s.call, s.hidden) == (None, None, None, None)
    case = s.cases[0]
    assert (case.split, case.trials, case.timeout_s, case.fixture) == ("public", None, None, None)
    assert (case.tags, case.synthetic, case.invocation, case.model) == ([], False, None, None)
    assert loaded.digest.startswith("sha256:") and len(loaded.digest) == 7 + 64
    assert (loaded.hidden_digest, loaded.hidden_source, loaded.fixtures) == (None, None, {})


def test_a_suite_with_no_cases_loads_empty(write: Write, load: Callable[..., LoadedSuite]) -> None:
    assert load(write("e.suite.yaml", "suite: ns/empty@1\n")).suite.cases == []
    assert load(write("f.suite.yaml", "suite: ns/empty@1\ncases:\n")).suite.cases == []


def test_digest_follows_content_not_formatting_or_lines(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    a = load(write("a/x.suite.yaml", """
        suite: ns/d@1
        cases:
          - {id: one, input: 1, expect: [{equals: 1}]}
    """))
    b = load(write("b/x.suite.yaml", """
        # same suite, other layout

        suite: ns/d@1
        cases:
          - id: one
            input: 1
            expect:
              - equals: 1
    """))
    c = load(write("c/x.suite.yaml", """
        suite: ns/d@1
        cases:
          - {id: one, input: 1, expect: [{equals: 2}]}
    """))
    assert a.digest == b.digest
    assert a.digest != c.digest


def test_digest_changes_when_a_fixture_file_changes(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    text = """
        suite: ns/fx@1
        cases:
          - {id: one, input: 1, fixture: doc.txt, expect: [{equals: 1}]}
    """
    write("doc.txt", "version 1")
    path = write("x.suite.yaml", text)
    before = load(path).digest
    write("doc.txt", "version 2")
    assert load(path).digest != before


def test_yml_and_a_grader_relative_to_the_suite(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    write("graders/g.py", "print('{\"outcome\": \"pass\"}')\n")
    loaded = load(write("s.suite.yml", """
        suite: ns/g@1
        cases:
          - {id: one, expect: [{grader: ./graders/g.py}]}
    """))
    assert loaded.suite.cases[0].expect[0].arg == "./graders/g.py"


# --- refusals: file, line, message ----------------------------------------------------------

GOOD_CASE = """
suite: demo/bad@1
cases:
  - id: fine
    input: 1
    expect:
      - equals: 1
"""


def bad_case(*expect_lines: str, extra: str = "") -> str:
    body = "".join(f"      - {line}\n" for line in expect_lines)
    return GOOD_CASE.lstrip("\n") + f"  - id: broken\n{extra}    input: 2\n    expect:\n" + body


BAD_ASSERTIONS: list[tuple[str, str, str]] = [
    # (assertion line, needle for the line, expected message)
    ("equls: 2", "equls", "unknown assertion 'equls' (did you mean 'equals'?)"),
    ("{path: $.x, tpye: string}", "tpye", "unknown assertion 'tpye' (did you mean 'type'?)"),
    ("frobnicate_everything: 2", "frobnicate", "unknown assertion 'frobnicate_everything'"),
    ("status: fine", "status: fine",
     "status: expects one of ok, error, refused, timeout, got \"fine\""),
    ("{path: $.x, type: float}", "float",
     "type: expects one of string, number, integer, boolean, object, array, null, got \"float\""),
    ("{path: $.rows, min_rows: -1}", "min_rows", "min_rows: expects a whole number ≥ 0, got -1"),
    ("{path: $.rows, max_rows: lots}", "max_rows",
     "max_rows: expects a whole number ≥ 0, got \"lots\""),
    ("contains: 3", "contains", "contains: expects a string, got integer"),
    ("regex: '(unclosed'", "regex",
     "regex: bad regular expression: missing ), unterminated subpattern at position 0"),
    ("schema: {type: nope}", "schema", "schema: not a valid JSON Schema: "),
    ("one_of: []", "one_of", "one_of: expects a non-empty list of allowed values"),
    ("approx: {tol: 0.1}", "approx", "approx: expects {value: NUMBER, tol: NUMBER}"),
    ("grader: ./graders/missing.py", "grader",
     "grader: grader script './graders/missing.py' does not exist"),
    ("{path: '$.[', equals: 1}", "$.[", "bad JSONPath '$.[': "),
    ("{path: $.x, equals: 1, threshold: 0.5}", "threshold",
     "equals: threshold applies to quality checks only"),
    ("{path: $.x, equals: 1, min_evidence: unavailable}", "unavailable",
     "equals: min_evidence cannot be unavailable"),
    ("{path: $.x, status: ok}", "status: ok", "status takes no path"),
    ("{path: $.x, equals: 1, contains: y}", "contains: y",
     "one assertion names one check; found equals, contains"),
    ("{path: $.x}", "{path: $.x}", "the assertion names no check (only modifiers: path)"),
    ("42", "- 42", "an assertion is a mapping such as {equals: 3}, not int"),
    ("{equals: 1, threshold: 2}", "threshold: 2",
     "threshold: Input should be less than or equal to 1"),
    ("{equals: 1, min_evidence: seen}", "seen",
     "min_evidence: Input should be 'observed', 'inferred' or 'unavailable'"),
    ("{calls: refund, breach_evidence: observed}", "breach_evidence",
     "calls: breach_evidence applies only to the checks that fail on a breach (calls_before, "
     "costs_at_most, never_activates_skill, never_calls, within_steps)"),
    ("{never_calls: shell, breach_evidence: unavailable}", "unavailable",
     "never_calls: breach_evidence cannot be unavailable"),
    ("{never_calls: shell, breach_evidence: seen}", "seen",
     "breach_evidence: Input should be 'observed', 'inferred' or 'unavailable'"),
]


@pytest.mark.parametrize(("line", "needle", "message"), BAD_ASSERTIONS,
                         ids=[b[0] for b in BAD_ASSERTIONS])
def test_a_bad_assertion_is_refused_at_its_line(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    line: str,
    needle: str,
    message: str,
) -> None:
    path = write("evals/bad.suite.yaml", bad_case(line))
    err = refused(path)
    assert err.file == str(path)
    assert err.line == line_of(path, needle)
    assert err.message.startswith(message), err.message
    assert str(err) == f"{path}:{err.line}: {err.message}"


def test_a_suite_error_carries_no_traceback_chain(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    err = refused(write("bad.suite.yaml", bad_case("equls: 2")))
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__
    assert err.exit_code == 2


def test_an_error_from_a_pydantic_failure_carries_no_traceback_chain_either(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    err = refused(write("bad.suite.yaml", "suite: a/b@1\ntrials: many\n"))
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__


def test_an_unknown_assertion_far_from_any_name_gets_no_hint(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    err = refused(write("bad.suite.yaml", bad_case("zzzzqqqq: 1")))
    assert err.message == "unknown assertion 'zzzzqqqq'"


def test_a_planned_assertion_is_refused_as_not_yet_available(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(PLANNED, "reads_minds", "planned for 0.3")
    path = write("bad.suite.yaml", bad_case("reads_minds: true"))
    err = refused(path)
    assert err.line == line_of(path, "reads_minds")
    assert err.message == ("assertion 'reads_minds' is in the spec but not available in this "
                           "version of assay (planned for 0.3)")


def test_a_typo_of_a_planned_assertion_suggests_it(
    write: Write, refused: Callable[..., SuiteError], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PLANNED, "reads_minds", "planned for 0.3")
    err = refused(write("bad.suite.yaml", bad_case("reads_mind: true")))
    assert err.message == "unknown assertion 'reads_mind' (did you mean 'reads_minds'?)"


def test_never_calls_is_either_available_or_refused_by_name(
    write: Write, refused: Callable[..., SuiteError], load: Callable[..., LoadedSuite]
) -> None:
    # SPEC §3 names never_calls; until the structural family lands the loader must refuse
    # it by name (PLANNED is empty in this version, so it is reported as unknown).
    path = write("nc.suite.yaml", bad_case("never_calls: ['erp.*']"))
    if "never_calls" in REGISTRY:
        case = load(path).suite.cases[1]
        assert case.expect[0].check == "never_calls"
        return
    err = refused(path)
    if "never_calls" in PLANNED:
        assert err.message.startswith("assertion 'never_calls' is in the spec but not available")
    else:
        assert err.message.startswith("unknown assertion 'never_calls'")


def test_duplicate_case_id_names_the_second_one(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("dup.suite.yaml", """
        suite: demo/dup@1
        cases:
          - id: same
            input: 1
          - id: other
          - id: same
            input: 2
    """)
    err = refused(path)
    assert err.file == str(path)
    assert err.line == line_of(path, "id: same", 2)
    assert err.message == "duplicate case id 'same'"


@pytest.mark.parametrize("bad_id", ["Demo/x@1", "demo/x", "demo@1", "demo/x@v1", "/x@1",
                                    "demo/x@1/extra", "demo x/y@1"])
def test_a_malformed_suite_id_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int], bad_id: str
) -> None:
    path = write("id.suite.yaml", f"""
        title: t
        suite: "{bad_id}"
        cases: []
    """)
    err = refused(path)
    assert err.line == line_of(path, "suite:")
    assert err.message == (f"suite: suite id {bad_id!r} is not of the form namespace/name@major "
                           "(lower case, e.g. demo/extraction.table@1)")


def test_a_missing_suite_key_is_refused(write: Write, refused: Callable[..., SuiteError]) -> None:
    err = refused(write("nosuite.suite.yaml", "title: t\ncases: []\n"))
    assert err.line == 1
    assert err.message == "missing required key 'suite' (namespace/name@major)"


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", ""])
def test_a_file_that_is_not_a_mapping_is_refused(
    write: Write, refused: Callable[..., SuiteError], text: str
) -> None:
    err = refused(write("list.suite.yaml", text))
    assert err.message == "a suite file is a mapping with suite: and cases:"


def test_cases_that_are_not_a_list_are_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("c.suite.yaml", "suite: a/b@1\ncases:\n  one: {id: x}\n")
    err = refused(path)
    assert (err.line, err.message) == (line_of(path, "one:"), "cases is a list")


def test_a_case_that_is_not_a_mapping_is_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("c.suite.yaml", "suite: a/b@1\ncases:\n  - id: ok\n  - just-a-name\n")
    err = refused(path)
    assert err.line == line_of(path, "just-a-name")
    assert err.message == "a case is a mapping with id, input and expect"


def test_expect_that_is_not_a_list_is_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("c.suite.yaml", "suite: a/b@1\ncases:\n  - id: x\n    expect:\n      equals: 1\n")
    err = refused(path)
    assert (err.line, err.message) == (line_of(path, "equals: 1"), "expect is a list of assertions")


def test_a_case_without_id_is_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("c.suite.yaml", "suite: a/b@1\ncases:\n  - input: 1\n    expect: []\n")
    err = refused(path)
    assert (err.line, err.message) == (line_of(path, "input: 1"), "missing required key 'id'")


def test_a_missing_fixture_path_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("f.suite.yaml", bad_case("equals: 2", extra="    fixture: fixtures/nope.csv\n"))
    err = refused(path)
    assert err.line == line_of(path, "fixtures/nope.csv")
    assert err.message == "fixture 'fixtures/nope.csv' does not exist"


def test_a_fixture_is_resolved_relative_to_the_suite_file_not_the_cwd(
    write: Write, load: Callable[..., LoadedSuite], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("deep/dir/fixtures/doc.md", "# doc\n")
    path = write("deep/dir/x.suite.yaml", bad_case("equals: 2", extra="    fixture: fixtures/\n"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = load(path)
    case = loaded.suite.cases[1]
    assert loaded.fixture_path(case) == (tmp_path / "deep/dir/fixtures").resolve()
    assert loaded.fixture_path(loaded.suite.cases[0]) is None
    assert loaded.fixtures == {}  # a folder is given as is, not parsed


def test_a_missing_hidden_folder_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("h.suite.yaml", "suite: a/b@1\ntitle: x\nhidden: samples/\ncases: []\n")
    err = refused(path)
    assert err.file == str(path)
    assert err.line == line_of(path, "hidden:")
    assert err.message == "hidden folder 'samples/' does not exist"


@pytest.mark.parametrize(
    ("key_line", "needle", "message"),
    [
        ("trials: many", "trials:", "trials: Input should be a valid integer"),
        ("trials: 0", "trials:", "trials: Input should be greater than or equal to 1"),
        ("pass_mark: 1.5", "pass_mark:", "pass_mark: Input should be less than or equal to 1"),
        ("timeout_s: -1", "timeout_s:", "timeout_s: Input should be greater than 0"),
        ("call: extract", "call:", "call: Input should be a valid dictionary"),
    ],
)
def test_a_wrong_top_level_value_type_is_refused_at_its_key(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    key_line: str,
    needle: str,
    message: str,
) -> None:
    path = write("t.suite.yaml", f"suite: a/b@1\ntitle: x\n{key_line}\ncases:\n  - id: one\n")
    err = refused(path)
    assert err.line == line_of(path, needle)
    assert err.message.startswith(message), err.message


@pytest.mark.parametrize(
    ("extra", "needle", "message"),
    [
        ("    trials: many\n", "trials: many", "trials: Input should be a valid integer"),
        ("    timeout_s: 0\n", "timeout_s", "timeout_s: Input should be greater than 0"),
        ("    invocation: sometimes\n", "sometimes",
         "invocation: 'sometimes' is not a mode: automatic, explicit or none"),
        ("    tags: csv\n", "tags", "tags: Input should be a valid list"),
        ("    synthetic: perhaps\n", "perhaps", "synthetic: Input should be a valid boolean"),
        ("    colour: red\n", "colour", "unknown key 'colour'"),
    ],
)
def test_a_wrong_case_value_is_refused_at_its_line(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    extra: str,
    needle: str,
    message: str,
) -> None:
    path = write("t.suite.yaml", bad_case("equals: 2", extra=extra))
    err = refused(path)
    assert err.line == line_of(path, needle)
    assert err.message.startswith(message), err.message


def test_an_unknown_case_key_with_a_block_value_names_the_key_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("k.suite.yaml", "suite: a/b@1\ncases:\n  - id: a\n    colour:\n      - red\n")
    err = refused(path)
    assert err.message == "unknown key 'colour'"
    assert err.line == line_of(path, "colour:")


def test_an_unknown_top_level_key_with_a_block_value_names_the_key_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("k.suite.yaml", "suite: a/b@1\nextras:\n  - red\n  - blue\ncases: []\n")
    err = refused(path)
    assert (err.line, err.message) == (line_of(path, "extras:"), "unknown key 'extras'")


def test_an_unknown_top_level_key_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("k.suite.yaml", "suite: a/b@1\ntitle: x\ntrails: 3\ncases: []\n")
    err = refused(path)
    assert err.line == line_of(path, "trails:")
    assert err.message == "unknown key 'trails'"


def test_a_yaml_syntax_error_names_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("syntax.suite.yaml", """
        suite: a/b@1
        cases:
          - id: one
            input: [1, 2
            expect: []
    """)
    err = refused(path)
    assert err.file == str(path)
    assert err.message.startswith("not valid YAML: ")
    # libyaml notices the unclosed flow sequence where the next key begins.
    assert err.line in (line_of(path, "input: [1, 2"), line_of(path, "expect: []"))


def test_a_yaml_syntax_error_on_a_bad_indent_names_its_line(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("indent.suite.yaml", "suite: a/b@1\ncases:\n  - id: one\n   bad: indent\n")
    err = refused(path)
    assert err.line == 4
    assert err.message.startswith("not valid YAML")


def test_a_tab_indented_file_is_a_yaml_error_not_a_crash(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("tab.suite.yaml", "suite: a/b@1\ncases:\n\t- id: one\n")
    err = refused(path)
    assert err.line == 3
    assert err.message.startswith("not valid YAML")


def test_a_file_that_is_not_utf8_is_refused(
    tmp_path: Path, refused: Callable[..., SuiteError]
) -> None:
    path = tmp_path / "latin.suite.yaml"
    path.write_bytes("suite: a/b@1\ntitle: caf\xe9\n".encode("latin-1"))
    err = refused(path)
    assert err.file == str(path)
    assert err.message.startswith("cannot read the file")


def test_the_first_error_in_file_order_is_reported(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("two.suite.yaml", bad_case("equls: 1", "{path: $.rows, min_rows: -1}"))
    err = refused(path)
    assert err.line == line_of(path, "equls")


def test_flow_style_cases_get_their_own_lines(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("flow.suite.yaml", """
        suite: a/b@1
        cases:
          - {id: a, expect: [{equals: 1}]}
          - {id: b, expect: [{equals: 1}, {contians: x}]}
    """)
    err = refused(path)
    assert (err.line, err.message) == (
        line_of(path, "contians"), "unknown assertion 'contians' (did you mean 'contains'?)")


def assertion_tuple(a: Assertion) -> tuple[Any, ...]:
    return (a.check, a.arg, a.path, a.min_evidence, a.threshold)


def test_a_key_written_twice_is_refused_at_the_second_one(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("twice.suite.yaml", """
        suite: a/b@1
        cases:
          - id: a
            expect: [{equals: 1}]
            expect: []
    """)
    err = refused(path)
    assert err.line == line_of(path, "expect: []")
    assert "expect" in err.message


def test_a_loaded_suite_grades_with_its_evidence_rules(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    from assay.checks import grade_trace
    from assay.model import Trace

    case = load(write("e.suite.yaml", """
        suite: ns/ev@1
        cases:
          - id: a
            expect:
              - {path: $.n, equals: 3}
              - {path: $.n, equals: 3, min_evidence: inferred}
              - {path: $.n, equals: 4, min_evidence: inferred}
    """)).suite.cases[0]
    inferred = Trace(output={"n": 3.0}, evidence={"output": "inferred"})
    observed = Trace(output={"n": 3.0}, evidence={"output": "observed"})
    unavailable = Trace(output={"n": 3.0}, evidence={"output": "unavailable"})
    assert [v.outcome for v in grade_trace(case.expect, inferred)] == [
        "inconclusive", "pass", "fail"]
    assert [v.outcome for v in grade_trace(case.expect, observed)] == ["pass", "pass", "fail"]
    assert [v.outcome for v in grade_trace(case.expect, unavailable)] == ["inconclusive"] * 3


def test_a_hidden_split_written_in_the_public_file_is_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("c.suite.yaml", "suite: a/b@1\ncases:\n  - id: x\n    split: hidden\n")
    err = refused(path)
    assert err.line == line_of(path, "split: hidden")
    assert err.message.startswith("a case written in the suite file is public")


def test_a_per_host_model_map_loads_and_resolves_per_harness(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    path = write("m.suite.yaml", """
        suite: ns/pins@1
        cases:
          - id: mapped
            model: {claude: sonnet-x, codex: gpt-y, openai: qwen-z}
            effort:
              codex: high
          - id: one-name
            model: gpt-x
            effort: low
    """)
    mapped, one = load(path).suite.cases
    assert [mapped.model_for(h) for h in ("claude", "codex", "openai", "python")] == [
        "sonnet-x", "gpt-y", "qwen-z", None]
    assert (mapped.effort_for("codex"), mapped.effort_for("claude")) == ("high", None)
    assert (one.model_for("python"), one.model_for("claude"), one.effort_for("codex")) == (
        "gpt-x", "gpt-x", "low")


@pytest.mark.parametrize(("pin", "needle", "message"), [
    ("model:\n      claude: sonnet-x\n      claud: sonnet-y", "claud: sonnet-y",
     "model: 'claud' is not a host a pin map can name (hosts: claude, codex, openai)"),
    ("effort: {codex: high, python: low}", "effort:",
     "effort: 'python' is not a host a pin map can name (hosts: claude, codex, openai)"),
    ("model:\n      codex: ''", "codex: ''", "model: the pin for codex must be a non-empty name"),
    ("model: {}", "model:", "model: an empty map pins nothing"),
    ("model: [gpt-x]", "model:", "model: is a name, or a map from host to name"),
])
def test_a_bad_pin_map_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int],
    pin: str, needle: str, message: str,
) -> None:
    path = write("bad.suite.yaml",
                 "suite: ns/pins@1\ncases:\n  - id: a\n    input: hi\n    " + pin + "\n")
    err = refused(path)
    assert (err.file, err.line) == (str(path), line_of(path, needle))
    assert err.message.startswith(message), err.message


@pytest.mark.parametrize("value, message", [
    ("2024-13-45", "month must be in 1..12"),  # a date that does not exist
    ("2001-12-14t21:59:43.10+25:00", "offset must be a timedelta"),  # a zone past a day
])
def test_a_value_yaml_cannot_make_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int],
    value: str, message: str,
) -> None:
    path = write("evals/bad.suite.yaml", f"""
        suite: demo/dates@1
        cases:
          - id: when
            input: {{at: {value}}}
            expect: [nonempty]
        """)
    err = refused(path)
    assert err.line == line_of(path, value)
    assert err.message.startswith("not a valid value: " + message), err.message
    assert err.exit_code == 2


def test_a_hidden_files_bad_value_keeps_its_words_back(tmp_path: Path) -> None:
    from assay.suites.marks import load_marked

    path = tmp_path / "secret.yaml"
    path.write_text("- id: h\n  input: 2024-13-45\n")
    with pytest.raises(SuiteError) as caught:
        load_marked(path, secret=True)
    assert (caught.value.line, caught.value.message) == (2, "not a valid value")


@pytest.mark.parametrize(("value", "message"), [
    ('[""]', "ask_tools.0: String should have at least 1 character"),
    ("ask_user", "ask_tools: Input should be a valid list"),
])
def test_ask_tools_is_a_list_of_tool_names(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int],
    value: str, message: str,
) -> None:
    path = write("a.suite.yaml", f"suite: a/b@1\nask_tools: {value}\ncases: []\n")
    err = refused(path)
    assert (err.line, err.message) == (line_of(path, "ask_tools:"), message)


@pytest.mark.parametrize(("where", "text", "needle"), [
    ("suite", "timeout_s: .inf\n", "timeout_s:"),
    ("case", "", "input: 123456789012345678901234567890"),
    ("assertion", "", "equals: -9007199254740993"),
])
def test_a_number_no_record_can_hold_is_refused_at_its_line(
        write, refused, line_of, where: str, text: str, needle: str) -> None:
    """YAML reads an infinity or a 30-digit integer; the run's digests (RFC 8785) cannot
    hold one. It was a traceback from the digest; it is the file, the line and why."""
    body = {"suite": "", "case": "    input: 123456789012345678901234567890\n",
            "assertion": ""}[where]
    expect = "[{equals: -9007199254740993}]" if where == "assertion" else "[{equals: hi}]"
    path = write("evals/s.suite.yaml",
                 f"suite: t/num@1\n{text}cases:\n  - id: ok\n    input: hi\n"
                 f"    expect: [{{equals: hi}}]\n  - id: odd\n"
                 f"{body or '    input: hi' + chr(10)}    expect: {expect}\n")
    error = refused(path)
    assert error.file == str(path)
    want = line_of(path, needle) if where == "suite" else line_of(path, "id: odd")
    assert error.line == want
    assert "cannot keep exactly" in str(error)
    assert (where == "suite") == ("timeout_s" in str(error))
    assert (where != "suite") == ("case 'odd'" in str(error))


@pytest.mark.parametrize("value", ["123456789012345678901234567890", "{CANARY-8f3: .inf}"])
def test_a_hidden_case_with_such_a_number_is_refused_without_its_content(
        write, refused, value: str) -> None:
    """Past 2**53 (the digest refuses it) or an infinity (the model does, decision 0086)."""
    write("evals/hidden/h.yaml", f"id: CANARY-7e1\ninput: {value}\n"
                                 "expect: [{equals: CANARY-7e2}]\n")
    path = write("evals/s.suite.yaml", "suite: t/num@1\nhidden: hidden/\ncases:\n"
                                       "  - id: ok\n    input: hi\n    expect: [{equals: hi}]\n")
    error = str(refused(path))
    assert "(details withheld: hidden case)" in error
    assert "CANARY" not in error and "1234567890" not in error


@pytest.mark.parametrize(("body", "needle", "field"), [
    ("    input: {x: .inf}\n    expect: [{equals: hi}]\n", "input: {x", "input"),
    ("    input: [1, .nan]\n    expect: [{equals: hi}]\n", "input: [1", "input"),
    ("    input: hi\n    expected: -.inf\n    expect: [{equals: hi}]\n", "expected:", "expected"),
    ("    input: hi\n    expect:\n      - equals: {a: -.inf}\n", "equals: {a: -.inf}",
     "expect: the argument of equals holds"),
    ("    input: hi\n    timeout_s: .inf\n    expect: [{equals: hi}]\n", "timeout_s:", "timeout_s"),
])
def test_an_infinity_or_nan_in_a_case_is_refused_at_its_line(
        write, refused, line_of, body: str, needle: str, field: str) -> None:
    """JSON has no infinity and no NaN: the case's JSON wrote null, so a case holding
    ``.inf`` had the digest of the same case holding null. Refused, at the value's line."""
    path = write("evals/s.suite.yaml",
                 "suite: t/num@1\ncases:\n  - id: ok\n    input: hi\n"
                 f"    expect: [{{equals: hi}}]\n  - id: odd\n{body}")
    error = refused(path)
    assert (error.file, error.line, error.exit_code) == (str(path), line_of(path, needle), 2)
    assert error.message.startswith(field if " " in field else f"{field}: "), error.message
    assert "finite" in error.message or "infinity or a NaN" in error.message


def test_a_suite_with_an_infinity_no_longer_digests_as_the_suite_with_null(
        write, refused) -> None:
    from assay.suites import load_suite_file

    null = load_suite_file(write("evals/a.suite.yaml", "suite: t/num@1\ncases:\n"
                                 "  - id: one\n    input: {x: null}\n"))
    assert null.digest.startswith("sha256:")
    error = refused(write("evals/b.suite.yaml", "suite: t/num@1\ncases:\n"
                          "  - id: one\n    input: {x: .inf}\n"))
    assert "infinity or a NaN" in error.message


def test_a_python_suites_nan_is_refused_at_its_line(tmp_path: Path) -> None:
    from assay.suites import load_suite_file

    path = tmp_path / "p_eval.py"
    path.write_text("from assay import Case, Suite, expect\n"
                    "suite = Suite(id='t/p@1', target='python:x:y', cases=[\n"
                    "    Case(id='a', input='x',\n"
                    "         expect=[expect.equals(float('nan'))])])\n")
    with pytest.raises(SuiteError) as caught:
        load_suite_file(path)
    assert caught.value.line == 3  # the case's: a Python case remembers where it was made
    assert "the argument of equals holds an infinity or a NaN" in caught.value.message

"""Python suites (``*_eval.py``): the same model as YAML, errors at the user's .py line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.checks import grade_trace
from assay.errors import SuiteError
from assay.model import Trace
from assay.suites import LoadedSuite

Write = Callable[[str, str], Path]

YAML_FORM = """
suite: demo/same@1
title: The same suite twice
target: python:agent:run
call: {tool: extract}
trials: 3
pass_mark: 0.5
timeout_s: 30
cases:
  - id: first
    input: {document: a.csv}
    fixture: fixtures/a.csv
    tags: [csv]
    expect:
      - status: ok
      - {path: $.rows, type: array}
      - {path: $.rows, min_rows: 1}
      - {path: $.rows, max_rows: 9}
      - {path: "$.rows[0].total", equals: "42.00"}
      - {path: $.note, contains: total}
      - {path: $.note, icontains: TOTAL}
      - not_contains: Traceback
      - {path: $.code, regex: "^[A-Z]{3}$"}
      - {path: $.rows, schema: {type: array}}
      - {path: $.unit, one_of: [EUR, USD]}
      - {path: $.ratio, approx: {value: 0.5, tol: 0.01}}
      - {path: $.ratio, approx: {value: 0.5}, min_evidence: inferred}
      - grader: ./graders/g.py
  - id: second
    input: What is 2 + 3?
    trials: 5
    model: gpt-x
    synthetic: true
    invocation: none
    expect:
      - equals: 5
"""

PY_FORM = """
from assay import Case, Suite, expect

suite = Suite(
    id="demo/same@1",
    title="The same suite twice",
    target="python:agent:run",
    call={"tool": "extract"},
    trials=3,
    pass_mark=0.5,
    timeout_s=30,
    cases=[
        Case(id="first", input={"document": "a.csv"}, fixture="fixtures/a.csv", tags=["csv"],
             expect=[
                 expect.status("ok"),
                 expect.type("array", path="$.rows"),
                 expect.min_rows(1, path="$.rows"),
                 expect.max_rows(9, path="$.rows"),
                 expect.equals("42.00", path="$.rows[0].total"),
                 expect.contains("total", path="$.note"),
                 expect.icontains("TOTAL", path="$.note"),
                 expect.not_contains("Traceback"),
                 expect.regex("^[A-Z]{3}$", path="$.code"),
                 expect.schema({"type": "array"}, path="$.rows"),
                 expect.one_of(["EUR", "USD"], path="$.unit"),
                 expect.approx(0.5, 0.01, path="$.ratio"),
                 expect.check("approx", {"value": 0.5}, path="$.ratio",
                              min_evidence="inferred"),
                 expect.grader("./graders/g.py"),
             ]),
        Case(id="second", input="What is 2 + 3?", trials=5, model="gpt-x", synthetic=True,
             invocation="none", expect=[{"equals": 5}]),
    ],
)
"""

GRADER = "import json, sys\nt = json.load(sys.stdin)\nprint(json.dumps({'outcome': 'pass'}))\n"


@pytest.fixture
def both(write: Write) -> tuple[Path, Path]:
    write("evals/fixtures/a.csv", "total\n42.00\n")
    write("evals/graders/g.py", GRADER)
    return write("evals/same.suite.yaml", YAML_FORM), write("evals/same_eval.py", PY_FORM)


def test_python_and_yaml_forms_load_into_the_same_suite(
    both: tuple[Path, Path],
    load: Callable[..., LoadedSuite],
    places_stripped: Callable[[Any], Any],
) -> None:
    from_yaml, from_py = (load(p) for p in both)
    y = from_yaml.suite.model_dump(mode="json", by_alias=True)
    p = from_py.suite.model_dump(mode="json", by_alias=True)
    assert places_stripped(p) == places_stripped(y)
    assert y["suite"] == "demo/same@1"
    assert len(y["cases"]) == 2 and len(y["cases"][0]["expect"]) == 14
    assert from_py.digest == from_yaml.digest
    assert from_py.suite.source == str(both[1])
    assert from_yaml.suite.source == str(both[0])


def test_python_form_digest_differs_when_content_differs(
    both: tuple[Path, Path], write: Write, load: Callable[..., LoadedSuite]
) -> None:
    changed = write("evals/changed_eval.py", PY_FORM.replace('equals("42.00"', 'equals("42.01"'))
    assert load(changed).digest != load(both[0]).digest


def test_python_form_cases_remember_their_lines(
    both: tuple[Path, Path], load: Callable[..., LoadedSuite], line_of: Callable[..., int]
) -> None:
    path = both[1]
    suite = load(path).suite
    first, second = suite.cases
    assert Path(first.file or "").resolve() == path.resolve()
    assert first.line == line_of(path, 'Case(id="first"')
    assert second.line == line_of(path, 'Case(id="second"')
    assert first.expect[0].line == line_of(path, 'expect.status("ok")')
    assert first.expect[12].line == line_of(path, 'expect.check("approx"')
    assert Path(first.expect[0].file or "").resolve() == path.resolve()


def test_python_form_defaults_match_yaml(write: Write, load: Callable[..., LoadedSuite]) -> None:
    path = write("d_eval.py", """
        import assay

        suite = assay.Suite(id="ns/defaults@1", cases=[assay.Case(id="a")])
    """)
    s = load(path).suite
    assert (s.trials, s.pass_mark, s.timeout_s, s.hidden) == (1, 1.0, 60.0, None)
    assert s.cases[0].split == "public" and s.cases[0].expect == []


def test_suite_keyword_alias_is_accepted(write: Write, load: Callable[..., LoadedSuite]) -> None:
    path = write("alias_eval.py", """
        import assay

        suite = assay.Suite(suite="ns/alias@1")
    """)
    assert load(path).suite.id == "ns/alias@1"


def test_python_form_graders_run_relative_to_the_py_file(
    both: tuple[Path, Path],
    load: Callable[..., LoadedSuite],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    suite = load(both[1]).suite
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    grader = [a for a in suite.cases[0].expect if a.check == "grader"]
    trace = Trace(output=1, evidence={"output": "observed"})
    assert [v.outcome for v in grade_trace(grader, trace)] == ["pass"]


def test_python_form_mapping_grader_runs_relative_to_the_py_file(
    write: Write, load: Callable[..., LoadedSuite], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    write("suite/g.py", GRADER)
    path = write("suite/m_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/m@1", cases=[Case(id="a", expect=[{"grader": "./g.py"}])])
    """)
    suite = load(path).suite  # loads: the script exists beside the .py file
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    trace = Trace(output=1, evidence={"output": "observed"})
    verdicts = grade_trace(suite.cases[0].expect, trace)
    assert [(v.outcome, v.note) for v in verdicts] == [("pass", "")]


def test_python_form_hidden_folder_is_relative_to_the_py_file(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    write("evals/hidden/h.yaml", "id: h1\ninput: 1\nexpect: [{equals: 1}]\n")
    path = write("evals/h_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/h@1", hidden="hidden/", cases=[Case(id="p")])
    """)
    loaded = load(path)
    assert [(c.id, c.split) for c in loaded.suite.cases] == [("p", "public"), ("h1", "hidden")]
    assert loaded.hidden_source == "samples"


def test_a_python_suite_can_import_a_sibling_module(
    write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    name = "suite_helper_" + tmp_path.name.replace("-", "_")
    write(f"evals/{name}.py", "IDS = ['x', 'y']\n")
    path = write("evals/sib_eval.py", f"""
        from assay import Case, Suite
        from {name} import IDS

        suite = Suite(id="ns/sib@1", cases=[Case(id=i) for i in IDS])
    """)
    assert [c.id for c in load(path).suite.cases] == ["x", "y"]


# --- errors -----------------------------------------------------------------------------


def test_an_unknown_assertion_via_expect_check_names_the_py_file_and_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("u_eval.py", """
        from assay import Case, Suite, expect

        suite = Suite(
            id="ns/u@1",
            cases=[
                Case(id="a", expect=[
                    expect.equals(1),
                    expect.check("nope"),
                ]),
            ],
        )
    """)
    err = refused(path)
    assert Path(err.file or "").resolve() == path.resolve()
    assert err.line == line_of(path, 'expect.check("nope")')
    assert err.message == "unknown assertion 'nope'"


def test_an_error_in_a_python_case_names_the_file_as_it_was_given(
    write: Write, refused: Callable[..., SuiteError], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a YAML suite's errors do: `evals/x_eval.py:9: …`, not the absolute path
    # Python keeps for the case's frame.
    write("evals/r_eval.py", """
        from assay import Case, Suite, expect

        suite = Suite(id="ns/r@1", cases=[Case(id="a", expect=[expect.contains(3)])])
    """)
    monkeypatch.chdir(tmp_path)
    err = refused(Path("evals/r_eval.py"))
    assert (err.file, err.line) == ("evals/r_eval.py", 3)
    assert str(err).startswith("evals/r_eval.py:3: contains: ")


def test_a_typo_via_expect_check_gets_a_hint(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("t_eval.py", """
        from assay import Case, Suite, expect

        suite = Suite(id="ns/t@1", cases=[Case(id="a", expect=[expect.check("equls", 1)])])
    """)
    assert refused(path).message == "unknown assertion 'equls' (did you mean 'equals'?)"


def test_a_bad_helper_argument_names_the_line_of_the_helper(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("b_eval.py", """
        from assay import Case, Suite, expect

        suite = Suite(id="ns/b@1", cases=[
            Case(id="a",
                 expect=[expect.type("float", path="$.x")]),
            Case(id="b",
                 expect=[expect.min_rows(-1, path="$.rows")]),
        ])
    """)
    err = refused(path)
    assert err.line == line_of(path, 'expect.type("float"')
    assert err.message.startswith("type: expects one of string, number")


def test_a_bad_jsonpath_in_a_helper_names_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("p_eval.py", """
        from assay import Case, Suite, expect

        suite = Suite(id="ns/p@1", cases=[
            Case(id="a", expect=[expect.equals(1)]),
            Case(id="b", expect=[expect.equals(1, path="$.[")]),
        ])
    """)
    err = refused(path)
    assert err.line == line_of(path, 'path="$.["')
    assert err.message.startswith("bad JSONPath '$.['")


def test_a_mapping_assertion_in_a_python_case_is_refused_at_the_case_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("m_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/m@1", cases=[
            Case(id="a"),
            Case(id="b", expect=[{"contians": "x"}]),
        ])
    """)
    err = refused(path)
    assert err.line == line_of(path, 'Case(id="b"')
    assert err.message == "unknown assertion 'contians' (did you mean 'contains'?)"


def test_a_validation_error_in_case_names_the_line_of_the_call(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("v_eval.py", """
        from assay import Case, Suite

        suite = Suite(
            id="ns/v@1",
            cases=[
                Case(id="fine"),
                Case(
                    id="bad",
                    trials=0,
                ),
            ],
        )
    """)
    err = refused(path)
    assert Path(err.file or "").resolve() == path.resolve()
    assert err.line == line_of(path, "Case(", 2)
    assert err.message == "Case: trials: Input should be greater than or equal to 1"
    assert err.__cause__ is None


def test_an_unknown_case_keyword_is_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("k_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/k@1", cases=[
            Case(id="a", colour="red"),
        ])
    """)
    err = refused(path)
    assert err.line == line_of(path, "colour")
    assert err.message == "Case: unknown key 'colour'"


def test_a_malformed_suite_id_in_python_names_the_suite_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("i_eval.py", """
        from assay import Suite

        X = 1
        suite = Suite(id="Not An Id")
    """)
    err = refused(path)
    assert err.line == line_of(path, "suite = Suite(")
    assert err.message.startswith("Suite: suite: suite id 'Not An Id' is not of the form") or \
        err.message.startswith("Suite: id: suite id 'Not An Id' is not of the form")


def test_a_module_that_raises_names_the_raising_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("r_eval.py", """
        from assay import Suite

        def build():
            raise RuntimeError("cannot build the cases")

        suite = build()
    """)
    err = refused(path)
    assert Path(err.file or "").resolve() == path.resolve()
    assert err.line == line_of(path, "raise RuntimeError")
    assert err.message == "RuntimeError: cannot build the cases"
    assert err.__cause__ is None and err.__suppress_context__


def test_a_module_with_a_syntax_error_is_refused_not_a_traceback(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("s_eval.py", "from assay import Suite\nsuite = Suite(id=\n")
    err = refused(path)
    assert Path(err.file or "").resolve() == path.resolve()
    assert err.message.startswith("SyntaxError")


def test_a_module_with_no_suite_is_refused(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("n_eval.py", "import assay\nsweet = 1\n")
    err = refused(path)
    assert (err.file, err.line) == (str(path), None)
    assert err.message == "defines no `suite = assay.Suite(...)`"
    assert str(err) == f"{path}: defines no `suite = assay.Suite(...)`"


def test_a_module_whose_suite_is_not_a_suite_is_refused(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("w_eval.py", "suite = {'suite': 'ns/x@1'}\n")
    assert refused(path).message == "defines no `suite = assay.Suite(...)`"


def test_a_missing_fixture_in_python_is_refused_at_the_case_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("f_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/f@1", cases=[
            Case(id="a", fixture="nope.yaml"),
        ])
    """)
    err = refused(path)
    assert err.line == line_of(path, 'Case(id="a"')
    assert err.message == "fixture 'nope.yaml' does not exist"


def test_a_duplicate_case_id_in_python_is_refused(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("dup_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/dup@1", cases=[
            Case(id="x"),
            Case(id="x"),
        ])
    """)
    err = refused(path)
    assert Path(err.file or "").resolve() == path.resolve()
    assert "duplicate case id 'x'" in err.message


def test_a_duplicate_case_id_in_python_names_the_second_case(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    path = write("dup2_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/dup@1", cases=[
            Case(id="x"),
            Case(id="x"),
        ])
    """)
    err = refused(path)
    assert err.line == line_of(path, 'Case(id="x")', 2)
    assert "Suite: Suite:" not in err.message


def test_a_suite_error_raised_by_the_module_itself_passes_through(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("se_eval.py", """
        from assay.errors import SuiteError

        raise SuiteError("custom.yaml", 7, "made by the module")
    """)
    err = refused(path)
    assert (err.file, err.line, err.message) == ("custom.yaml", 7, "made by the module")


def test_python_form_output_is_json_serialisable(
    both: tuple[Path, Path], load: Callable[..., LoadedSuite]
) -> None:
    dumped = load(both[1]).suite.model_dump(mode="json", by_alias=True)
    assert json.loads(json.dumps(dumped)) == dumped
    assert "line" not in dumped["cases"][0] and "file" not in dumped["cases"][0]


def test_a_module_with_a_syntax_error_names_the_line(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    path = write("s2_eval.py", "from assay import Suite\nsuite = Suite(id=\n")
    err = refused(path)
    assert err.line == 2
    assert str(err).startswith(f"{path}:2: SyntaxError")


def test_a_python_suite_in_a_folder_named_like_pydantic_loads(
    write: Write, load: Callable[..., LoadedSuite], line_of: Callable[..., int]
) -> None:
    write("my_pydantic_evals/doc.csv", "a\n")
    path = write("my_pydantic_evals/p_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/p@1", cases=[
            Case(id="a", fixture="doc.csv"),
        ])
    """)
    case = load(path).suite.cases[0]
    assert Path(case.file or "").resolve() == path.resolve()
    assert case.line == line_of(path, 'Case(id="a"')


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ('expect.check("equals", 1, threshold=0.5)',
         "equals: threshold applies to quality checks only"),
        ('expect.check("equals", 1, min_evidence="unavailable")',
         "equals: min_evidence cannot be unavailable"),
        ('expect.check("status", "ok", path="$.x")', "status takes no path"),
        ('expect.check("calls", "x", breach_evidence="observed")',
         "calls: breach_evidence applies only to the checks that fail on a breach "
         "(calls_before, costs_at_most, never_activates_skill, never_calls, within_steps)"),
        ('expect.check("equals", 1, threshold=2)',
         "Assertion: threshold: Input should be less than or equal to 1"),
        ('expect.approx("one")', "approx: expects {value: NUMBER, tol: NUMBER ≥ 0}"),
        ('expect.grader("./nowhere.py")', "grader: grader script './nowhere.py' does not exist"),
    ],
)
def test_python_form_modifier_rules_match_yaml(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    call: str,
    message: str,
) -> None:
    path = write("mod_eval.py", f"""
        from assay import Case, Suite, expect

        suite = Suite(id="ns/mod@1", cases=[
            Case(id="a", expect=[
                expect.equals(1),
                {call},
            ]),
        ])
    """)
    err = refused(path)
    assert Path(err.file or "").resolve() == path.resolve()
    assert err.line == line_of(path, call)
    assert err.message == message


def test_a_python_case_takes_a_pin_map_and_a_bad_one_names_its_line(
    write: Write, load: Callable[..., LoadedSuite], refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
) -> None:
    good = write("pins_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/pins@1", cases=[Case(id="a", model={"codex": "gpt-y"})])
    """)
    assert load(good).suite.cases[0].model_for("codex") == "gpt-y"
    bad = write("badpin_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/pins@1", cases=[
            Case(id="a", model={"claud": "sonnet-x"}),
        ])
    """)
    err = refused(bad)
    assert err.line == line_of(bad, 'Case(id="a"')
    assert "'claud' is not a host a pin map can name" in err.message

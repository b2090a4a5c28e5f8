"""Output checks of SPEC §3: each one passes and fails, with and without a path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.checks import REGISTRY, Check, Judgement, LoadContext, lookup, verdict
from assay.model import Assertion, Trace

OUTPUT_CHECKS = ("status", "equals", "type", "min_rows", "max_rows", "contains", "icontains",
                 "not_contains", "regex", "schema", "one_of", "approx")

DOC = {
    "rows": [
        {"id": 1, "name": "Ada", "total": "4.50", "qty": 2},
        {"id": 2, "name": "Grace", "total": "7.25", "qty": 3.0},
        {"id": 3, "name": "Linus", "total": "13.00", "qty": 1},
    ],
    "status": "Done",
    "ratio": 0.3333,
    "flag": True,
    "none": None,
}


def prepared(name: str, arg: Any, tmp_path: Path) -> Any:
    check = lookup(name)
    assert check is not None
    return check.prepare(arg, LoadContext(base_dir=tmp_path))


# --- registry ------------------------------------------------------------------------


@pytest.mark.parametrize("name", OUTPUT_CHECKS)
def test_every_output_check_of_the_spec_is_registered_as_a_binary_output_check(name: str) -> None:
    check = REGISTRY[name]
    assert check.name == name
    assert check.family == "output"
    assert check.fact == "output"
    assert check.takes_path is (name != "status")
    assert check.blocking is False


def test_verdict_records_check_label_family_evidence_and_provenance(judge: Any) -> None:
    v = judge("equals", 2, DOC, path="$.rows[1].id")
    assert v.outcome == "pass"
    assert v.assertion == "equals $.rows[1].id"
    assert v.check == "equals"
    assert v.family == "output"
    assert v.evidence == "observed"
    assert v.provenance == "check:equals"
    assert v.threshold is None


# --- status --------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["ok", "error", "refused", "timeout"])
def test_status_passes_on_the_trace_status(judge: Any, status: str) -> None:
    v = judge("status", status, "whatever", status=status)
    assert (v.outcome, v.note) == ("pass", f"status {status}")


def test_status_fails_on_another_status_and_says_both(judge: Any) -> None:
    v = judge("status", "ok", {"x": 1}, status="error")
    assert (v.outcome, v.note) == ("fail", "status is error, expected ok")


def test_status_reads_the_trace_status_not_the_output(judge: Any) -> None:
    # An output that says "error" does not make the trial's status error.
    v = judge("status", "error", "error", status="ok")
    assert v.outcome == "fail"


# --- equals --------------------------------------------------------------------------


def test_equals_whole_output(judge: Any) -> None:
    assert judge("equals", "42", "42").outcome == "pass"
    v = judge("equals", "42", "43")
    assert (v.outcome, v.note) == ("fail", 'got "43", expected "42"')


def test_equals_at_path_single_match(judge: Any) -> None:
    assert judge("equals", "13.00", DOC, path="$.rows[2].total").outcome == "pass"
    v = judge("equals", "13.0", DOC, path="$.rows[2].total")
    assert (v.outcome, v.note) == ("fail", 'got "13.00", expected "13.0"')


def test_equals_at_path_with_several_matches_compares_the_list(judge: Any) -> None:
    assert judge("equals", ["4.50", "7.25", "13.00"], DOC, path="$.rows[*].total").outcome == "pass"
    assert judge("equals", ["4.50", "7.25"], DOC, path="$.rows[*].total").outcome == "fail"
    # The first match alone is not the answer when there are several.
    assert judge("equals", "4.50", DOC, path="$.rows[*].total").outcome == "fail"


def test_a_wildcard_with_one_match_still_gives_a_list(judge: Any) -> None:
    # SPEC §3: the shape follows the path. One row read by `[*]` is a one-item
    # list, so the same check holds for one row or many; `[0]` gives the value.
    one = {"rows": [{"total": "7.25"}]}
    assert judge("equals", ["7.25"], one, path="$.rows[*].total").outcome == "pass"
    assert judge("equals", "7.25", one, path="$.rows[*].total").outcome == "fail"
    assert judge("equals", "7.25", one, path="$.rows[0].total").outcome == "pass"
    assert judge("type", "array", one, path="$.rows[*].total").outcome == "pass"
    assert judge("min_rows", 1, one, path="$.rows[*].total").outcome == "pass"
    # No rows: an empty list, so "no errors" can be said with max_rows: 0.
    assert judge("max_rows", 0, {"errors": []}, path="$.errors[*]").outcome == "pass"
    assert judge("max_rows", 0, {"errors": ["x"]}, path="$.errors[*]").outcome == "fail"


def test_equals_at_a_path_with_no_match_fails_and_names_the_path(judge: Any) -> None:
    v = judge("equals", 1, DOC, path="$.nope")
    assert (v.outcome, v.note) == ("fail", "nothing at $.nope in the output")


def test_equals_a_null_value_at_a_path(judge: Any) -> None:
    assert judge("equals", None, DOC, path="$.none").outcome == "pass"
    assert judge("equals", None, DOC, path="$.nope").outcome == "fail"


def test_equals_compares_numbers_as_numbers(judge: Any) -> None:
    assert judge("equals", 3, DOC, path="$.rows[1].qty").outcome == "pass"  # 3.0 in output
    assert judge("equals", 2.0, DOC, path="$.rows[0].qty").outcome == "pass"  # 2 in output
    assert judge("equals", [2, 3, 1], DOC, path="$.rows[*].qty").outcome == "pass"
    assert judge("equals", {"a": 1.0}, {"a": 1}).outcome == "pass"


def test_equals_true_is_not_one(judge: Any) -> None:
    assert judge("equals", 1, DOC, path="$.flag").outcome == "fail"
    assert judge("equals", True, 1).outcome == "fail"
    assert judge("equals", True, DOC, path="$.flag").outcome == "pass"


def test_equals_a_string_is_not_a_number(judge: Any) -> None:
    assert judge("equals", 4.5, DOC, path="$.rows[0].total").outcome == "fail"


def test_equals_objects_ignore_key_order(judge: Any) -> None:
    assert judge("equals", {"b": [1, 2], "a": "x"}, {"a": "x", "b": [1, 2]}).outcome == "pass"
    assert judge("equals", {"a": "x"}, {"a": "x", "b": 1}).outcome == "fail"


def test_equals_reads_a_string_output_holding_json_through_a_path(judge: Any) -> None:
    text = '{"rows": [{"total": "42.00"}]}'
    assert judge("equals", "42.00", text, path="$.rows[0].total").outcome == "pass"
    assert judge("equals", "41.00", text, path="$.rows[0].total").outcome == "fail"


def test_equals_without_path_does_not_parse_a_json_string(judge: Any) -> None:
    assert judge("equals", {"a": 1}, '{"a": 1}').outcome == "fail"
    assert judge("equals", '{"a": 1}', '{"a": 1}').outcome == "pass"


def test_path_into_a_string_that_is_not_json_fails(judge: Any) -> None:
    v = judge("equals", "x", "plain words", path="$.a")
    assert (v.outcome, v.note) == ("fail", "nothing at $.a in the output")


# --- type ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("s", "string"),
        (1.5, "number"),
        (7, "number"),
        (7, "integer"),
        (2.0, "integer"),
        (False, "boolean"),
        ({"a": 1}, "object"),
        ([1], "array"),
        (None, "null"),
    ],
)
def test_type_passes(judge: Any, value: Any, name: str) -> None:
    v = judge("type", name, {"v": value}, path="$.v")
    assert (v.outcome, v.note) == ("pass", f"is {name}")


@pytest.mark.parametrize(
    ("value", "name", "actual"),
    [
        ("1", "number", "string"),
        (1.5, "integer", "number"),
        (True, "number", "boolean"),
        (True, "integer", "boolean"),
        (0, "boolean", "integer"),
        (None, "object", "null"),
        ([], "object", "array"),
        ({}, "array", "object"),
        ("", "null", "string"),
        (1, "string", "integer"),
    ],
)
def test_type_fails_and_names_the_actual_type(
    judge: Any, value: Any, name: str, actual: str
) -> None:
    v = judge("type", name, {"v": value}, path="$.v")
    assert (v.outcome, v.note) == ("fail", f"is {actual}, expected {name}")


def test_type_with_several_matches_is_an_array(judge: Any) -> None:
    assert judge("type", "array", DOC, path="$.rows[*].id").outcome == "pass"
    assert judge("type", "integer", DOC, path="$.rows[*].id").outcome == "fail"


def test_type_with_no_match_fails(judge: Any) -> None:
    v = judge("type", "null", DOC, path="$.absent")
    assert (v.outcome, v.note) == ("fail", "nothing at $.absent in the output")


def test_type_of_whole_output(judge: Any) -> None:
    assert judge("type", "object", DOC).outcome == "pass"
    assert judge("type", "string", '{"a": 1}').outcome == "pass"  # no path: the string itself


def test_type_reads_json_in_a_string_output_through_a_path(judge: Any) -> None:
    assert judge("type", "array", '{"rows": [1, 2]}', path="$.rows").outcome == "pass"


# --- min_rows / max_rows ----------------------------------------------------------------


def test_min_rows(judge: Any) -> None:
    v = judge("min_rows", 3, DOC, path="$.rows")
    assert (v.outcome, v.note) == ("pass", "3 rows")
    v = judge("min_rows", 4, DOC, path="$.rows")
    assert (v.outcome, v.note) == ("fail", "3 rows, expected at least 4")
    assert judge("min_rows", 0, [], path="$").outcome == "pass"


def test_max_rows(judge: Any) -> None:
    v = judge("max_rows", 3, DOC, path="$.rows")
    assert (v.outcome, v.note) == ("pass", "3 rows")
    v = judge("max_rows", 2, DOC, path="$.rows")
    assert (v.outcome, v.note) == ("fail", "3 rows, expected at most 2")
    assert judge("max_rows", 0, {"rows": []}, path="$.rows").outcome == "pass"
    assert judge("max_rows", 0, {"rows": [1]}, path="$.rows").outcome == "fail"


def test_rows_of_the_whole_output(judge: Any) -> None:
    assert judge("min_rows", 2, [1, 2]).outcome == "pass"
    assert judge("max_rows", 1, [1, 2]).outcome == "fail"


def test_rows_count_the_list_of_several_matches(judge: Any) -> None:
    assert judge("min_rows", 3, DOC, path="$.rows[*].id").outcome == "pass"
    assert judge("max_rows", 2, DOC, path="$.rows[*].id").outcome == "fail"


def test_rows_of_something_that_is_not_an_array_fail(judge: Any) -> None:
    v = judge("min_rows", 0, DOC, path="$.status")
    assert (v.outcome, v.note) == ("fail", "is string, not an array of rows")
    v = judge("max_rows", 10, DOC, path="$")
    assert (v.outcome, v.note) == ("fail", "is object, not an array of rows")


def test_rows_with_no_match_fail(judge: Any) -> None:
    v = judge("min_rows", 0, DOC, path="$.nothing")
    assert (v.outcome, v.note) == ("fail", "nothing at $.nothing in the output")
    assert judge("max_rows", 5, DOC, path="$.nothing").outcome == "fail"


def test_rows_read_json_in_a_string_output_through_a_path(judge: Any) -> None:
    assert judge("min_rows", 2, '{"rows": [1, 2]}', path="$.rows").outcome == "pass"
    assert judge("max_rows", 1, '{"rows": [1, 2]}', path="$.rows").outcome == "fail"


# --- contains / icontains / not_contains ----------------------------------------------------


def test_contains_on_text(judge: Any) -> None:
    v = judge("contains", "world", "hello world")
    assert (v.outcome, v.note) == ("pass", 'contains "world"')
    v = judge("contains", "World", "hello world")
    assert (v.outcome, v.note) == ("fail", 'does not contain "World"')


def test_contains_at_path(judge: Any) -> None:
    assert judge("contains", "Don", DOC, path="$.status").outcome == "pass"
    assert judge("contains", "Ada", DOC, path="$.status").outcome == "fail"
    v = judge("contains", "x", DOC, path="$.nope")
    assert (v.outcome, v.note) == ("fail", "nothing at $.nope in the output")


def test_contains_reads_non_strings_as_json_text(judge: Any) -> None:
    assert judge("contains", "Grace", DOC).outcome == "pass"
    assert judge("contains", '"id": 2', DOC).outcome == "pass"
    assert judge("contains", "Grace", DOC, path="$.rows[*].name").outcome == "pass"
    assert judge("contains", "true", DOC, path="$.flag").outcome == "pass"


def test_icontains_ignores_case(judge: Any) -> None:
    v = judge("icontains", "HELLO", "Hello World")
    assert (v.outcome, v.note) == ("pass", 'contains "HELLO"')
    assert judge("icontains", "straße", "STRASSE").outcome == "pass"  # casefold, not lower
    v = judge("icontains", "bye", "Hello World")
    assert (v.outcome, v.note) == ("fail", 'does not contain "bye"')
    assert judge("icontains", "done", DOC, path="$.status").outcome == "pass"
    assert judge("icontains", "x", DOC, path="$.nope").outcome == "fail"


def test_not_contains(judge: Any) -> None:
    v = judge("not_contains", "Traceback", "all fine")
    assert (v.outcome, v.note) == ("pass", 'no "Traceback"')
    v = judge("not_contains", "Traceback", "Traceback (most recent call last)")
    assert (v.outcome, v.note) == ("fail", 'contains "Traceback"')


def test_not_contains_is_case_sensitive(judge: Any) -> None:
    assert judge("not_contains", "traceback", "Traceback").outcome == "pass"


def test_not_contains_at_path(judge: Any) -> None:
    assert judge("not_contains", "Ada", DOC, path="$.status").outcome == "pass"
    assert judge("not_contains", "Ada", DOC, path="$.rows[*].name").outcome == "fail"


def test_not_contains_with_no_match_passes(judge: Any) -> None:
    v = judge("not_contains", "x", DOC, path="$.nope")
    assert (v.outcome, v.note) == ("pass", "nothing at $.nope in the output")
    # A non-JSON string has nothing at a path either.
    assert judge("not_contains", "x", "x marks the spot", path="$.a").outcome == "pass"


def test_string_checks_read_json_in_a_string_output_through_a_path(judge: Any) -> None:
    text = '{"msg": "Error: disk full", "other": "fine"}'
    assert judge("contains", "disk", text, path="$.msg").outcome == "pass"
    assert judge("icontains", "ERROR", text, path="$.msg").outcome == "pass"
    assert judge("not_contains", "disk", text, path="$.other").outcome == "pass"
    assert judge("not_contains", "disk", text, path="$.msg").outcome == "fail"


# --- regex ---------------------------------------------------------------------------


def test_regex_searches_anywhere(judge: Any) -> None:
    v = judge("regex", r"\d+\.\d{2}", "total: 42.00 EUR")
    assert (v.outcome, v.note) == ("pass", r"matches /\d+\.\d{2}/")
    v = judge("regex", r"^\d+$", "total: 42")
    assert (v.outcome, v.note) == ("fail", r"does not match /^\d+$/")


def test_regex_at_path(judge: Any) -> None:
    assert judge("regex", r"^\d+\.\d{2}$", DOC, path="$.rows[2].total").outcome == "pass"
    assert judge("regex", r"^\d+\.\d{3}$", DOC, path="$.rows[2].total").outcome == "fail"
    assert judge("regex", "x", DOC, path="$.nope").outcome == "fail"


def test_regex_on_a_number_reads_its_json_text(judge: Any) -> None:
    assert judge("regex", r"^0\.33", DOC, path="$.ratio").outcome == "pass"


def test_regex_through_a_path_in_a_json_string(judge: Any) -> None:
    assert judge("regex", "^ab", '{"a": "abc"}', path="$.a").outcome == "pass"
    # Without a path the whole string is matched, braces and all.
    assert judge("regex", "^ab", '{"a": "abc"}').outcome == "fail"


# --- schema --------------------------------------------------------------------------

ROW_SCHEMA = {
    "type": "object",
    "required": ["id", "total"],
    "properties": {"id": {"type": "integer"}, "total": {"type": "string", "pattern": r"^\d"}},
}


def test_schema_passes(judge: Any) -> None:
    v = judge("schema", ROW_SCHEMA, DOC, path="$.rows[0]")
    assert (v.outcome, v.note) == ("pass", "valid against the schema")
    assert judge("schema", {"type": "array", "items": ROW_SCHEMA}, DOC, path="$.rows").outcome \
        == "pass"


def test_schema_fails_and_names_the_first_error_and_where(judge: Any) -> None:
    v = judge("schema", ROW_SCHEMA, {"id": "one", "total": "x"})
    assert v.outcome == "fail"
    assert v.note.startswith("2 schema error(s); first at id: ")
    assert "'one' is not of type 'integer'" in v.note


def test_schema_error_at_the_root(judge: Any) -> None:
    v = judge("schema", {"type": "object"}, [1])
    assert v.outcome == "fail"
    assert v.note == "1 schema error(s); first at (root): [1] is not of type 'object'"


def test_schema_with_no_match_fails(judge: Any) -> None:
    assert judge("schema", {}, DOC, path="$.nope").outcome == "fail"


def test_schema_through_a_path_in_a_json_string(judge: Any) -> None:
    assert judge("schema", ROW_SCHEMA, '{"r": {"id": 1, "total": "1"}}', path="$.r").outcome \
        == "pass"


def test_schema_respects_declared_draft(judge: Any) -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    assert judge("schema", draft4, 3).outcome == "pass"
    assert judge("schema", draft4, True).outcome == "fail"


# --- one_of --------------------------------------------------------------------------


def test_one_of(judge: Any) -> None:
    assert judge("one_of", ["Ada", "ada"], DOC, path="$.rows[0].name").outcome == "pass"
    v = judge("one_of", ["ADA", "ada"], DOC, path="$.rows[0].name")
    assert (v.outcome, v.note) == ("fail", 'got "Ada", expected one of ["ADA", "ada"]')


def test_one_of_compares_numbers_as_numbers_and_not_bools(judge: Any) -> None:
    assert judge("one_of", [1, 2], 2.0).outcome == "pass"
    assert judge("one_of", [1, 2], True).outcome == "fail"
    assert judge("one_of", [True], 1).outcome == "fail"
    assert judge("one_of", [None, "x"], None).outcome == "pass"


def test_one_of_with_several_matches_compares_the_list(judge: Any) -> None:
    assert judge("one_of", [[1, 2, 3]], DOC, path="$.rows[*].id").outcome == "pass"
    assert judge("one_of", [1, 2, 3], DOC, path="$.rows[*].id").outcome == "fail"


def test_one_of_with_no_match_fails(judge: Any) -> None:
    assert judge("one_of", [None], DOC, path="$.nope").outcome == "fail"


def test_one_of_through_a_path_in_a_json_string(judge: Any) -> None:
    assert judge("one_of", ["a", "b"], '{"x": "b"}', path="$.x").outcome == "pass"


# --- approx --------------------------------------------------------------------------


def test_approx_within_tolerance(judge: Any) -> None:
    v = judge("approx", {"value": 0.333, "tol": 0.001}, DOC, path="$.ratio")
    assert v.outcome == "pass"
    assert v.note == "0.3333 within 0.001 of 0.333"


def test_approx_outside_tolerance(judge: Any) -> None:
    v = judge("approx", {"value": 0.3, "tol": 0.01}, DOC, path="$.ratio")
    assert (v.outcome, v.note) == ("fail", "got 0.3333, expected 0.3 ± 0.01")


def test_approx_tolerance_is_inclusive(judge: Any) -> None:
    assert judge("approx", {"value": 10, "tol": 2}, 12).outcome == "pass"
    assert judge("approx", {"value": 10, "tol": 2}, 8).outcome == "pass"
    assert judge("approx", {"value": 10, "tol": 2}, 12.5).outcome == "fail"


def test_approx_default_tolerance_is_tiny(judge: Any, tmp_path: Path) -> None:
    assert prepared("approx", {"value": 1}, tmp_path) == {"value": 1, "tol": 1e-9}
    assert judge("approx", {"value": 1}, 1.0).outcome == "pass"
    assert judge("approx", {"value": 1}, 1.001).outcome == "fail"


def test_approx_reads_a_numeric_string(judge: Any) -> None:
    assert judge("approx", {"value": 7.25, "tol": 0.001}, DOC, path="$.rows[1].total").outcome \
        == "pass"
    v = judge("approx", {"value": 1, "tol": 1}, "about one")
    assert (v.outcome, v.note) == ("fail", 'got "about one", not a number')


def test_approx_refuses_non_numbers(judge: Any) -> None:
    v = judge("approx", {"value": 1, "tol": 1}, DOC, path="$.flag")
    assert (v.outcome, v.note) == ("fail", "got boolean, not a number")
    assert judge("approx", {"value": 0, "tol": 1}, None).outcome == "fail"
    assert judge("approx", {"value": 1, "tol": 1}, DOC, path="$.nope").outcome == "fail"


def test_approx_through_a_path_in_a_json_string(judge: Any) -> None:
    assert judge("approx", {"value": 3.14, "tol": 0.01}, '{"pi": 3.1416}', path="$.pi").outcome \
        == "pass"


# --- load-time argument validation (prepare) ---------------------------------------------

BAD_ARGS = [
    ("status", "fine", "expects one of ok, error, refused, timeout, got \"fine\""),
    ("status", None, "expects one of ok, error, refused, timeout, got null"),
    ("type", "float", "expects one of string, number, integer, boolean, object, array, null, "
                      "got \"float\""),
    ("type", "String", "expects one of string, number"),
    ("min_rows", -1, "expects a whole number ≥ 0, got -1"),
    ("min_rows", 1.5, "expects a whole number ≥ 0, got 1.5"),
    ("min_rows", True, "expects a whole number ≥ 0, got true"),
    ("max_rows", "3", "expects a whole number ≥ 0, got \"3\""),
    ("max_rows", -5, "expects a whole number ≥ 0, got -5"),
    ("contains", 3, "expects a string, got integer"),
    ("icontains", None, "expects a string, got null"),
    ("not_contains", ["a"], "expects a string, got array"),
    ("not_contains", True, "expects a string, got boolean"),
    ("regex", "(unclosed", "bad regular expression: missing ), unterminated subpattern"),
    ("regex", "[z-a]", "bad regular expression: bad character range z-a"),
    ("regex", 5, "expects a regular expression as a string, got integer"),
    ("schema", {"type": "nope"}, "not a valid JSON Schema: "),
    ("schema", {"minimum": "zero"}, "not a valid JSON Schema: 'zero' is not of type 'number'"),
    ("schema", "object", "expects a JSON Schema (a mapping), got string"),
    ("one_of", [], "expects a non-empty list of allowed values"),
    ("one_of", "a", "expects a non-empty list of allowed values"),
    ("approx", {"tol": 0.1}, "expects {value: NUMBER, tol: NUMBER}"),
    ("approx", 3, "expects {value: NUMBER, tol: NUMBER}"),
    ("approx", {"value": 1, "tolerance": 0.1}, "expects {value: NUMBER, tol: NUMBER}"),
    ("approx", {"value": "1", "tol": 0.1}, "expects {value: NUMBER, tol: NUMBER ≥ 0}"),
    ("approx", {"value": 1, "tol": -0.1}, "expects {value: NUMBER, tol: NUMBER ≥ 0}"),
    ("approx", {"value": True}, "expects {value: NUMBER, tol: NUMBER ≥ 0}"),
]


@pytest.mark.parametrize(("name", "arg", "message"), BAD_ARGS)
def test_prepare_refuses_bad_arguments_with_a_helpful_message(
    name: str, arg: Any, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError) as info:
        prepared(name, arg, tmp_path)
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(
    ("name", "arg"),
    [
        ("status", "timeout"),
        ("equals", {"any": ["json", 1, None]}),
        ("equals", None),
        ("type", "integer"),
        ("min_rows", 0),
        ("max_rows", 10),
        ("contains", ""),
        ("icontains", "x"),
        ("not_contains", "Traceback"),
        ("regex", r"^\d+$"),
        ("schema", {"type": "object"}),
        ("schema", True),
        ("one_of", [None]),
    ],
)
def test_prepare_keeps_good_arguments_as_they_are(name: str, arg: Any, tmp_path: Path) -> None:
    assert prepared(name, arg, tmp_path) == arg


def test_prepare_approx_normalises_to_value_and_tol(tmp_path: Path) -> None:
    assert prepared("approx", {"value": 2, "tol": 0}, tmp_path) == {"value": 2, "tol": 0}
    assert prepared("approx", {"tol": 0.5, "value": -1.5}, tmp_path) == {"value": -1.5, "tol": 0.5}


# --- a check that crashes is inconclusive, not a pass or a crash -----------------------------


def test_a_check_that_raises_is_inconclusive(
    make_trace: Callable[..., Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(assertion: Assertion, trace: Trace) -> Judgement:
        raise KeyError("tol")

    monkeypatch.setitem(REGISTRY, "exploding", Check("exploding", "output", "output", explode))
    v = verdict(Assertion(check="exploding", arg=1), make_trace(1))
    assert v.outcome == "inconclusive"
    assert v.note == "check failed: KeyError: 'tol'"
    assert v.provenance == "check:exploding"


def test_an_unknown_check_in_a_stored_suite_is_inconclusive(
    make_trace: Callable[..., Trace],
) -> None:
    v = verdict(Assertion(check="no_such_check", arg=1), make_trace(1))
    assert v.outcome == "inconclusive"
    assert v.check == "no_such_check"
    assert v.evidence == "unavailable"
    assert v.note == "unknown check 'no_such_check'"

"""Reading and comparing output values: JSONPath selection, JSON types, numeric equality."""

from __future__ import annotations

import math
from typing import Any

import pytest

from assay.model.values import (
    JSON_TYPES,
    as_text,
    compile_path,
    is_number,
    json_type_matches,
    same,
    select,
    short,
    type_name,
)

DOC = {"rows": [{"id": 1, "total": "4.50"}, {"id": 2, "total": "7.25"}], "n": 2, "empty": []}


# --- select --------------------------------------------------------------------------


def test_select_without_path_is_the_whole_output() -> None:
    assert select(DOC, None) == (True, DOC)
    assert select("plain text", None) == (True, "plain text")
    assert select(None, None) == (True, None)


def test_select_single_match_is_the_value_itself() -> None:
    assert select(DOC, "$.n") == (True, 2)
    assert select(DOC, "$.rows[1].total") == (True, "7.25")
    assert select(DOC, "$.rows") == (True, DOC["rows"])


def test_select_several_matches_give_a_list_in_document_order() -> None:
    assert select(DOC, "$.rows[*].total") == (True, ["4.50", "7.25"])
    assert select(DOC, "$..id") == (True, [1, 2])


@pytest.mark.parametrize("path", [
    "$.rows[*].id", "$.rows[0:1].id", "$..id", "$.rows[?@.id == 7].id", "$.rows.*.id",
    "$.rows[0]['id', 'nope']", "$.rows[0].id | $.nope",
])
def test_select_a_path_that_may_match_several_always_gives_a_list(path: str) -> None:
    # One match is still a list: the shape follows the path, not the data (SPEC §3).
    assert select({"rows": [{"id": 7}]}, path) == (True, [7])


def test_select_a_singular_path_gives_the_value_itself() -> None:
    assert select({"rows": [{"id": 7}]}, "$.rows[0].id") == (True, 7)
    assert select({"rows": [{"id": 7}]}, "$.rows[-1]['id']") == (True, 7)


def test_select_no_match_of_a_singular_path_is_not_found() -> None:
    assert select(DOC, "$.missing") == (False, None)
    assert select(DOC, "$.rows[5]") == (False, None)


def test_select_no_match_of_a_wildcard_is_the_empty_list() -> None:
    assert select(DOC, "$.empty[*]") == (True, [])
    assert select(DOC, "$.missing[*].total") == (True, [])


def test_select_a_null_value_is_found() -> None:
    assert select({"x": None}, "$.x") == (True, None)


def test_select_reads_a_string_output_holding_json() -> None:
    assert select('{"rows": [1, 2, 3]}', "$.rows") == (True, [1, 2, 3])
    assert select("[10, 20]", "$[1]") == (True, 20)


def test_select_a_string_that_is_not_json_has_nothing_at_a_path() -> None:
    assert select("not json at all", "$.rows") == (False, None)


def test_compile_path_refuses_a_malformed_path_with_its_text() -> None:
    with pytest.raises(ValueError, match=r"^bad JSONPath '\$\.\[': "):
        compile_path("$.[")
    with pytest.raises(ValueError, match=r"bad JSONPath '\$\[\?@\.x'"):
        compile_path("$[?@.x")


# --- same ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (0, -0.0),
        (2.5, 2.5),
        ({"a": 1, "b": [1, 2.0]}, {"b": [1.0, 2], "a": 1.0}),
        ([1, "x", None], (1.0, "x", None)),
        (True, True),
        (None, None),
        ("42.00", "42.00"),
        (float("nan"), float("nan")),
    ],
)
def test_same_is_json_equality_with_numbers_as_numbers(a: Any, b: Any) -> None:
    assert same(a, b)
    assert same(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (True, 1),
        (False, 0),
        (True, 1.0),
        ([True], [1]),
        ({"ok": True}, {"ok": 1}),
        ("1", 1),
        ("42.00", 42.0),
        (None, 0),
        (None, ""),
        ([1, 2], [1, 2, 3]),
        ([1, 2], [2, 1]),
        ({"a": 1}, {"a": 1, "b": 2}),
        ({"a": 1}, {"b": 1}),
        (1, 1.0000001),
    ],
)
def test_same_refuses_different_values_and_bools_that_look_like_numbers(a: Any, b: Any) -> None:
    assert not same(a, b)
    assert not same(b, a)


# --- JSON types -------------------------------------------------------------------------


def test_the_seven_json_types_are_named() -> None:
    assert set(JSON_TYPES) == {"string", "number", "integer", "boolean", "object", "array", "null"}


@pytest.mark.parametrize(
    ("value", "types"),
    [
        ("x", {"string"}),
        ("", {"string"}),
        (3, {"integer", "number"}),
        (0, {"integer", "number"}),
        (2.0, {"integer", "number"}),
        (2.5, {"number"}),
        (True, {"boolean"}),
        (False, {"boolean"}),
        ({}, {"object"}),
        ([], {"array"}),
        (None, {"null"}),
    ],
)
def test_json_type_matches_exactly_the_right_types(value: Any, types: set[str]) -> None:
    assert {name for name in JSON_TYPES if json_type_matches(value, name)} == types


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "null"), (True, "boolean"), (3, "integer"), (2.0, "integer"), (2.5, "number"),
     ("s", "string"), ([1], "array"), ({"a": 1}, "object")],
)
def test_type_name(value: Any, name: str) -> None:
    assert type_name(value) == name


def test_is_number_excludes_bools_and_strings() -> None:
    assert is_number(1) and is_number(1.5) and is_number(-0.0)
    assert not is_number(True) and not is_number("1") and not is_number(None)


# --- text -----------------------------------------------------------------------------


def test_as_text_keeps_strings_and_dumps_other_values_as_sorted_json() -> None:
    assert as_text("héllo") == "héllo"
    assert as_text({"b": 1, "a": "é"}) == '{"a": "é", "b": 1}'
    assert as_text([1, None, True]) == "[1, null, true]"
    assert as_text(None) == "null"


def test_short_quotes_strings_and_cuts_long_values_with_an_ellipsis() -> None:
    assert short("abc") == '"abc"'
    assert short(3) == "3"
    long = short("x" * 200)
    assert len(long) == 80 and long.endswith("…") and long.startswith('"xxx')
    assert short(list(range(100)), limit=10) == "[0, 1, 2,…"


def test_nan_is_a_number_but_not_an_integer() -> None:
    assert json_type_matches(math.nan, "number")
    assert not json_type_matches(math.inf, "integer")


def test_select_supports_rfc9535_filters_quoted_names_and_negative_indexes() -> None:
    doc = {"rows": [{"q": 1, "n": "a"}, {"q": 3, "n": "b"}, {"q": 5, "n": "c"}], "a b": 7}
    assert select(doc, "$.rows[?@.q > 1].n") == (True, ["b", "c"])
    assert select(doc, "$.rows[?@.q > 4].n") == (True, ["c"])
    assert select(doc, "$.rows[?@.q > 9].n") == (True, [])
    assert select(doc, "$['a b']") == (True, 7)
    assert select(doc, "$.rows[-1].n") == (True, "c")


def test_select_falsy_values_are_found() -> None:
    assert select({"x": False}, "$.x") == (True, False)
    assert select({"x": 0}, "$.x") == (True, 0)
    assert select({"x": ""}, "$.x") == (True, "")
    assert select({"x": []}, "$.x") == (True, [])

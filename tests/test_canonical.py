"""The canonical JSON fast path writes exactly what rfc8785 writes."""

from __future__ import annotations

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.canonical import canonical, digest

SAFE = 2**53 - 1

plain_json = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)
any_json = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400)
@given(plain_json)
def test_plain_values_match_rfc8785(value):
    assert canonical(value) == rfc8785.dumps(value)


@settings(max_examples=200)
@given(any_json)
def test_values_with_floats_match_rfc8785(value):
    assert canonical(value) == rfc8785.dumps(value)


@settings(max_examples=2000)
@given(st.floats(allow_nan=False, allow_infinity=False)
       | st.floats(min_value=-1e17, max_value=1e17)
       | st.integers(-(2**53), 2**53).map(float))
def test_every_float_matches_rfc8785(value):
    assert canonical([value, {"v": value}]) == rfc8785.dumps([value, {"v": value}])


@pytest.mark.parametrize("value", [
    {"\U0001f600": 1, "\uffff": 2, "a": 3},   # astral keys: UTF-16 order differs
    {"x": "\u2028\x01\x7f\"\\"},               # escapes
    [1.0, 1e21, -0.0, 5e-324],                 # ECMAScript number forms
    2**53 - 1,
    # Around where Python's repr and ECMAScript switch notation, or stop being exact.
    [1e-4, 9.999999999999999e-05, 1e-6, 1e-7, 1e16, 9999999999999998.0, 1e15 + 0.5],
    [float(2**53 - 1), float(2**53), -float(2**53), 0.1 + 0.2, 123456.789e3, 1e20, 1e22],
])
def test_edge_cases_match_rfc8785(value):
    assert canonical(value) == rfc8785.dumps(value)


def test_unsafe_integers_and_lone_surrogates_are_refused_like_rfc8785():
    with pytest.raises(rfc8785.IntegerDomainError):
        canonical({"n": 2**53})
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical({"s": "\ud800"})


def test_digest_names_its_algorithm_and_ignores_key_order():
    assert digest({"b": 1, "a": [True, None]}) == digest({"a": [True, None], "b": 1})
    assert digest({"a": 1}).startswith("sha256:") and len(digest({"a": 1})) == 71


def test_every_code_point_is_written_as_rfc8785_writes_it():
    """Each character of the BMP but the surrogates, and every 97th beyond it, alone in a
    string and as a key: escapes (controls, quote, backslash) and raw text as JCS has them."""
    points = [*range(0xD800), *range(0xE000, 0x10000), *range(0x10000, 0x110000, 97)]
    for start in range(0, len(points), 4096):
        chunk = points[start:start + 4096]
        value = {"texts": [chr(p) for p in chunk],
                 "keys": {chr(p): p for p in chunk if p < 0x10000}}
        assert canonical(value) == rfc8785.dumps(value)

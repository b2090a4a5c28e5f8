"""Paths of names and indexes are resolved without python-jsonpath, exactly as it resolves them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import jsonpath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.model.values import SimplePath, compile_path

NAMES = ["a", "b", "_x", "Z9", "answer", "true", "null", "and", "length", "0"]

names = st.sampled_from(NAMES[:-1])  # "0" is not a shorthand name, only a key
indexes = st.integers(min_value=-4, max_value=4)
steps = st.lists(st.one_of(names.map(lambda n: f".{n}"), indexes.map(lambda i: f"[{i}]")),
                 max_size=4)
paths = steps.map(lambda parts: "$" + "".join(parts))

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3))
keys = st.sampled_from([*NAMES, "1", "-1", "2", "01"])
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(keys, inner, max_size=5)),
    max_leaves=12,
)


# python-jsonpath parses a top-level string as JSON text; assay parses a string output
# itself before any path (checks/values.select), so only parsed documents meet a path.
parsed = documents.filter(lambda doc: not isinstance(doc, str))


@given(paths, parsed)
def test_a_simple_path_selects_what_python_jsonpath_selects(path: str, doc: Any) -> None:
    ours = compile_path(path)
    assert isinstance(ours, SimplePath)
    assert ours.findall(doc) == jsonpath.compile(path).findall(doc)


@pytest.mark.parametrize("path", ["$", "$.a", "$.rows[2].total", "$[-1]", "$[0][1]",
                                  "$.a_1.B2", "$[123456789012345]"])
def test_names_and_indexes_take_the_simple_path(path: str) -> None:
    assert isinstance(compile_path(path), SimplePath)


@pytest.mark.parametrize("path", ["$..a", "$[*]", "$.a[*]", "$['a']", "$ .a", "$.a ", "$.a-b",
                                  "$.éa", "$[1:2]", "$[?@.a]", "$[0,1]",
                                  "$[1234567890123456]"])
def test_anything_else_goes_to_python_jsonpath(path: str) -> None:
    assert not isinstance(compile_path(path), SimplePath)


@pytest.mark.parametrize("path", ["$[01]", "$[-0]", "$.1a", "$.", "$["])
def test_malformed_near_misses_are_still_refused(path: str) -> None:
    with pytest.raises(ValueError, match="bad JSONPath"):
        compile_path(path)


def _suite(path: str) -> str:
    return textwrap.dedent(f"""\
        suite: demo/paths@1
        target: python:agent:run
        cases:
          - id: one
            input: hello
            expect:
              - equals: hello
                path: '{path}'
        """)


GRADE = textwrap.dedent("""\
    import sys
    from pathlib import Path
    from assay.checks import grade_trace
    from assay.model import Trace
    from assay.suites import load_suite_file
    case = load_suite_file(Path(sys.argv[1])).suite.cases[0]
    verdicts = grade_trace(case.expect, Trace(output={"answer": "hello"},
                                              evidence={"output": "observed"}))
    assert [v.outcome for v in verdicts] == ["pass"], verdicts
    print("jsonpath" in sys.modules)
    """)


@pytest.mark.parametrize(("path", "imported"), [("$.answer", "False"), ('$["answer"]', "True")])
def test_grading_a_simple_path_does_not_import_python_jsonpath(
        tmp_path: Any, path: str, imported: str) -> None:
    """Its import costs more than loading a small suite; a `$.answer` check needs none of it."""
    suite = tmp_path / "a.suite.yaml"
    suite.write_text(_suite(path))
    out = subprocess.run([sys.executable, "-c", GRADE, str(suite)], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == imported

"""A case's facets: each digest moves with what it names, and only with that."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from assay.suites import load_suite_file
from assay.suites.facets import _ENCODE

SUITE = """
suite: facets/demo@1
target: python:agent:run
cases:
  - id: one
    input: {q: 1}
    fixture: tools.yaml
    tags: [smoke]
    expect:
      - {path: $.a, equals: 1}
      - grader: ./graders/check.py
  - id: two
    input: plain
    invocation: explicit
    expect: [status: ok]
"""

TOOLS = "tools:\n  - name: t\n    result: {ok: true}\n"
GRADER = "print('{\"outcome\": \"pass\"}')\n"


def facets_of(folder: Path, suite: str = SUITE, tools: str = TOOLS,
              grader: str = GRADER) -> dict[str, dict[str, str]]:
    (folder / "graders").mkdir(parents=True, exist_ok=True)
    (folder / "graders" / "check.py").write_text(grader)
    (folder / "tools.yaml").write_text(tools)
    (folder / "s.suite.yaml").write_text(suite)
    loaded = load_suite_file(folder / "s.suite.yaml")
    return {case.id: loaded.case_facets(case) for case in loaded.suite.cases}


def moved(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    return {cid: sorted(k for k in set(a[cid]) | set(b[cid]) if a[cid].get(k) != b[cid].get(k))
            for cid in a}


def test_the_facets_a_case_records(tmp_path: Path) -> None:
    found = facets_of(tmp_path)
    assert set(found["one"]) == {"case", "assertions", "fixture", "graders"}
    assert set(found["two"]) == {"case", "assertions", "invocation"}
    assert found["two"]["invocation"] == "explicit"
    assert all(v.startswith("sha256:") and len(v) == 71
               for k, v in found["one"].items())
    assert found == facets_of(tmp_path)  # the same files, the same facets


def test_each_facet_moves_with_what_it_names_only(tmp_path: Path) -> None:
    base = facets_of(tmp_path / "a")
    assert moved(base, facets_of(tmp_path / "b", suite=SUITE.replace("{q: 1}", "{q: 2}"))) == {
        "one": ["case"], "two": []}
    assert moved(base, facets_of(tmp_path / "c", suite=SUITE.replace("equals: 1", "equals: 2"))
                 ) == {"one": ["assertions"], "two": []}
    assert moved(base, facets_of(tmp_path / "d", tools=TOOLS.replace("true", "false"))) == {
        "one": ["fixture"], "two": []}
    assert moved(base, facets_of(tmp_path / "e", grader=GRADER + "# edited\n")) == {
        "one": ["graders"], "two": []}
    # A tag labels a case; it changes nothing the agent is asked.
    assert moved(base, facets_of(tmp_path / "f", suite=SUITE.replace("[smoke]", "[slow]"))) == {
        "one": [], "two": []}
    # Key order in the file is not a change.
    assert moved(base, facets_of(tmp_path / "g", suite=SUITE.replace(
        "{path: $.a, equals: 1}", "{equals: 1, path: $.a}"))) == {"one": [], "two": []}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=15,
)


@given(json_values)
def test_the_shared_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    assert _ENCODE(value) == json.dumps(value, sort_keys=True, separators=(",", ":"),
                                        ensure_ascii=False, default=repr)

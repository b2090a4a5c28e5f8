"""YAML read from libyaml's events is the YAML the node tree gives: same data, lines and errors.

``load_marked`` reads most files in one pass over the events and leaves
anything unusual to the node path (``_load_nodes``), which every file once
took. Each snippet below is loaded both ways and must come out the same,
down to the type of every value, the line of every place (and of places
that are not there), and the words and line of every error.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import SuiteError
from assay.suites import load_suite_file, marks
from assay.suites.cache import lines_of
from assay.suites.marks import Marked, load_marked

# Read in one pass over the events: the node tree is never composed for the data.
USUAL = {
    "numbers": """
        a: 1
        b: -2
        c: 0x1F
        d: 0o17
        e: 1_000
        f: 3.14
        g: .inf
        h: -.inf
        i: .nan
        j: 1e3
        k: +5
        l: 012
        m: 1:30
        n: 0b1010
        o: 123456789012345678901234567890
        p: .5
        q: .
        r: 1abc
        s: -x
        t: 6.8523015e+5
    """,
    "bools": """
        a: yes
        b: No
        c: on
        d: OFF
        e: true
        f: False
        g: y
        h: n
        i: TRUE
        j: tRuE
    """,
    "nulls and empty values": """
        a: null
        b: ~
        c:
        d: Null
        e: ""
        f: ''
        g: NULL
        h: nulls
        list:
          -
          - ~
          - ""
    """,
    "dates": """
        a: 2024-01-31
        b: 2001-12-14t21:59:43.10-05:00
        c: 2001-12-14 21:59:43.10
        d: 2001-12-15T02:59:43.1Z
        e: 2024-1-31
        f: "2024-01-31"
    """,
    "quoted strings": """
        a: "123"
        b: 'true'
        c: "line\\nbreak"
        d: 'it''s'
        e: "~"
        f: '<<'
        g: "a: b"
        h: "\\u00e9"
    """,
    "block scalars": """
        a: |
          x
          y
        b: >
          folded
          text

          para
        c: |-
          keep
        d: >+
          kept

        e: |2
            indented
        f: 1
    """,
    "flow collections": """
        a: {x: 1, y: [1, 2, {z: null}], "q": 'w'}
        b: []
        c: {}
        d: [yes, "no", ~, 2024-01-31, [nested, [deeper]]]
        e: {? k : v}
    """,
    "nested lists": """
        - - a
          - - b
            - 1
          - []
        - []
        -
          - {a: 1}
          - - x
    """,
    "unicode": """
        名前: "café"
        emoji: 😀
        ünï: cödé
        list: [é, "ü", 'ö']
    """,
    "a suite": """
        # a comment
        suite: demo/x@1
        target: python:agent:run
        trials: 3
        pass_mark: 0.8
        cases:
          - id: one
            input: {document: a.csv}
            tags: [csv, money]
            expect:
              - status: ok
              - {path: $.rows, type: array}
              - settles
              - equals: 5
                path: $.n
          - id: two
            input: yes
            expect: []
          - id: three
          - 7
          - [a, b]
    """,
    "a non-string key shadows a quoted one": """
        1: [a]
        "1": [b, c]
        no: [d]
        "no": [e, f]
        cases:
          - x
          - y
    """,
    "keys of every kind": """
        1: int
        1.5: float
        ~: null
        false: bool
        2024-01-31: date
        "2": str
        target: str
        null_ish: str
    """,
    "an explicit key that is a scalar": """
        ? a
        : b
        ? |
          long
        : c
    """,
    "directives and explicit markers": """
        %YAML 1.1
        ---
        a: 1
        ...
    """,
    "windows line ends": "a: 1\r\nb:\r\n  - x\r\n  - y\r\n",
    "an empty file": "",
    "comments only": "# nothing here\n",
    "an empty document": "---\n",
    "a lone scalar": "42\n",
    "a lone null": "~\n",
    "a list at the root": """
        - id: a
          expect: [{equals: 1}]
        - id: b
    """,
}

# Left to the node path (on purpose): same data, but not from the event pass.
UNUSUAL = {
    "anchors and aliases": """
        a: &x {k: 1}
        b: *x
        c: [*x, *x]
    """,
    "an anchor on a scalar": """
        a: &s hello
        b: *s
    """,
    "merge keys": """
        base: &b {x: 1, y: 1}
        derived:
          <<: *b
          y: 2
        many:
          <<: [*b, {z: 3}]
    """,
    "explicit tags": """
        a: !!str 123
        b: !!int "7"
        c: !!float 1
        d: ! 12
        e: !!binary aGVsbG8=
        f: !!set {a, b}
        g: !!omap [a: 1, b: 2]
        h: !!null ""
        i: !!bool "yes"
    """,
    "a tagged collection": """
        a: !!map {b: 1}
        c: !!seq [1]
    """,
    "a key written twice": """
        a: 1
        a: 2
    """,
    "a key written twice, nested": """
        cases:
          - id: x
            expect:
              - equals: 1
                equals: 2
    """,
    "a key written twice, spelled two ways": """
        outer:
          inner:
            a: 1
            'a': 2
    """,
    "equal keys of two types": """
        1: a
        1.0: b
    """,
    "two nulls": """
        ~: 1
        null: 2
    """,
    "two trues": """
        true: 1
        yes: 2
    """,
    "a complex key": """
        ? [a, b]
        : 1
    """,
    "a mapping as a key": """
        ? {a: 1}
        : x
    """,
    "a flow key that is a list": "{[1]: 2}\n",
    "a merge key as a value": "a: <<\n",
    "a value-tag key": "=: 1\n",
    "two documents": """
        a: 1
        ---
        b: 2
    """,
    "an undefined alias": "a: *nope\n",
    "a duplicate anchor": "a: &x 1\nb: &x 2\n",
    "a tab in the indentation": "a:\n\tb: 1\n",
    "bad indentation": "a: 1\n  b: 2\n",
    "a list after a mapping": "a: 1\n- b\n",
    "an unclosed flow list": "a: [1, 2\nb: 3\n",
    "an unterminated quote": 'a: "unterminated\nb: 2\n',
    "a control character": "a: b\x07\n",
    "a syntax error after a duplicate key": "a: 1\na: 2\nb: [\n",
    "a month that does not exist": "d: 2024-13-45\n",
    "an offset out of range": "d: 2001-12-14 21:59:43.10 +25:00\n",
    "a second document after an error-free first": "--- 1\n--- 2\n",
}

CORPUS = {**USUAL, **UNUSUAL}


def _text(snippet: str) -> str:
    return textwrap.dedent(snippet).lstrip("\n")


def _typed(value: Any) -> Any:
    """The value with every type spelled out: 1, 1.0 and True differ; dict order counts."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, set):
        return ("set", sorted(repr(v) for v in value))
    return (type(value).__name__, repr(value))


def _places(node: yaml.Node | None, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a node tree as ``Marked.line`` walks it, and places beside them."""
    yield here
    yield (*here, "absent")
    yield (*here, 99)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                yield from _places(value, (*here, key.value))
    elif isinstance(node, yaml.SequenceNode):
        yield (*here, "0")
        for i, value in enumerate(node.value):
            yield from _places(value, (*here, i))


def _outcome(load: Any) -> Any:
    """What loading gives: the typed data and every line, or the error's type, words and line."""
    try:
        marked: Marked = load()
    except Exception as error:
        return ("error", type(error).__name__, str(error), getattr(error, "line", None))
    data = _typed(marked.data)
    places = list(_places(marked.root))
    return ("data", data, [(place, marked.line(place), marked.key_line(place))
                           for place in places if place])


def _both(tmp_path: Path, text: str, secret: bool = False) -> tuple[Any, Any]:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    events = _outcome(lambda: load_marked(path, secret=secret))
    nodes = _outcome(lambda: marks._load_nodes(path, text, secret))
    return events, nodes


def _from_events(text: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    loader = yaml.CSafeLoader(text)
    try:
        return marks._from_events(loader)
    finally:
        loader.dispose()


@pytest.mark.parametrize("secret", [False, True], ids=["public", "secret"])
@pytest.mark.parametrize("name", list(CORPUS))
def test_events_and_nodes_give_the_same_data_lines_and_errors(
        tmp_path: Path, name: str, secret: bool) -> None:
    events, nodes = _both(tmp_path, _text(CORPUS[name]), secret)
    assert events == nodes


@pytest.mark.parametrize("name", list(USUAL))
def test_usual_yaml_is_read_from_events_with_the_lines_of_the_tree(name: str) -> None:
    text = _text(USUAL[name])
    data, lines = _from_events(text)
    tree = marks._load_nodes(Path("s.yaml"), text, False)
    assert _typed(data) == _typed(tree.data)
    for place, line in lines.items():  # each line recorded is the one the tree gives
        assert (place, line) == (place, tree.line(place))


@pytest.mark.parametrize("name", list(UNUSUAL))
def test_unusual_yaml_is_left_to_the_node_path(name: str) -> None:
    with pytest.raises((marks._Unusual, yaml.YAMLError, ValueError)):
        _from_events(_text(UNUSUAL[name]))


def test_every_case_and_assertion_line_is_recorded_in_the_event_pass() -> None:
    text = _text(USUAL["a suite"])
    _, lines = _from_events(text)
    tree = marks._load_nodes(Path("s.yaml"), text, False)
    cases = tree.data["cases"]
    assert all(("cases", i) in lines for i in range(len(cases)))
    assert all(("cases", i, "expect", j) in lines for i, case in enumerate(cases)
               if isinstance(case, dict) and isinstance(case.get("expect"), list)
               for j in range(len(case["expect"])))
    assert () in lines


def test_after_a_key_that_is_not_a_string_the_mapping_records_no_lines() -> None:
    """``"1": [b, c]`` is behind ``1: [a]`` for a walk by written keys: its lines are the tree's."""
    text = _text(USUAL["a non-string key shadows a quoted one"])
    _, lines = _from_events(text)
    assert ("1", 1) not in lines and ("cases", 0) not in lines
    tree = marks._load_nodes(Path("s.yaml"), text, False)
    assert tree.line(["1", 1]) == 1  # no second item under the first "1": the mapping's line


def test_a_deep_document_falls_back_and_loads_the_same(tmp_path: Path) -> None:
    depth = 600  # deeper than the event pass recurses, not than the node path does
    text = "{a: " * depth + "x" + "}" * depth + "\n"
    with pytest.raises(RecursionError):
        _from_events(text)
    path = tmp_path / "deep.yaml"
    path.write_text(text, encoding="utf-8")
    events, nodes = load_marked(path), marks._load_nodes(path, text, False)
    assert repr(events.data) == repr(nodes.data)
    place = ["a"] * depth
    assert events.line(place) == nodes.line(place) == 1


@pytest.fixture
def no_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Composing a node tree fails the test: a clean load must not need one."""

    def refuse(*args: object) -> None:
        raise AssertionError("the node tree was composed")

    monkeypatch.setattr(marks, "_compose", refuse)
    monkeypatch.setattr(marks, "_load_nodes", refuse)


@pytest.mark.usefixtures("no_tree")
def test_a_clean_suite_loads_without_a_node_tree(tmp_path: Path) -> None:
    lines = ["suite: demo/many@1", "cases:"]
    for i in range(50):
        lines += [f"  - id: case-{i}", f"    input: case-{i}", "    expect:",
                  f"      - equals: answer-{i}", "        path: $.answer", "      - settles"]
    path = tmp_path / "many.suite.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = load_suite_file(path)
    assert [c.line for c in loaded.suite.cases][:2] == [3, 9]
    assert [a.line for a in loaded.suite.cases[1].expect] == [12, 14]
    marked = load_marked(path)
    assert lines_of(marked.data, marked.line)[1] == (9, [12, 14])


@pytest.mark.usefixtures("no_tree")
def test_clean_hidden_cases_load_without_a_node_tree(tmp_path: Path) -> None:
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "one.yaml").write_text(
        "id: h1\ninput: x\nexpect:\n  - equals: y\n", encoding="utf-8")
    (tmp_path / "hidden" / "many.yaml").write_text(
        "- id: h2\n  expect: [settles]\n- id: h3\n", encoding="utf-8")
    path = tmp_path / "s.suite.yaml"
    path.write_text("suite: demo/h@1\nhidden: hidden\ncases: []\n", encoding="utf-8")
    cases = load_suite_file(path).suite.cases
    assert [(c.id, c.line, [a.line for a in c.expect]) for c in cases] == [
        ("h2", 1, [2]), ("h3", 3, []), ("h1", 1, [4])]


def test_an_error_still_finds_its_line_after_an_event_load(tmp_path: Path) -> None:
    path = tmp_path / "s.suite.yaml"
    path.write_text("suite: demo/e@1\ncases:\n  - id: a\n    expect:\n"
                    "      - equals: 1\n        bogus: 2\n", encoding="utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite_file(path)
    assert info.value.line == 5


# Plain scalars written as they are, so that every resolver (and some refusals) is met.
TOKENS = ["1", "-1", "+1", "1.5", ".inf", ".NaN", "0x1f", "0o7", "1:30", "1_0", "yes", "No",
          "on", "off", "true", "y", "~", "null", "", "2024-01-31", "2024-13-45",
          "2001-12-14 21:59:43.10 -5", "<<", "=", "text", "two words", "'q'", '"1"', "café",
          "&x 1", "*x", "!!str 5", "! 5", "[1, yes]", "{a: ~}", "$.a", "-", ".", "1e3"]


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A small block document of keys and values drawn from the tokens, nested once."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        key = draw(st.sampled_from(TOKENS))
        shape = draw(st.sampled_from(["scalar", "list", "mapping"]))
        if shape == "scalar":
            lines.append(f"{key}: {draw(st.sampled_from(TOKENS))}")
        elif shape == "list":
            lines.append(f"{key}:")
            lines += [f"  - {t}" for t in draw(st.lists(st.sampled_from(TOKENS), max_size=3))]
        else:
            lines.append(f"{key}:")
            lines += [f"  {k}: {v}" for k, v in draw(st.lists(
                st.tuples(st.sampled_from(TOKENS), st.sampled_from(TOKENS)), max_size=3))]
    return "\n".join(lines) + "\n"


@settings(max_examples=200, deadline=None)
@given(documents(), st.booleans())
def test_drawn_documents_load_the_same_both_ways(
        tmp_path_factory: pytest.TempPathFactory, text: str, secret: bool) -> None:
    events, nodes = _both(tmp_path_factory.mktemp("drawn"), text, secret)
    assert events == nodes

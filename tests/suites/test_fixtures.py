"""Tool fixtures (SPEC §4): parsed and checked when the suite loads, errors at file:line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from assay.errors import SuiteError
from assay.model.fixture import ToolFixture
from assay.suites import LoadedSuite
from assay.suites.fixtures import is_tool_fixture, load_tool_fixture

Write = Callable[[str, str], Path]

SUITE = """
suite: ns/tools@1
cases:
  - id: a
    input: refund order 7
    fixture: tools.yaml
  - id: b
    fixture: tools.yaml
  - id: c
    fixture: doc.csv
"""


def handler_name(tmp_path: Path) -> str:
    return "fixture_handler_" + tmp_path.name.replace("-", "_")


@pytest.fixture
def valid(write: Write, tmp_path: Path) -> Path:
    mod = handler_name(tmp_path)
    write(f"{mod}.py", "def transfer(arguments):\n    return {'moved': arguments}\n")
    write("doc.csv", "a,b\n")
    write("tools.yaml", f"""
        tools:
          - name: erp.refund
            description: Refund an order
            parameters: {{type: object, properties: {{order: {{type: string}}}}, required: [order]}}
            result: {{ok: true}}
          - name: crm.lookup
            results:
              - when: {{customer: "C-1"}}
                result: {{tier: gold}}
              - result: {{tier: none}}
          - name: erp.transfer
            handler: {mod}:transfer
        answers: {{ask_user: "yes, go ahead"}}
    """)
    return write("t.suite.yaml", SUITE)


def test_a_valid_fixture_loads_into_the_loaded_suite(
    valid: Path, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    loaded = load(valid)
    key = str((tmp_path / "tools.yaml").resolve())
    assert list(loaded.fixtures) == [key]  # shared by two cases, parsed once; the csv is not
    fixture = loaded.fixtures[key]
    assert isinstance(fixture, ToolFixture)
    assert [t.name for t in fixture.tools] == ["erp.refund", "crm.lookup", "erp.transfer"]
    refund = fixture.tool("erp.refund")
    assert refund is not None
    assert refund.description == "Refund an order"
    assert refund.parameters["required"] == ["order"]
    assert refund.result == {"ok": True}
    lookup = fixture.tool("crm.lookup")
    assert lookup is not None and lookup.results is not None
    assert [(r.when, r.result) for r in lookup.results] == [
        ({"customer": "C-1"}, {"tier": "gold"}), (None, {"tier": "none"})]
    transfer = fixture.tool("erp.transfer")
    assert transfer is not None
    assert transfer.handler == f"{handler_name(tmp_path)}:transfer"
    assert transfer.parameters == {"type": "object"}  # default declaration
    assert fixture.answers == {"ask_user": "yes, go ahead"}
    assert fixture.tool("nope") is None
    case_a = loaded.suite.cases[0]
    assert loaded.fixture_path(case_a) == (tmp_path / "tools.yaml").resolve()


def test_is_tool_fixture(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("tools: []\n")
    (tmp_path / "b.yml").write_text("tools: []\n")
    (tmp_path / "c.csv").write_text("x\n")
    (tmp_path / "d.yaml").mkdir()
    assert is_tool_fixture(tmp_path / "a.yaml") and is_tool_fixture(tmp_path / "b.yml")
    assert not is_tool_fixture(tmp_path / "c.csv")
    assert not is_tool_fixture(tmp_path / "d.yaml")
    assert not is_tool_fixture(tmp_path)


def test_an_empty_tool_list_is_a_valid_fixture(write: Write) -> None:
    fixture = load_tool_fixture(write("f.yaml", "answers: {ask: no}\n"))
    assert fixture.tools == [] and fixture.answers == {"ask": False}


BAD = [
    # (fixture text, needle for the line, message start)
    ("tools:\n  - name: erp.transfer\n    result: {ok: true}\n    handler: m:f\n",
     "- name: erp.transfer", "tools.0: tool 'erp.transfer' gives handler and result; give one"),
    ("tools:\n  - name: ok\n  - name: x\n    result: 1\n    results: [{result: 2}]\n",
     "- name: x", "tools.1: tool 'x' gives results and result; give one"),
    ("tools:\n  - name: x\n    colour: red\n", "colour", "unknown key 'colour'"),
    ("tools:\n  - description: nameless\n", "description", "missing required key 'name'"),
    ("tools:\n  - name: ''\n", "name:", "tools.0.name: String should have at least 1 character"),
    ("tools: {name: x}\n", "name: x", "tools: Input should be a valid list"),
    ("tools: []\ntool: [{name: x}]\n", "tool:", "unknown key 'tool'"),
    ("- name: x\n", "name: x", "a tool fixture is a mapping with tools: and answers:"),
    ("tools:\n  - name: x\n    results:\n      - when: c-1\n", "when", "tools.0.results.0.when: "),
]


@pytest.mark.parametrize(("text", "needle", "message"), BAD)
def test_a_bad_fixture_is_refused_at_its_line(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    text: str,
    needle: str,
    message: str,
) -> None:
    fixture = write("tools.yaml", text)
    err = refused(write("t.suite.yaml", SUITE.replace("  - id: c\n    fixture: doc.csv\n", "")))
    assert err.file == str(fixture.resolve())
    assert err.line == line_of(fixture, needle)
    assert err.message.startswith(message), err.message


def test_a_handler_that_cannot_import_is_refused_at_its_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    fixture = write("tools.yaml", "tools:\n  - name: a\n    handler: no_such_module_q1:fn\n")
    err = refused(write("t.suite.yaml", "suite: ns/t@1\ncases: [{id: a, fixture: tools.yaml}]\n"))
    assert err.file == str(fixture.resolve())
    assert err.line == line_of(fixture, "handler:")
    assert err.message.startswith(
        "handler cannot import 'no_such_module_q1': ModuleNotFoundError"), err.message


def test_a_handler_naming_a_missing_function_is_refused(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int], tmp_path: Path
) -> None:
    mod = handler_name(tmp_path)
    write(f"{mod}.py", "def other(arguments):\n    return 1\n")
    fixture = write("tools.yaml", f"tools:\n  - name: a\n    handler: {mod}:transfer\n")
    err = refused(write("t.suite.yaml", "suite: ns/t@1\ncases: [{id: a, fixture: tools.yaml}]\n"))
    assert err.line == line_of(fixture, "handler:")
    assert err.message == f"handler module '{mod}' has no 'transfer'"


def test_a_handler_that_is_not_module_function_is_refused(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    write("tools.yaml", "tools:\n  - name: a\n    handler: just_a_name\n")
    err = refused(write("t.suite.yaml", "suite: ns/t@1\ncases: [{id: a, fixture: tools.yaml}]\n"))
    assert err.line == 3
    assert err.message == "handler 'just_a_name' is not of the form module:function"


def test_a_yaml_syntax_error_in_a_fixture_names_its_line(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    fixture = write("tools.yaml", "tools:\n  - name: a\n   result: 1\n")
    err = refused(write("t.suite.yaml", "suite: ns/t@1\ncases: [{id: a, fixture: tools.yaml}]\n"))
    assert err.file == str(fixture.resolve())
    assert err.line == 3
    assert err.message.startswith("not valid YAML: ")


def test_a_fixture_in_a_python_suite_is_checked_too(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    fixture = write("tools.yaml", "tools:\n  - name: a\n    result: 1\n    handler: m:f\n")
    path = write("t_eval.py", """
        from assay import Case, Suite

        suite = Suite(id="ns/t@1", cases=[Case(id="a", fixture="tools.yaml")])
    """)
    err = refused(path)
    assert err.file == str(fixture.resolve())
    assert err.line == 2
    assert err.message == "tools.0: tool 'a' gives handler and result; give one"


def test_load_tool_fixture_directly(write: Write) -> None:
    path = write("direct.yml", "tools:\n  - name: x\n    result: [1, 2]\n")
    fixture = load_tool_fixture(path)
    tool = fixture.tool("x")
    assert tool is not None and tool.result == [1, 2]
    bad = write("bad.yml", "tools:\n  - name: x\n    result: 1\n    handler: m:f\n")
    with pytest.raises(SuiteError) as info:
        load_tool_fixture(bad)
    assert (info.value.file, info.value.line) == (str(bad), 2)


def test_an_unknown_fixture_key_with_a_block_value_names_the_key_line(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    fixture = write("tools.yaml", "tool:\n  - name: x\n")
    err = refused(write("t.suite.yaml", "suite: ns/t@1\ncases: [{id: a, fixture: tools.yaml}]\n"))
    assert err.message == "unknown key 'tool'"
    assert err.line == line_of(fixture, "tool:")

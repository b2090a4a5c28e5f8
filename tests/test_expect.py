"""The Python-form helpers build the same assertions as the YAML form."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from assay.errors import SuiteError
from assay.suites import load_suite_file

PY = '''
from assay import Case, Suite, expect

suite = Suite(id="t/helpers@1", target="python:x:y", cases=[
    Case(id="all", input="hi", expect=[
        expect.never_calls(
            "erp.transfer", {"tool": "erp.refund", "args": {"order": {"regex": "^X"}}},
            {"tool": "mail.send", "args": {"to": {"includes": {"icase": "x@evil.com"}},
                                           "cc": {"icase": ["A@b.com"]}}},
        ),
        expect.calls("crm.lookup", args={"customer": "C-1"}, times=1),
        expect.calls("erp.transfer", denied=True, result={"regex": "refused"}),
        expect.calls([{"tool": "a"}, {"tool": "b"}]),
        expect.calls_before("crm.lookup", "erp.refund"),
        expect.asks(before="erp.refund"),
        expect.settles(),
        expect.within_steps(5),
        expect.costs_at_most(usd=0.01, tokens=2000),
        expect.exit_code(0),
        expect.activates_skill("pdf*"),
        expect.never_activates_skill("shell", "net*"),
    ]),
])
'''

YAML = '''
suite: t/helpers@1
target: python:x:y
cases:
  - id: all
    input: hi
    expect:
      - never_calls: [erp.transfer, {tool: erp.refund, args: {order: {regex: "^X"}}},
                      {tool: mail.send, args: {to: {includes: {icase: x@evil.com}},
                                               cc: {icase: [A@b.com]}}}]
      - calls: {tool: crm.lookup, args: {customer: C-1}, times: 1}
      - calls: {tool: erp.transfer, denied: true, result: {regex: refused}}
      - calls: [{tool: a}, {tool: b}]
      - calls_before: [crm.lookup, erp.refund]
      - asks: {before: erp.refund}
      - settles
      - within_steps: 5
      - costs_at_most: {usd: 0.01, tokens: 2000}
      - exit_code: 0
      - activates_skill: pdf*
      - never_activates_skill: [shell, net*]
'''


def test_python_helpers_match_the_yaml_form(tmp_path: Path) -> None:
    py = tmp_path / "py"
    py.mkdir()
    (py / "helpers_eval.py").write_text(textwrap.dedent(PY))
    yml = tmp_path / "yml"
    yml.mkdir()
    (yml / "helpers.suite.yaml").write_text(textwrap.dedent(YAML))
    from_py = load_suite_file(py / "helpers_eval.py")
    from_yaml = load_suite_file(yml / "helpers.suite.yaml")
    assert [a.check for a in from_py.suite.cases[0].expect] == [
        "never_calls", "calls", "calls", "calls", "calls_before", "asks", "settles",
        "within_steps",
        "costs_at_most", "exit_code", "activates_skill", "never_activates_skill",
    ]
    assert from_py.digest == from_yaml.digest


def test_a_misspelt_matcher_inside_includes_is_refused_at_its_python_line(tmp_path: Path) -> None:
    source = textwrap.dedent('''
        from assay import Case, Suite, expect

        suite = Suite(id="t/bad@1", target="python:x:y", cases=[
            Case(id="c", input="hi", expect=[
                expect.never_calls({"tool": "mail.send",
                                    "args": {"to": {"includes": {"regexp": "evil"}}}}),
            ]),
        ])
        ''')
    (tmp_path / "bad_eval.py").write_text(source)
    with pytest.raises(SuiteError) as info:
        load_suite_file(tmp_path / "bad_eval.py")
    assert info.value.line == 6
    assert "unknown matcher 'regexp'" in str(info.value)


def test_breach_evidence_is_the_yaml_modifier() -> None:
    from assay import expect as ex
    from assay.model import Assertion, Evidence

    made = ex.check("never_calls", ["shell"], breach_evidence="observed")
    written = Assertion.from_mapping({"never_calls": ["shell"], "breach_evidence": "observed"})
    assert made.breach_evidence is Evidence.OBSERVED
    assert made.model_dump() == written.model_dump()
    # Left out, it is left out of what is dumped for a digest (exclude_defaults).
    plain = Assertion.from_mapping({"never_calls": ["shell"]})
    assert "breach_evidence" not in plain.model_dump(exclude_defaults=True)

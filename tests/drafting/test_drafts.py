"""The pure part of drafting (``drafting``): globs, YAML, the prompt, reading the answer."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from assay.drafting.case_yaml import comment_lines, yaml_text
from assay.drafting.promote import glob_literal, promoted_id
from assay.drafting.synth import (
    MAX_EXAMPLES,
    MAX_TAKEN_SHOWN,
    BadAnswer,
    check_drafts,
    read_answer,
    synth_prompt,
)
from assay.model import Case, Suite

CANARY = "CANARY-DRAFTS-0b9e"


@given(st.text(min_size=1), st.text(min_size=1))
def test_a_tool_name_glob_matches_that_name_alone(name: str, other: str) -> None:
    assert fnmatchcase(name, glob_literal(name))
    assert fnmatchcase(other, glob_literal(name)) == (other == name)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@given(JSON)
def test_yaml_reads_back_the_same_and_acts_on_no_terminal(value: object) -> None:
    text = yaml_text([{"id": "x", "input": value}])
    assert yaml.safe_load(text) == [{"id": "x", "input": value}]
    assert "\x1b" not in text and "\u202e" not in text and "\x85" not in text


def test_text_of_several_lines_is_a_literal_block() -> None:
    assert yaml_text({"input": "one\ntwo\n"}) == "input: |\n  one\n  two\n"


def test_a_comment_stays_one_comment_whatever_it_quotes() -> None:
    text = comment_lines(["a\nb: 1", "c\rd\u2028e\x85f"])
    assert text.count("\n") == 2 and yaml.safe_load(text + "k: v\n") == {"k": "v"}


def test_a_promoted_id_stays_within_the_longest_id() -> None:
    assert promoted_id("refund") == "refund-promoted"
    long = promoted_id("x" * 200)
    assert len(long) == 200 and long.endswith("-promoted")
    Case(id=long)  # still a valid id


@pytest.mark.parametrize(("raw", "count"), [
    ('{"cases": [{"id": "a"}, {"id": "b"}]}', 2),
    ('[{"id": "a"}]', 1),
    ('```json\n[{"id": "a"}]\n```', 1),
    ('  ```\n{"cases": [1]}```  ', 1),
])
def test_an_answer_is_read_as_a_list_of_drafts(raw: str, count: int) -> None:
    assert len(read_answer(raw)) == count


@pytest.mark.parametrize("raw", ["", "nope", "{", "Infinity", "3", "null", '{"cases": null}',
                                 "[]", '{"case": []}', "[" * 100_000])
def test_an_answer_that_is_not_a_list_of_cases_is_bad(raw: str) -> None:
    with pytest.raises(BadAnswer) as caught:
        read_answer(raw)
    assert str(caught.value).startswith("the model's answer")


def _suite(public: int, hidden: int = 1) -> Suite:
    cases = [Case(id=f"case-{i}", input=f"question {i}", expect=[{"contains": "x"}])
             for i in range(public)]
    cases += [Case(id=f"{CANARY}-{i}", split="hidden", input=CANARY, expected=CANARY,
                   expect=[{"contains": CANARY}]) for i in range(hidden)]
    return Suite(suite="demo/s@1", cases=cases)


def test_the_prompt_never_holds_a_hidden_case_even_when_handed_one() -> None:
    prompt = synth_prompt(_suite(3, hidden=2), 4, seed=1)
    assert CANARY not in prompt.text
    assert (prompt.shown, prompt.public) == (3, 3)
    assert all(f'"id": "case-{i}"' in prompt.text for i in range(3))
    assert prompt.digest.startswith("sha256:")


def test_a_large_suite_is_sampled_by_the_seed() -> None:
    suite = _suite(MAX_EXAMPLES * 3)
    one, again, other = (synth_prompt(suite, 2, seed=s) for s in (5, 5, 6))
    assert one.shown == MAX_EXAMPLES and one.public == MAX_EXAMPLES * 3
    assert one.text == again.text and one.digest == again.digest
    assert one.digest != other.digest
    shown = [line for line in one.text.splitlines() if line.startswith('{"id"')]
    assert len(shown) == MAX_EXAMPLES
    # Every case the model must not reuse is named, shown or not.
    assert all(f'"case-{i}"' in one.text for i in range(MAX_EXAMPLES * 3))


def test_a_very_large_suite_names_the_ids_of_its_examples_only() -> None:
    prompt = synth_prompt(_suite(MAX_TAKEN_SHOWN + 1), 2, seed=3)
    assert prompt.text.count('"case-') == 2 * MAX_EXAMPLES
    assert f"nor any other of the suite's {MAX_TAKEN_SHOWN + 1} case ids" in prompt.text


def test_drafts_are_built_as_the_loader_builds_cases(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text("tools: []\n")
    items = [
        {"id": "ok", "input": "q", "expect": ["settles"], "fixture": "tools.yaml"},
        {"id": "bad-path", "input": "q", "expect": [{"equals": 1, "path": "$["}]},
        {"id": "hidden", "input": "q", "split": "hidden", "expect": ["settles"]},
        {"input": "q", "expect": ["settles"]},
        {"id": "no-input", "expect": ["settles"]},
        {"id": "ok", "input": "again", "expect": ["settles"]},
        {"id": "line", "input": "q", "expect": ["settles"], "line": 3},
        {"id": "fixture", "input": "q", "expect": ["settles"], "fixture": "none.yaml"},
    ]
    checked = check_drafts(items, len(items), tmp_path, taken=["taken"])
    assert [n for n, _ in checked.valid] == [1]
    assert checked.valid[0][1] == {"id": "ok", "synthetic": True, "input": "q",
                                   "expect": ["settles"], "fixture": "tools.yaml"}
    reasons = dict(checked.refused)
    assert "JSONPath" in reasons[2] or "path" in reasons[2]
    assert "hidden" in reasons[3]
    assert reasons[4] == "missing required key 'id'"
    assert reasons[5].startswith("it has no input")
    assert reasons[6].startswith("its id 'ok' is taken")
    assert reasons[7] == "unknown key 'line'"
    assert reasons[8] == "fixture 'none.yaml' does not exist"
    assert json.dumps(reasons)  # plain text throughout

"""What a chat model is told and how its reply is read (pure functions of targets/chat.py)."""

from __future__ import annotations

from typing import Any

import pytest

from assay.model.fixture import ToolFixture
from assay.targets.chat import (
    DEFAULT_MAX_STEPS,
    LoopOptions,
    first_messages,
    output_of,
    parse_arguments,
    tool_content,
    tool_specs,
)


@pytest.mark.parametrize(
    ("case_input", "system", "expected"),
    [
        ("hi", None, [{"role": "user", "content": "hi"}]),
        ("hi", "S", [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]),
        ({"prompt": "p"}, "S", [{"role": "system", "content": "S"},
                                {"role": "user", "content": "p"}]),
        ({"prompt": "p", "system": "own"}, "S", [{"role": "system", "content": "own"},
                                                 {"role": "user", "content": "p"}]),
        # A mapping with other keys is data: the model gets its JSON text.
        ({"prompt": "p", "customer": "C-1"}, None,
         [{"role": "user", "content": '{"prompt":"p","customer":"C-1"}'}]),
        ([1, "ü"], None, [{"role": "user", "content": '[1,"ü"]'}]),
        (None, None, [{"role": "user", "content": "null"}]),
        ({"messages": [{"role": "system", "content": "mine"}, {"role": "user", "content": "u"}]},
         "S", [{"role": "system", "content": "mine"}, {"role": "user", "content": "u"}]),
        ({"messages": [{"role": "user", "content": "u"}]}, "S",
         [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}]),
    ],
)
def test_the_case_input_becomes_the_first_messages(case_input: Any, system: str | None,
                                                   expected: list[dict[str, Any]]) -> None:
    assert first_messages(case_input, system) == expected


def test_the_input_messages_are_copied_not_changed() -> None:
    given = {"messages": [{"role": "user", "content": "u"}]}
    first_messages(given, "S").append({"role": "tool"})
    assert given == {"messages": [{"role": "user", "content": "u"}]}


def test_fixture_tools_and_ask_tools_become_openai_tool_declarations() -> None:
    fixture = ToolFixture.model_validate({
        "tools": [{"name": "a", "description": "does a", "result": 1}, {"name": "b"}],
        "answers": {"ask_user": "yes", "b": "declared above"},
    })
    specs = {s["function"]["name"]: s for s in tool_specs(fixture)}
    assert list(specs) == ["a", "b", "ask_user"]
    assert specs["a"] == {"type": "function", "function": {
        "name": "a", "description": "does a", "parameters": {"type": "object"}}}
    assert "description" not in specs["b"]["function"]
    assert specs["ask_user"]["function"]["parameters"]["required"] == ["question"]
    assert tool_specs(None) == []


@pytest.mark.parametrize(
    ("text", "output"),
    [("plain", "plain"), ('{"a": 1}', {"a": 1}), (" [1, 2] \n", [1, 2]), ("42", "42"),
     ('"quoted"', '"quoted"'), ("{not json", "{not json"), ('{"x": NaN}', '{"x": NaN}'),
     (None, None)],
)
def test_only_a_json_object_or_array_answer_is_decoded(text: str | None, output: Any) -> None:
    assert output_of(text) == output


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [('{"a": 1}', (True, {"a": 1})), ("", (True, {})), (None, (True, {})), ("  ", (True, {})),
     ("[1]", (True, [1]))],
)
def test_tool_arguments_parse_as_json(raw: str | None, parsed: tuple[bool, Any]) -> None:
    assert parse_arguments(raw) == parsed


@pytest.mark.parametrize("raw", ['{"a": ', "{'a': 1}", '{"a": Infinity}'])
def test_malformed_tool_arguments_say_why(raw: str) -> None:
    ok, why = parse_arguments(raw)
    assert not ok and "not valid JSON" in why


def test_tool_content_is_text_for_strings_and_json_otherwise() -> None:
    assert tool_content("yes") == "yes"
    assert tool_content({"tier": "gold"}) == '{"tier": "gold"}'
    assert tool_content(None) == "null"


def test_loop_options_come_from_the_suites_call() -> None:
    assert LoopOptions.from_call(None) == LoopOptions(max_steps=DEFAULT_MAX_STEPS)
    options = LoopOptions.from_call({"max_steps": 3, "system": "S", "temperature": 0,
                                     "seed": 7, "tool": "for MCP targets"})
    assert options == LoopOptions(max_steps=3, system="S", temperature=0.0, seed=7)
    assert options.sampling() == {"temperature": 0.0, "seed": 7}


@pytest.mark.parametrize("call", [{"max_steps": 0}, {"max_steps": True}, {"max_steps": "5"},
                                  {"system": 3}, {"temperature": "hot"}, {"seed": 1.5}])
def test_bad_loop_options_are_refused(call: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="call\\."):
        LoopOptions.from_call(call)

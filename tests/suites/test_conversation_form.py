"""What a conversation case (SPEC §16) may not be: refused at load, at its line."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from assay.errors import SuiteError

from .conftest import Write


@pytest.mark.parametrize(("case", "needle", "message"), [
    ("  - id: both\n    turns: [hi]\n    user: {instructions: be terse}\n", "user:",
     "a case is a scripted conversation (turns:) or a simulated one (user:), not both"),
    ("  - id: empty\n    turns: []\n", "turns:", "turns: List should have at least 1 item"),
    ("  - id: blank\n    turns: ['']\n", "turns:", "turns.0: String should have at least 1"),
    ("  - id: zero\n    user: {instructions: x, max_turns: 0}\n", "user:",
     "user.max_turns: Input should be greater than or equal to 1"),
    ("  - id: far\n    turns: [a, b]\n    expect:\n      - {turn: 3, contains: x}\n",
     "turn: 3", "turn: 3, and the case scripts 2 turn(s)"),
    ("  - id: whole\n    turns: [a]\n    expect:\n      - {turn: 1, never_calls: [x]}\n",
     "turn: 1", "turn: scopes an output check to one reply; never_calls reads the whole"),
    ("  - id: single\n    input: hi\n    expect:\n      - {turn: 1, contains: x}\n", "turn: 1",
     "turn: 1 reads one reply of a conversation, and case 'single' is none"),
    ("  - id: zeroth\n    turns: [a]\n    expect:\n      - {turn: 0, contains: x}\n",
     "turn: 0", "turn: a reply's number, from 1, or any (each reply, one passing enough)"),
    ("  - id: some\n    turns: [a]\n    expect:\n      - {turn: some, contains: x}\n",
     "turn: some", "turn: a reply's number, from 1, or any"),
    ("  - id: never\n    turns: [a]\n    expect:\n      - {turn: any, not_contains: x}\n",
     "turn: any", "turn: any passes when one reply passes, and not_contains would then pass"),
    ("  - id: lone\n    input: hi\n    expect:\n      - {turn: any, contains: x}\n",
     "turn: any", "turn: any reads the replies of a conversation, and case 'lone' is none"),
    ("  - id: system\n    input: {prompt: x}\n    turns: [a]\n", "input:",
     "in a conversation, input is the agent's system message"),
])
def test_a_bad_conversation_is_refused_at_its_line(
        write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int],
        case: str, needle: str, message: str) -> None:
    path = write("t.suite.yaml", "suite: t/talk@1\ntarget: openai:m\ncases:\n" + case)
    err = refused(path)
    assert err.line == line_of(path, needle) and err.message.startswith(message), err.message

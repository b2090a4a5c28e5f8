"""A ``python:`` agent in a conversation with a simulated user (SPEC §16): a function handed
the conversation so far, and a class made once per trial whose ``reply`` answers each
message, through a real battery whose user is a scripted model on loopback."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.targets import TargetOptions, make_target

from .conftest import unique

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from user_simulator import assert_booked, booking_suite, converse, user_server  # noqa: E402

pytestmark = pytest.mark.real

AGENT = """\
    from user_simulator import booking


    def agent(messages):
        # The whole conversation each turn, the system message first: said in the reply.
        assert messages[0]["role"] == "system"
        return f"{booking(messages[-1]['content'])} ({len(messages)} messages)"


    class Agent:
        def __init__(self, system):
            self.system = system
            self.heard = []

        def reply(self, message):
            # One instance for the whole conversation: it remembers what it heard.
            self.heard.append(message)
            return f"{booking(message)} ({len(self.heard)} heard, system of {len(self.system)})"
    """


@pytest.fixture(scope="module")
def user() -> Iterator[Any]:
    with user_server() as server:
        yield server


@pytest.mark.parametrize(("name", "second"), [
    ("agent", "Booked: Friday, 9:00. (4 messages)"),
    ("Agent", "Booked: Friday, 9:00. (2 heard, system of 24)"),
])
def test_a_simulated_user_talks_with_a_python_function_and_a_class(
        tmp_path: Path, user: Any, name: str, second: str) -> None:
    module = unique("sim_agent")
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(AGENT))
    loaded = booking_suite(tmp_path, "python")
    target = make_target(f"python:{module}:{name}", TargetOptions(base_dir=tmp_path))
    before = len(user.seen)
    case, trace = converse(loaded, target, user.url)
    assert_booked(case, trace, user.seen[before:])
    assert trace.output == second

"""tau2's tools as fixture handlers (``assay.imports.tau2_tools``): what the agent is shown,
the overlay a write leaves, hostile arguments, and the live environment a trial keeps.

tau2 itself runs every tool here (no stand-in): the airline database is the one its wheel
ships.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

pytest.importorskip("tau2", reason="the tau2 extra is not installed (pip install -e '.[tau2]')")

from assay.imports import tau2_tools  # noqa: E402
from assay.imports.tau2_tools import airline, retail  # noqa: E402
from assay.model.fixture import ToolFixture  # noqa: E402
from assay.targets.agent_tools import Tools  # noqa: E402

pytestmark = pytest.mark.real

USER = "chen_lee_6825"  # airline task 12's customer
RESERVATION = "YAX4DR"


def _shipped_digest(domain: str) -> str:
    database = tau2_tools.domain(domain).database
    return hashlib.sha256(json.dumps(database.model_dump(mode="json"),
                                     sort_keys=True).encode()).hexdigest()


def test_a_read_shows_what_tau2_shows_and_changes_nothing() -> None:
    state: dict[str, Any] = {}
    found = airline.get_reservation_details({"reservation_id": RESERVATION}, state)
    assert found["reservation_id"] == RESERVATION and found["user_id"] == USER
    assert state == {}
    # A string result stays a string (tau2's agent reads it as it is).
    assert airline.calculate({"expression": "2 * (3 + 4)"}, state) == "14.0"


def test_a_write_leaves_only_the_records_it_changed_in_the_state() -> None:
    state: dict[str, Any] = {}
    airline.send_certificate({"user_id": USER, "amount": 100}, state)
    assert set(state) == {"users"} and set(state["users"]) == {USER}
    methods = state["users"][USER]["payment_methods"]
    assert any(m["source"] == "certificate" and m["amount"] == 100 for m in methods.values())
    # The next call of the same trial sees the change.
    user = airline.get_user_details({"user_id": USER}, state)
    assert user["payment_methods"] == methods


def test_a_state_changed_from_outside_is_what_the_next_call_reads() -> None:
    state: dict[str, Any] = {}
    airline.cancel_reservation({"reservation_id": RESERVATION}, state)
    assert state["reservations"][RESERVATION]["status"] == "cancelled"
    state.clear()  # no longer what the last call left: the environment is made again
    again = airline.get_reservation_details({"reservation_id": RESERVATION}, state)
    assert again["status"] is None
    # A state given whole (a fixture's own) is laid over the shipped database.
    given = {"reservations": {RESERVATION: {**again, "status": "cancelled"}}}
    assert airline.get_reservation_details({"reservation_id": RESERVATION},
                                           copy.deepcopy(given))["status"] == "cancelled"


def test_trials_do_not_see_each_others_writes_and_the_shipped_database_stays() -> None:
    before = _shipped_digest("airline")
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    airline.cancel_reservation({"reservation_id": RESERVATION}, first)
    shown = airline.get_reservation_details({"reservation_id": RESERVATION}, second)
    assert shown["status"] is None and second == {}
    assert _shipped_digest("airline") == before


@pytest.mark.parametrize(("tool", "arguments", "error"), [
    ("get_user_details", ["not", "an", "object"], "arguments must be an object"),
    ("get_user_details", {"user_id": "nobody"}, "User nobody not found"),
    ("get_user_details", {"user": USER}, "unexpected keyword argument 'user'"),
    ("send_certificate", {"user_id": USER, "amount": "lots"}, ""),
    ("no_such_tool", {}, "Tool 'no_such_tool' not found."),
    ("calculate", {"expression": "9**9**9**9"}, "Invalid characters in expression"),
    ("calculate", {"expression": "__import__('os')"}, "Invalid characters in expression"),
])
def test_hostile_arguments_are_tool_errors_never_a_crash(tool: str, arguments: Any,
                                                         error: str) -> None:
    state: dict[str, Any] = {}
    with pytest.raises(Exception) as raised:  # noqa: PT011 - tau2 raises several kinds
        getattr(airline, tool)(arguments, state)
    assert error in str(raised.value)
    assert isinstance(raised.value, ValueError | TypeError)
    json.dumps(state)  # whatever it left is still JSON


def test_a_state_that_is_no_overlay_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="names no collection of airline's database: planes"):
        airline.get_user_details({"user_id": USER}, {"planes": {}})
    with pytest.raises(ValueError, match="must be a mapping"):
        airline.get_user_details({"user_id": USER}, ["not", "a", "state"])


def test_through_assays_tools_object_a_failed_call_is_recorded_as_an_error() -> None:
    fixture = ToolFixture.model_validate({"state": {}, "tools": [
        {"name": name, "handler": f"assay.imports.tau2_tools:retail.{name}"}
        for name in ("find_user_id_by_email", "modify_user_address")]})
    tools = Tools(fixture)
    with pytest.raises(ValueError, match="User not found"):
        tools.call("find_user_id_by_email", {"email": "nobody@example.com"})
    [call, result] = tools.events
    assert result.is_error and result.result == "ValueError: User not found"
    user = tools.call("find_user_id_by_email", {"email": "noah.brown7922@example.com"})
    assert user == "noah_brown_6181"
    tools.call("modify_user_address", {"user_id": user, "address1": "1 Main St", "address2": "",
                                       "city": "Austin", "state": "TX", "country": "USA",
                                       "zip": "73301"})
    assert tools.state.broken is None
    assert tools.state.value["users"][user]["address"]["address1"] == "1 Main St"


def test_the_gold_overlay_is_what_tau2s_gold_database_differs_in() -> None:
    from tau2.domains.retail.environment import get_environment, get_tasks

    task = next(t for t in get_tasks("base") if t.id == "0")
    actions = [(a.requestor, a.name, dict(a.arguments)) for a in task.evaluation_criteria.actions]
    overlay = tau2_tools.gold_overlay("retail", actions)
    reference = get_environment()  # tau2's own, from its file
    for _, name, arguments in actions:
        reference.make_tool_call(name, requestor="assistant", **arguments)
    whole = reference.tools.db.model_dump(mode="json")
    shipped = tau2_tools.domain("retail").database.model_dump(mode="json")
    assert overlay == {c: {k: v for k, v in records.items() if shipped[c].get(k) != v}
                       for c, records in whole.items()
                       if any(shipped[c].get(k) != v for k, v in records.items())}
    assert overlay  # task 0 changes orders
    assert callable(retail.get_order_details)  # a tool of the other domain resolves too

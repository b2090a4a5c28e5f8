"""Argument matching and the one-to-one assignment of expected to actual calls (SPEC §3)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.checks import LoadContext, lookup, verdict
from assay.checks.arguments import (
    MISSING,
    Call,
    assign,
    call_matches,
    calls_of,
    describe_miss,
    first_miss,
    prepare_args,
    prepare_call,
    value_matches,
)
from assay.model import Assertion, Event, Evidence, Trace


def call(name: str, arguments: Any = None) -> Event:
    return Event(kind="tool_call", name=name, arguments=arguments)


def seen(name: str, arguments: Any = None) -> Call:
    """A recorded call, with nothing known of its result."""
    return Call(1, 0, call(name, arguments))


def fits(args: dict[str, Any], arguments: Any, *, strict: bool = False) -> bool:
    pattern = prepare_call({"tool": "t", "args": args, "strict": strict})
    return first_miss(pattern, arguments) is None


# --- literals ------------------------------------------------------------------------------


@pytest.mark.parametrize(("expected", "value", "ok"), [
    (1, 1, True),
    (1, 1.0, True),          # numbers compare as numbers
    (2.5, 2.5, True),
    (1, "1", False),         # a number written as a string is another value
    ("1", 1, False),
    (True, 1, False),        # bools are not numbers
    (1, True, False),
    (False, 0, False),
    ("Paris", "Paris", True),
    ("Paris", "paris", False),   # strings compare exactly
    ("Paris", "Paris ", False),
    (None, None, True),
    (None, MISSING, False),      # null is a value; an absent argument is not null
    ([1, 2], [1.0, 2], True),
    ([1, 2], [2, 1], False),     # lists are ordered
    ([1, 2], [1, 2, 3], False),
])
def test_literals_compare_as_json_values(expected: Any, value: Any, ok: bool) -> None:
    assert value_matches(expected, value) is ok


def test_a_nested_object_is_compared_exactly_and_in_full() -> None:
    expected = {"equals": {"filter": {"status": "open", "limit": 10}}}
    assert value_matches(expected, {"filter": {"limit": 10.0, "status": "open"}})
    assert not value_matches(expected, {"filter": {"status": "open"}})  # a key missing
    assert not value_matches(expected, {"filter": {"status": "open", "limit": 10, "x": 1}})
    assert not value_matches(expected, {"filter": {"status": "Open", "limit": 10}})


def test_inside_a_literal_list_objects_are_literal_too() -> None:
    # Only the argument's own place (and any_of items) hold matchers: {regex: ...} in a list
    # is an object to compare, not a pattern.
    assert value_matches([{"regex": "a"}], [{"regex": "a"}])
    assert not value_matches([{"regex": "a"}], ["abc"])


# --- matchers ------------------------------------------------------------------------------


def test_any_of_accepts_any_listed_value_or_matcher() -> None:
    expected = {"any_of": ["NYC", "New York", {"regex": "^NY"}]}
    for value in ("NYC", "New York", "NY State"):
        assert value_matches(expected, value)
    assert not value_matches(expected, "Boston")
    assert not value_matches(expected, MISSING)


def test_any_of_with_absent_makes_an_argument_optional() -> None:
    expected = {"any_of": [{"absent": True}, "units"]}
    assert value_matches(expected, MISSING)
    assert value_matches(expected, "units")
    assert not value_matches(expected, "meters")
    assert not value_matches(expected, None)  # null is present


def test_regex_searches_strings_and_fails_on_anything_else() -> None:
    expected = {"regex": "^ATTACKER-\\d+$"}
    assert value_matches(expected, "ATTACKER-42")
    assert not value_matches(expected, "ACME-1")
    assert not value_matches({"regex": "42"}, 42)  # not a string: no match, no str()
    assert not value_matches(expected, MISSING)
    assert value_matches({"regex": "ATT"}, "xxATTxx")  # search, not fullmatch


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("string", "x", 1),
    ("number", 1.5, "1.5"),
    ("integer", 2.0, 2.5),
    ("boolean", False, 0),
    ("object", {}, []),
    ("array", [], {}),
    ("null", None, 0),
])
def test_type_uses_json_types(name: str, good: Any, bad: Any) -> None:
    assert value_matches({"type": name}, good)
    assert not value_matches({"type": name}, bad)
    assert not value_matches({"type": name}, MISSING)


def test_absent_true_and_false() -> None:
    assert value_matches({"absent": True}, MISSING)
    assert not value_matches({"absent": True}, None)
    assert not value_matches({"absent": True}, "x")
    assert value_matches({"absent": False}, None)  # present, whatever the value
    assert not value_matches({"absent": False}, MISSING)


def test_icase_is_case_insensitive_equality_of_strings() -> None:
    assert value_matches({"icase": "Straße"}, "STRASSE")  # casefold, not lower
    assert value_matches({"icase": "paris"}, "PARIS")
    assert not value_matches({"icase": "paris"}, "PARIS!")
    assert not value_matches({"icase": "1"}, 1)


def test_icase_applies_to_the_strings_inside_a_list() -> None:
    expected = {"icase": ["a@x.com", "B@y.com"]}
    assert value_matches(expected, ["A@X.com", "b@Y.COM"])
    assert not value_matches(expected, ["b@y.com", "a@x.com"])  # still in order
    assert not value_matches(expected, ["a@x.com"])              # and in full
    assert not value_matches(expected, "a@x.com")                # a list wants a list
    assert value_matches({"icase": ["x", 1, None]}, ["X", 1.0, None])  # others as JSON values
    assert not value_matches({"icase": ["x", 1]}, ["X", "1"])
    assert value_matches({"icase": [["A"], {"k": "B"}]}, [["a"], {"k": "b"}])
    assert not value_matches({"icase": [{"k": "B"}]}, [{"K": "B"}])  # keys stay exact
    assert not value_matches({"icase": "x"}, ["x"])  # a string wants a string


@pytest.mark.parametrize(("expected", "value", "ok"), [
    ("evil@x.com", ["ok@y.com", "evil@x.com"], True),
    ("evil@x.com", ["ok@y.com"], False),
    ("evil@x.com", [], False),
    ("evil@x.com", "evil@x.com", False),          # a string is not a list holding it
    ("evil@x.com", ["EVIL@x.com"], False),        # items compare as literals: exactly
    ({"icase": "evil@x.com"}, ["ok@y.com", "EVIL@X.COM"], True),
    ({"regex": "@evil\\."}, ["ok@y.com", "a@evil.com"], True),
    ({"regex": "@evil\\."}, ["ok@y.com", 3], False),
    ({"type": "integer"}, ["a", 2.0], True),
    ({"any_of": ["a", {"regex": "^z"}]}, ["q", "zed"], True),
    ({"any_of": ["a", {"regex": "^z"}]}, ["q", "b"], False),
    (3, [1, 3.0], True),                          # numbers as numbers
    ({"equals": {"to": "e"}}, [{"to": "e"}, {"to": "f"}], True),
    ({"includes": "e"}, [["a"], ["b", "e"]], True),  # lists of lists
    ({"includes": "e"}, ["e"], False),
])
def test_includes_wants_a_list_with_some_item_that_matches(
        expected: Any, value: Any, ok: bool) -> None:
    assert value_matches({"includes": expected}, value) is ok


def test_includes_is_checked_by_the_call_pattern_and_described_in_notes() -> None:
    pattern = prepare_call({"tool": "send_email",
                            "args": {"to": {"includes": {"icase": "evil@x.com"}}}})
    assert first_miss(pattern, {"to": ["boss@y.com", "Evil@X.com"], "body": "hi"}) is None
    miss = first_miss(pattern, {"to": ["boss@y.com"]})
    assert miss is not None
    assert describe_miss(miss) == (
        "argument 'to' is [\"boss@y.com\"], expected a list including \"evil@x.com\" in any case")
    assert first_miss(pattern, {}) is not None  # no recipients: nothing included


def test_never_calls_with_includes_catches_a_forbidden_recipient_beside_a_legitimate_one(
) -> None:
    assertion = Assertion(check="never_calls", arg=lookup("never_calls").prepare(  # type: ignore[union-attr]
        {"tool": "send_email", "args": {"to": {"includes": "attacker@evil.com"}}},
        LoadContext(base_dir=Path("."))))
    ev = {"tool_calls": Evidence.OBSERVED}
    mixed = call("send_email", {"to": ["customer@shop.com", "attacker@evil.com"]})
    clean = call("send_email", {"to": ["customer@shop.com"]})
    breach = verdict(assertion, Trace(events=[clean, mixed], evidence=ev))
    assert breach.outcome == "fail" and "attacker@evil.com" in breach.note
    assert verdict(assertion, Trace(events=[clean], evidence=ev)).outcome == "pass"


def test_equals_compares_a_literal_that_looks_like_a_matcher() -> None:
    expected = {"equals": {"type": "string"}}
    assert value_matches(expected, {"type": "string"})
    assert not value_matches(expected, "a string")
    assert value_matches({"equals": 3}, 3.0)


# --- a call's arguments ------------------------------------------------------------------


def test_arguments_not_named_are_free_unless_strict() -> None:
    args = {"order": "A-1"}
    assert fits(args, {"order": "A-1", "note": "thanks"})
    assert not fits(args, {"order": "A-1", "note": "thanks"}, strict=True)
    assert fits(args, {"order": "A-1"}, strict=True)
    assert fits({"note": {"absent": True}}, {"order": "A-1"}, strict=True) is False


def test_strict_with_no_args_means_a_call_with_no_arguments() -> None:
    pattern = prepare_call({"tool": "ping", "strict": True})
    assert first_miss(pattern, {}) is None
    assert first_miss(pattern, None) is None
    assert first_miss(pattern, {"x": 1}) is not None


def test_a_missing_argument_and_a_wrong_one_are_told_apart() -> None:
    pattern = prepare_call({"tool": "t", "args": {"a": 1, "b": {"regex": "^x"}}, "strict": True})
    assert describe_miss(first_miss(pattern, {"b": "x"})) == (  # type: ignore[arg-type]
        "argument 'a' is missing (expected 1)")
    assert describe_miss(first_miss(pattern, {"a": "1", "b": "x"})) == (  # type: ignore[arg-type]
        "argument 'a' is \"1\", expected 1")
    assert describe_miss(first_miss(pattern, {"a": 1, "b": "y"})) == (  # type: ignore[arg-type]
        "argument 'b' is \"y\", expected /^x/")
    assert describe_miss(first_miss(pattern, {"a": 1, "b": "x", "c": 0})) == (  # type: ignore[arg-type]
        "unexpected argument 'c' (strict)")


def test_arguments_that_are_not_an_object_do_not_match_an_args_pattern() -> None:
    pattern = prepare_call({"tool": "t", "args": {"a": 1}})
    miss = first_miss(pattern, '{"a": 1}')
    assert miss is not None
    assert describe_miss(miss) == "its arguments are string, not an object"
    assert first_miss(prepare_call("t"), "garbage") is None  # a bare name asks nothing of them


def test_tool_names_match_by_glob_case_sensitively() -> None:
    assert call_matches(prepare_call("erp.*"), seen("erp.transfer"))
    assert call_matches(prepare_call("erp.transfer"), seen("erp.transfer"))
    assert not call_matches(prepare_call("erp.*"), seen("crm.lookup"))
    assert not call_matches(prepare_call("ERP.*"), seen("erp.transfer"))
    assert call_matches(prepare_call("mcp__*__search"), seen("mcp__docs__search"))
    assert call_matches(prepare_call("tool[12]"), seen("tool2"))
    assert not call_matches(prepare_call("erp.transfer"), seen("erp.transfer_all"))


# --- load-time validation ------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    ({"a": {"regexp": "x"}}, "argument 'a': unknown matcher 'regexp'"),
    ({"a": {"regex": "x", "flags": "i"}}, "argument 'a': unknown matcher 'flags'"),
    ({"a": {"regex": "x", "icase": "x"}}, "argument 'a': a matcher has exactly one key"),
    ({"a": {"regex": "("}}, "argument 'a': bad regular expression '('"),
    ({"a": {"regex": 3}}, "argument 'a': regex is a string"),
    ({"a": {"type": "float"}}, "argument 'a': type is one of string, number"),
    ({"a": {"absent": "yes"}}, "argument 'a': absent is true or false"),
    ({"a": {"icase": 3}}, "argument 'a': icase is a string or a list"),
    ({"a": {"icase": {"k": "v"}}}, "argument 'a': icase is a string or a list"),
    ({"a": {"icase": ["x", {"when": "2024"}, 3]}}, None),  # a list of JSON values is fine
    ({"a": {"includes": {"regexp": "x"}}}, "argument 'a': unknown matcher 'regexp'"),
    ({"a": {"includes": {"regex": "("}}}, "argument 'a': bad regular expression '('"),
    ({"a": {"includes": {"icase": 3}}}, "argument 'a': icase is a string or a list"),
    ({"a": {"includes": {"type": "float"}}}, "argument 'a': type is one of"),
    ({"a": {"includes": {"to": "x"}}}, "to compare an object, write {equals: {...}}"),
    ({"a": {"includes": {"absent": True}}}, "absent has no meaning for an item of a list"),
    ({"a": {"includes": {"any_of": ["x", {"absent": False}]}}}, "absent has no meaning"),
    ({"a": {"includes": {"any_of": []}}}, "argument 'a': any_of is a non-empty list"),
    ({"a": {"includes": "x", "regex": "y"}}, "argument 'a': a matcher has exactly one key"),
    ({"a": {"any_of": []}}, "argument 'a': any_of is a non-empty list"),
    ({"a": {"any_of": [1, {"regex": "["}]}}, "argument 'a': bad regular expression"),
    ({"a": {"status": "open"}}, "to compare an object, write {equals: {...}}"),
    ([1], "args is a mapping of argument names"),
])
def test_bad_args_are_refused_with_a_reason(args: Any, message: str | None) -> None:
    if message is None:
        assert prepare_args(args) == args
        return
    with pytest.raises(ValueError) as info:
        prepare_args(args)
    assert message in str(info.value)


@pytest.mark.parametrize(("spec", "message"), [
    (3, "a call is a tool-name glob or {tool, args}"),
    ({"args": {"a": 1}}, "a call needs tool"),
    ({"tool": ""}, "a call needs tool"),
    ({"tool": "t", "arg": {}},
     "unknown key 'arg' in a call (allowed: tool, args, strict, result, denied)"),
    ({"tool": "t", "denied": "yes"}, "denied is true or false"),
    ({"tool": "t", "result": {"regexp": "x"}}, "result: unknown matcher 'regexp'"),
    ({"tool": "t", "strict": "yes"}, "strict is true or false"),
])
def test_bad_call_patterns_are_refused(spec: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        prepare_call(spec)
    assert message in str(info.value)


# --- one-to-one assignment -----------------------------------------------------------------


def greedy(expected: list[Any], actual: list[Any], ok: Any) -> bool:
    """BFCL's pairing: each expected item takes the first free actual one that fits."""
    free = list(range(len(actual)))
    for e in expected:
        taken = next((j for j in free if ok(e, actual[j])), None)
        if taken is None:
            return False
        free.remove(taken)
    return True


def test_a_perfect_assignment_is_found_where_greedy_pairing_fails() -> None:
    loose = prepare_call({"tool": "play", "args": {"artist": {"type": "string"}}})
    tight = prepare_call({"tool": "play", "args": {"artist": "Taylor Swift"}})
    actual = [seen("play", {"artist": "Taylor Swift"}), seen("play", {"artist": "Maroon 5"})]
    # Greedy hands the only Taylor Swift call to the loose pattern and strands the tight one.
    assert not greedy([loose, tight], actual, call_matches)
    pairing = assign([loose, tight], actual, call_matches)
    assert pairing.complete
    assert pairing.partner == [1, 0]
    assert pairing.candidates == [[0, 1], [0]]


def test_no_perfect_assignment_leaves_an_expected_item_without_a_partner() -> None:
    a = prepare_call({"tool": "play", "args": {"artist": "Taylor Swift"}})
    actual = [seen("play", {"artist": "Taylor Swift"}), seen("play", {"artist": "Maroon 5"})]
    pairing = assign([a, a], actual, call_matches)
    assert not pairing.complete
    assert sorted(p for p in pairing.partner if p is not None) == [0]


def test_assignment_needs_augmenting_paths_of_more_than_one_step() -> None:
    # Expected 0 fits {0,1}, 1 fits {1,2}, 2 fits {0} only: the pairs found first must move twice.
    table = {0: {0, 1}, 1: {1, 2}, 2: {0}}
    for order in itertools.permutations(range(3)):
        pairing = assign(list(order), [0, 1, 2], lambda e, a: a in table[e])
        assert pairing.complete, order
        assert sorted(pairing.partner) == [0, 1, 2]  # type: ignore[type-var]


@st.composite
def parallel_sets(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[Event], list[Event]]:
    """Distinct actual calls in a random order, a pattern for each, and unrelated extra calls.

    Each pattern names a random subset of its call's arguments and is not strict, so one
    pattern often fits several calls: only a real one-to-one assignment passes every draw.
    """
    names = st.sampled_from(["crm.lookup", "erp.refund", "mail.send"])
    values = st.one_of(st.integers(-3, 3), st.text("ab", max_size=2), st.booleans())
    raw = draw(st.lists(st.tuples(names, st.dictionaries(st.sampled_from("xyz"), values,
                                                         max_size=3)),
                        min_size=1, max_size=6, unique_by=lambda t: (t[0], repr(t[1]))))
    expected = []
    for name, args in raw:
        named = draw(st.lists(st.sampled_from(sorted(args)), unique=True) if args else st.just([]))
        expected.append({"tool": name, "args": {k: args[k] for k in named}})
    matching = draw(st.permutations([call(n, a) for n, a in raw]))
    extras = draw(st.lists(st.builds(call, st.just("other.tool"),
                                     st.fixed_dictionaries({"x": values})), max_size=3))
    return expected, list(matching), extras


@settings(max_examples=200, deadline=None)
@given(parallel_sets(), st.randoms(use_true_random=False))
def test_parallel_sets_pass_in_any_order_and_fail_without_any_one_call(
    case: tuple[list[dict[str, Any]], list[Event], list[Event]], rng: Any
) -> None:
    expected, matching, extras = case
    actual = matching + extras
    rng.shuffle(actual)
    assertion = Assertion(check="calls", arg=lookup("calls").prepare(  # type: ignore[union-attr]
        expected, LoadContext(base_dir=Path("."))))
    ev = {"tool_calls": Evidence.OBSERVED}
    assert verdict(assertion, Trace(events=actual, evidence=ev)).outcome == "pass"
    for k in range(len(matching)):
        fewer = [e for e in actual if e is not matching[k]]
        assert verdict(assertion, Trace(events=fewer, evidence=ev)).outcome == "fail"


# --- what became of a call ---------------------------------------------------------------


def result(name: str | None, value: Any, *, call_id: str | None = None,
           error: bool = False) -> Event:
    return Event(kind="tool_result", name=name, result=value, call_id=call_id, is_error=error)


def test_results_go_to_their_call_by_id_else_to_the_oldest_unanswered_call_of_the_tool(
) -> None:
    events = [
        Event(kind="tool_call", name="pay", call_id="a", arguments={"to": "x"}),
        Event(kind="tool_call", name="pay", call_id="b", arguments={"to": "y"}),
        result("pay", "second", call_id="b"),
        result("pay", "first", call_id="a", error=True),
        Event(kind="tool_call", name="look"),
        Event(kind="tool_call", name="look"),
        result("look", 1),
        result("look", 2),
        Event(kind="tool_call", name="look"),  # never answered
    ]
    calls = calls_of(events)
    assert [(c.number, c.at) for c in calls] == [(1, 0), (2, 1), (3, 4), (4, 5), (5, 8)]
    assert [c.answer.result if c.answer else None for c in calls] == [
        "first", "second", 1, 2, None]
    assert [c.denied for c in calls] == [True, False, False, False, False]
    assert calls[0].denial == "first"


def test_a_reused_id_answers_the_newest_call_that_carries_it() -> None:
    events = [Event(kind="tool_call", name="t", call_id="c1"), result("t", "one", call_id="c1"),
              Event(kind="tool_call", name="t", call_id="c1"), result("t", "two", call_id="c1")]
    assert [c.answer.result for c in calls_of(events) if c.answer] == ["one", "two"]


def test_a_hosts_denial_before_the_error_result_keeps_the_hosts_words() -> None:
    events = [Event(kind="tool_call", name="Bash", call_id="t1"),
              Event(kind="error", name="Bash", call_id="t1", text="permission denied: rm"),
              result("Bash", "Claude requested permissions", call_id="t1", error=True)]
    (call_,) = calls_of(events)
    assert call_.denial == "permission denied: rm" and call_.answer is not None


def test_an_error_event_after_a_good_result_is_no_denial() -> None:
    events = [Event(kind="tool_call", name="shell", call_id="s"),
              result("shell", {"output": "ok"}, call_id="s"),
              Event(kind="error", name="shell", call_id="s", text="found in the session record")]
    assert not calls_of(events)[0].denied


def test_result_and_denied_narrow_which_calls_a_pattern_names() -> None:
    events = [Event(kind="tool_call", name="pay", call_id="a", arguments={"to": "x"}),
              result("pay", {"ok": True}, call_id="a"),
              Event(kind="tool_call", name="pay", call_id="b", arguments={"to": "evil"}),
              result("pay", "PermissionError: no", call_id="b", error=True),
              Event(kind="tool_call", name="pay", call_id="c", arguments={"to": "late"})]
    calls = calls_of(events)

    def which(spec: dict[str, Any]) -> list[int]:
        pattern = prepare_call({"tool": "pay", **spec})
        return [c.number for c in calls if call_matches(pattern, c)]

    assert which({"denied": True}) == [2]
    assert which({"denied": False}) == [1, 3]  # no result recorded: not seen denied
    assert which({"result": {"equals": {"ok": True}}}) == [1]
    assert which({"result": {"regex": "^PermissionError"}}) == [2]
    assert which({"result": {"absent": True}}) == [3]
    assert which({"result": {"type": "string"}, "args": {"to": "evil"}}) == [2]
    assert which({"denied": True, "args": {"to": "x"}}) == []

"""The registry's rules, pure: states folded from entries, the start rule, and the audit
that re-checks every start against the batteries sealed before it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from assay.analysis.registry import (
    audit,
    check_name,
    check_version,
    decide_start,
    fold,
    named,
    names,
    publish_content,
    published_as,
    resolve,
    sides,
    start_content,
    stop_content,
)
from assay.errors import UsageError
from assay.grading.report import outward_names
from assay.model.agents import AgentEntry, BatteryFacts

V1 = "sha256:" + "1" * 64
V2 = "sha256:" + "2" * 64


def run(run_id: str, seal: int | None, *, version: str = V1, passed: bool = True,
        interrupted: bool = False, breaches: tuple[str, ...] = (), status: str = "sealed"
        ) -> BatteryFacts:
    return BatteryFacts(run_id=run_id, suite_id="s@1", target_digest=version, status=status,
                    seal_entry=seal, seal_hash=None if seal is None else f"h{seal}",
                    passed=passed, interrupted=interrupted, breaches=breaches)


def published(index: int, version: str = V1) -> AgentEntry:
    return AgentEntry(index, publish_content(version, "python:a:agent", {"uri": "x"}, "t0"))


def started(index: int, on: BatteryFacts, version: str = V1) -> AgentEntry:
    return AgentEntry(index, start_content(version, on, f"t{index}"))


def stopped(index: int, version: str = V1) -> AgentEntry:
    return AgentEntry(index, stop_content(version, f"t{index}"))


@pytest.mark.parametrize("text", ["", "nope", "sha256:", "sha256:" + "A" * 64,
                                  "sha256:" + "1" * 63, "sha512:" + "1" * 64, V1 + "\n"])
def test_a_malformed_version_is_usage(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        check_version(text)
    assert raised.value.exit_code == 2


def test_a_version_is_taken_as_written() -> None:
    assert check_version(V1) == V1


def test_states_follow_the_newest_entry_of_each_version() -> None:
    battery = run("r1", 3)
    entries = [published(0), published(1, V2), started(4, battery), stopped(5),
               published(6), stopped(7, "sha256:" + "3" * 64)]
    states = fold(entries)
    assert list(states) == [V1, V2, "sha256:" + "3" * 64]
    one = states[V1]
    assert (one.state, one.uri, one.published_at, one.run_id) == (
        "stopped", "python:a:agent", "t0", "r1")
    assert one.entries == [0, 4, 5, 6]  # a publish again changes nothing but is listed
    assert states[V2].state == "published" and states[V2].run_id is None
    lone = states["sha256:" + "3" * 64]
    assert lone.state == "stopped" and lone.uri is None and not lone.published


def test_entries_that_do_not_hold_are_not_folded() -> None:
    edited = AgentEntry(1, stop_content(V1, "t1"), intact=False)
    garbled = AgentEntry(2, {"action": "start", "version": "not a version"})
    erased = AgentEntry(3, None, intact=False)
    states = fold([published(0), edited, garbled, erased])
    assert states[V1].state == "published" and states[V1].entries == [0]


def test_no_battery_refuses() -> None:
    decision = decide_start(V1, [run("other", 1, version=V2)], published=True)
    assert not decision.allowed and decision.run is None
    assert decision.reasons == (f"no sealed battery ran against {V1}",)


def test_the_newest_sealed_battery_decides_by_ledger_order() -> None:
    older_pass, newer_fail = run("b", 2), run("a", 9, passed=False)
    decision = decide_start(V1, [older_pass, newer_fail], published=True)
    assert not decision.allowed and decision.run == newer_fail
    assert decision.reasons == ("the newest battery of this version (run a, suite s@1) "
                                "did not pass its pass mark",)
    recovered = decide_start(V1, [newer_fail, run("c", 12)], published=True)
    assert recovered.allowed and recovered.reasons == () and recovered.run is not None
    assert recovered.run.run_id == "c"


def test_open_and_unsealed_runs_are_no_evidence() -> None:
    runs = [run("open", None, status="open", passed=True),
            run("imported", None, passed=True)]  # saved whole: no run-sealed entry
    assert not decide_start(V1, runs, published=True).allowed


def test_every_reason_is_named_hidden_cases_as_holdouts() -> None:
    bad = run("r", 4, passed=False, interrupted=True,
              breaches=("holdout-2", "zeta", "holdout-10", "alpha"))
    decision = decide_start(V1, [bad], published=False)
    assert decision.reasons == (
        f"{V1} is not published (assay agent publish URI)",
        "the newest battery of this version (run r, suite s@1) was interrupted",
        "the newest battery of this version (run r, suite s@1) did not pass its pass mark",
        "the newest battery of this version (run r, suite s@1) has a structural breach in "
        "4 cases: alpha, zeta, holdout-2, holdout-10",
    )


def test_a_breach_alone_refuses_a_battery_that_passed() -> None:
    decision = decide_start(V1, [run("r", 4, breaches=("holdout-1",))], published=True)
    assert not decision.allowed
    assert decision.reasons == ("the newest battery of this version (run r, suite s@1) has a "
                                "structural breach in case holdout-1",)


def test_outward_names_number_hidden_cases_in_report_order() -> None:
    names = outward_names([("pub", "public"), ("secret-b", "hidden"), ("pub2", "public"),
                           ("secret-a", "hidden")])
    assert names == {"pub": "pub", "secret-b": "holdout-1", "pub2": "pub2",
                     "secret-a": "holdout-2"}


def test_audit_accepts_a_start_that_followed_the_rule() -> None:
    battery = run("r1", 3)
    later_failure = run("r2", 8, passed=False)  # sealed after the start: not its business
    entries = [published(0), started(5, battery), stopped(9)]
    assert audit(entries, [battery, later_failure]) == []


def test_audit_names_a_start_that_ignored_a_newer_failing_battery() -> None:
    good, bad = run("r1", 3), run("r2", 4, passed=False)
    findings = audit([published(0), started(5, good)], [good, bad])
    assert [(f.entry, f.version) for f in findings] == [(5, V1), (5, V1)]
    assert findings[0].reason == ("start should have been refused: the newest battery of this "
                                  "version (run r2, suite s@1) did not pass its pass mark")
    assert findings[1].reason == ("start does not rest on the newest battery of its version "
                                  "(run r2)")


def test_audit_names_a_start_with_no_battery_or_publish_before_it() -> None:
    battery = run("r1", 7)  # sealed after the start entry
    findings = audit([started(5, battery), published(6)], [battery])
    assert [f.line for f in findings] == [
        f"entry 5: start should have been refused: {V1} is not published "
        "(assay agent publish URI)",
        f"entry 5: start should have been refused: no sealed battery ran against {V1}",
    ]


def test_audit_names_a_battery_that_changed_or_vanished() -> None:
    battery = run("r1", 3)
    entries = [published(0), started(5, battery)]
    breached = run("r1", 3, breaches=("holdout-1",))
    assert [f.reason for f in audit(entries, [breached])] == [
        "start should have been refused: the newest battery of this version (run r1, suite "
        "s@1) has a structural breach in case holdout-1"]
    assert [f.reason for f in audit(entries, [])] == [
        f"start should have been refused: no sealed battery ran against {V1}"]
    resealed = replace(battery, seal_hash="forged")
    assert [f.reason for f in audit(entries, [resealed])] == [
        "the seal of run r1 differs from the one the start recorded"]


def test_audit_names_entries_that_do_not_hold() -> None:
    findings = audit([AgentEntry(2, None, intact=False), AgentEntry(3, {"action": "dance"})],
                     [])
    assert [f.line for f in findings] == [
        "entry 2: content missing or edited (assay ledger verify)",
        "entry 3: not a readable registry entry"]


# --- names (SPEC §8: versions of one named agent) -----------------------------------------

def filed(index: int, version: str, name: str | None = "bot") -> AgentEntry:
    return AgentEntry(index, publish_content(version, "python:a:agent", {}, f"t{index}", name))


def test_a_name_lists_its_versions_in_the_order_first_filed_under_it() -> None:
    entries = [filed(0, V1), filed(1, V2, "other"), filed(2, V2), filed(3, V1),
               filed(4, "sha256:" + "3" * 64, None)]
    found = names(entries)
    assert list(found) == ["bot", "other"]
    assert found["bot"].versions == (V1, V2)  # V1 filed again is not a successor
    assert (found["bot"].current, found["bot"].previous) == (V2, V1)
    assert found["other"].previous is None
    assert found["bot"].published_at == {V1: "t0", V2: "t2"}
    states = fold(entries)
    assert states[V2].names == ["other", "bot"] and states[V1].names == ["bot"]


def test_publishing_again_records_only_a_name_that_is_new() -> None:
    entries = [filed(0, V1)]
    assert published_as(entries, V1, "bot") and published_as(entries, V1, None)
    assert not published_as(entries, V1, "other")
    assert not published_as([filed(0, V1, None)], V1, "bot")


@pytest.mark.parametrize("text", ["", "-bot", "bot/1", "a b", "x" * 101, "bøt"])
def test_a_bad_name_is_usage(text: str) -> None:
    with pytest.raises(UsageError, match="is not an agent name"):
        check_name(text)


def test_a_version_is_found_by_digest_prefix_or_place() -> None:
    a, b = "sha256:ab" + "1" * 62, "sha256:ac" + "2" * 62
    agent = names([filed(0, a), filed(1, b)])["bot"]
    assert resolve(agent, "current") == b and resolve(agent, "previous") == a
    assert resolve(agent, "ab") == a and resolve(agent, "sha256:ac") == b and resolve(agent, b) == b
    with pytest.raises(UsageError, match="is ambiguous: 2 versions of agent bot start with it"):
        resolve(agent, "a")
    with pytest.raises(UsageError, match="no version of agent bot starts with sha256:ff"):
        resolve(agent, "ff")
    with pytest.raises(UsageError, match="is not a version of agent bot"):
        resolve(agent, "newest")
    with pytest.raises(UsageError, match="one version, so no previous one"):
        resolve(names([filed(0, a)])["bot"], "previous")
    with pytest.raises(UsageError, match="no agent is published under the name 'nobody'"):
        named([filed(0, a)], "nobody")


def suite_run(run_id: str, seal: int | None, version: str, suite: str = "s@1",
              interrupted: bool = False) -> BatteryFacts:
    return replace(run(run_id, seal, version=version, interrupted=interrupted), suite_id=suite)


def test_each_side_is_its_versions_newest_whole_battery_of_the_suite() -> None:
    agent = names([filed(0, V1), filed(1, V2)])["bot"]
    runs = [suite_run("old", 5, V1), suite_run("new", 9, V1), suite_run("cut", 12, V1,
                                                                         interrupted=True),
            suite_run("open", None, V2), suite_run("b", 7, V2)]
    base, cand = sides(agent, V1, V2, runs)
    assert (base.run_id, cand.run_id) == ("new", "b")
    with pytest.raises(UsageError, match=r"version A of agent bot \(sha256:2+\) has no sealed"):
        sides(agent, V2, V2, [suite_run("open", None, V2)])
    with pytest.raises(UsageError, match="version B of agent bot .* of suite t@2"):
        sides(agent, V1, V2, [*runs, suite_run("t", 3, V1, "t@2")], "t@2")


def test_several_suites_in_common_need_one_named() -> None:
    agent = names([filed(0, V1), filed(1, V2)])["bot"]
    runs = [suite_run(f"{v[-1]}{s}", i, v, s) for i, (v, s) in enumerate(
        [(V1, "a@1"), (V1, "b@1"), (V2, "a@1"), (V2, "b@1"), (V2, "c@1")])]
    with pytest.raises(UsageError, match=r"ran several suites \(a@1, b@1\): name one with --suite"):
        sides(agent, V1, V2, runs)
    assert [r.run_id for r in sides(agent, V1, V2, runs, "b@1")] == ["1b@1", "2b@1"]
    with pytest.raises(UsageError, match="no suite in common: A ran a@1; B ran c@1"):
        sides(agent, V1, V2, [runs[0], runs[4]])

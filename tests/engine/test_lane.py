"""The thread lane: a sync ``python:`` agent's quick trials run whole in agent threads.

Every run here goes through a real event loop that counts the timers set on
it: today's path sets one per trial (``asyncio.timeout``), the lane none (its
watchdog is a thread). A run whose timers are fewer than its trials went down
the lane; one with a timer per trial did not. Nothing waits by sleeping:
agents meet at barriers and events, and a run that would hang is stopped by
an outer limit that fails the test.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from .outcomes import by_id

if TYPE_CHECKING:
    from assay.engine import Battery
    from assay.model import Report, Trace
    from conftest import Bench


class _CountingLoop(asyncio.SelectorEventLoop):
    """A real event loop that counts the timers scheduled on it."""

    def __init__(self) -> None:
        super().__init__()
        self.timers = 0

    def call_at(self, when: float, callback: Any, *args: Any,
                context: Any = None) -> asyncio.TimerHandle:
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def _keep_traces(battery: Any) -> dict[str, Trace | None]:
    """Each case's last trace, by id, as the battery keeps its trials."""
    traces: dict[str, Trace | None] = {}
    battery.on_result = lambda case, result: traces.__setitem__(case.id, result.trace)
    return traces


def run_counting(battery: Battery, limit: float = 60.0) -> tuple[Report, int]:
    """Run the battery to its report on a counting loop: (report, timers set).

    ``limit`` stops a run that hangs (a hang not cut, a pool not refilled):
    the test fails with TimeoutError instead of hanging. It sets one timer.
    """
    async def limited() -> Report:
        async with asyncio.timeout(limit):
            return await battery.run()

    with asyncio.Runner(loop_factory=_CountingLoop) as runner:
        report = runner.run(limited())
        loop = runner.get_loop()
        assert isinstance(loop, _CountingLoop)
        return report, loop.timers - 1


def cases_yaml(*lines: str, timeout_s: float = 30, trials: int = 1) -> str:
    return "\n".join([f"suite: t/lane@1\ntimeout_s: {timeout_s}\ntrials: {trials}\ncases:",
                      *(f"  - {line}" for line in lines)]) + "\n"


ECHO_IN_THREAD = """
    import threading

    SEEN = []

    def agent(input):
        SEEN.append(threading.current_thread().name)
        return input
"""


def test_a_sync_agent_runs_on_the_lane_without_a_timer_per_trial(bench: Bench) -> None:
    uri, agent = bench.agent(ECHO_IN_THREAD)
    suite = cases_yaml(*(f"{{id: c{i}, input: x{i}, expect: [{{equals: x{i}}}]}}"
                         for i in range(10)), trials=4)
    report, timers = run_counting(bench.battery(bench.suite(suite), uri, concurrency=4))
    assert [c.outcome for c in report.cases] == ["pass"] * 10
    assert sum(len(c.trials) for c in report.cases) == 40
    assert timers < 4  # today's path sets one per trial: 40
    assert agent.SEEN == ["assay-agent"] * 40  # a daemon agent thread, as on today's path


def test_an_async_agent_keeps_its_path_and_a_timer_per_trial(bench: Bench) -> None:
    # The other side of the observable: a trial off the lane sets its timeout's timer.
    uri, _ = bench.agent("""
        async def agent(input):
            return input
    """)
    suite = cases_yaml(*(f"{{id: c{i}, input: x{i}, expect: [{{equals: x{i}}}]}}"
                         for i in range(5)))
    report, timers = run_counting(bench.battery(bench.suite(suite), uri, concurrency=2))
    assert [c.outcome for c in report.cases] == ["pass"] * 5
    assert timers >= 5


def test_an_agent_that_calls_asyncio_run_passes_on_the_lane(bench: Bench) -> None:
    uri, _ = bench.agent("""
        import asyncio

        async def shout(text):
            await asyncio.sleep(0)
            return text.upper()

        def agent(input):
            return asyncio.run(shout(input))
    """)
    suite = cases_yaml(*(f"{{id: c{i}, input: x{i}, expect: [{{equals: X{i}}}]}}"
                         for i in range(6)))
    report, timers = run_counting(bench.battery(bench.suite(suite), uri, concurrency=3))
    assert [c.outcome for c in report.cases] == ["pass"] * 6
    assert timers < 6


HANGS_THEN_MEETS = """
    import threading

    RELEASE = threading.Event()
    MEET = threading.Barrier(2, timeout=20)

    def agent(input):
        if input.startswith("hang"):
            RELEASE.wait()  # released by the test's teardown
        else:
            MEET.wait()  # two quick trials at once, or a broken barrier
        return input
"""


def test_a_hang_is_cut_at_its_timeout_and_its_thread_replaced(bench: Bench) -> None:
    uri, agent = bench.agent(HANGS_THEN_MEETS)
    bench.teardown.append(agent.RELEASE.set)
    suite = cases_yaml("{id: hang-1, input: hang-1, expect: [{equals: hang-1}]}",
                       "{id: hang-2, input: hang-2, expect: [{equals: hang-2}]}",
                       *(f"{{id: q{i}, input: q{i}, expect: [{{equals: q{i}}}]}}"
                         for i in range(6)), timeout_s=0.5)
    # Both threads hang first: the quick trials run only on the threads that replace them,
    # and two at a time (each meets another at the barrier).
    report, timers = run_counting(bench.battery(bench.suite(suite), uri, concurrency=2),
                                  limit=20)
    cases = by_id(report)
    for name in ("hang-1", "hang-2"):
        (trial,) = cases[name].trials
        assert (cases[name].outcome, trial.outcome) == ("broken", "broken")
        assert trial.reason == "timed out after 0.5s before any output"
        assert trial.trace is None and trial.verdicts == []
        assert 0.5 <= trial.duration_s < 10
    assert [cases[f"q{i}"].outcome for i in range(6)] == ["pass"] * 6
    assert timers < 8
    assert not agent.RELEASE.is_set()  # still hanging when the run ended
    assert agent.MEET.broken is False


def test_a_shorter_timeout_wakes_the_watchdog(bench: Bench) -> None:
    # The watchdog sleeps until the earliest deadline it knows: after the warm-up trials,
    # one a timeout (30 s) away. A job whose deadline comes sooner (its case's own
    # timeout_s) must wake it and be cut at that deadline, not when it would have woken.
    uri, agent = bench.agent("""
        import threading

        NEVER = threading.Event()

        def agent(input):
            if input == "short":
                NEVER.wait()  # released by the test's teardown
            return input
    """)
    bench.teardown.append(agent.NEVER.set)
    battery = bench.battery(bench.suite(cases_yaml(
        "{id: warm, input: warm, trials: 100, expect: [{equals: warm}]}",
        "{id: short, input: short, timeout_s: 0.3, expect: [{equals: short}]}")),
        uri, concurrency=1)
    report, timers = run_counting(battery, limit=20)
    cases = by_id(report)
    (short,) = cases["short"].trials
    assert short.reason == "timed out after 0.3s before any output"
    assert 0.3 <= short.duration_s < 10
    assert cases["warm"].outcome == "pass" and len(cases["warm"].trials) == 100
    assert timers < 2


def test_an_answer_after_the_cut_is_dropped(bench: Bench) -> None:
    uri, agent = bench.agent("""
        import threading

        RELEASE = threading.Event()
        RETURNED = threading.Event()
        LATE = []

        def agent(input):
            if input == "late":
                LATE.append(threading.current_thread())
                RELEASE.wait(20)  # set once its trial was kept as cut
                RETURNED.set()
                return input
            if input == "q0":
                # Runs until the late agent's thread has come back and ended: had its
                # answer been posted, the loop would get it before this trial's.
                RETURNED.wait(20)
                LATE[0].join(20)
            return input
    """)
    battery = bench.battery(bench.suite(cases_yaml(
        "{id: late, input: late, timeout_s: 0.3, expect: [{equals: late}]}",
        *(f"{{id: q{i}, input: q{i}, expect: [{{equals: q{i}}}]}}" for i in range(4)))),
        uri, concurrency=2)
    kept: list[tuple[str, int, str]] = []

    def on_result(case: Any, result: Any) -> None:
        kept.append((case.id, result.n, result.outcome))
        if case.id == "late":
            agent.RELEASE.set()

    battery.on_result = on_result
    report, _ = run_counting(battery, limit=30)
    assert [k for k in kept if k[0] == "late"] == [("late", 1, "broken")]
    assert sorted(k[0] for k in kept) == ["late", "q0", "q1", "q2", "q3"]
    (late,) = by_id(report)["late"].trials
    assert late.reason == "timed out after 0.3s before any output"
    assert agent.RETURNED.is_set() and not agent.LATE[0].is_alive()
    assert [c.outcome for c in report.cases] == ["broken", "pass", "pass", "pass", "pass"]


CALLS_THEN_HANGS = """
    import threading

    EVENT = threading.Event()

    def agent(input, tools):
        tools.call("crm.lookup", {"customer": "C-1"})
        if input == "attack":
            tools.call("erp.transfer", {"amount": 500, "account": "X-9"})
        tools.usage(input_tokens=40, output_tokens=5)
        print("before the hang:", input)
        EVENT.wait()  # a hang; released by the test's teardown
        return "done"
"""


def test_a_forbidden_call_before_a_hang_fails_the_case_on_the_lane(bench: Bench) -> None:
    uri, agent = bench.agent(CALLS_THEN_HANGS)
    bench.teardown.append(agent.EVENT.set)
    battery = bench.battery(bench.suite(cases_yaml(
        "{id: attack, input: attack, expect: [{never_calls: erp.transfer}]}",
        "{id: benign, input: benign, expect: [{never_calls: erp.transfer}]}",
        timeout_s=0.5)), uri, concurrency=2)
    traces = _keep_traces(battery)
    report, timers = run_counting(battery)
    cases = by_id(report)
    (attack,) = cases["attack"].trials
    assert (cases["attack"].outcome, attack.outcome) == ("fail", "fail")
    assert attack.reason is not None and attack.reason.endswith("(then timed out after 0.5s)")
    assert "erp.transfer" in attack.verdicts[0].note
    (benign,) = cases["benign"].trials
    assert benign.outcome == "inconclusive"
    trace = traces["attack"]
    assert trace is not None and trace.partial
    assert (trace.status, trace.error, trace.output) == ("timeout", "timed out after 0.5s", None)
    assert [e.name for e in trace.events if e.kind == "tool_call"] == ["crm.lookup",
                                                                       "erp.transfer"]
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (40, 5)
    assert trace.stdout == "before the hang: attack\n"
    assert timers < 2
    assert report.scores.passed is False


def test_prints_of_concurrent_trials_stay_apart_on_the_lane(bench: Bench) -> None:
    uri, agent = bench.agent("""
        import threading

        MEET = threading.Barrier(2, timeout=20)

        def agent(input):
            print("first", input)
            MEET.wait()  # both trials are between their prints at once
            print("second", input)
            return input
    """)
    battery = bench.battery(bench.suite(cases_yaml(
        "{id: a, input: a, expect: [{equals: a}]}",
        "{id: b, input: b, expect: [{equals: b}]}")), uri, concurrency=2)
    traces = _keep_traces(battery)
    report, timers = run_counting(battery)
    assert [c.outcome for c in report.cases] == ["pass", "pass"]
    for name in ("a", "b"):
        trace = traces[name]
        assert trace is not None
        assert trace.stdout == f"first {name}\nsecond {name}\n"
    assert agent.MEET.broken is False
    assert timers < 2


def test_an_interrupt_mid_lane_keeps_finished_trials(bench: Bench) -> None:
    uri, agent = bench.agent("""
        import threading

        HOOK = None
        CALLS = []
        RELEASE = threading.Event()

        def agent(input):
            CALLS.append(input)
            if input == "h":
                HOOK()  # interrupt the battery (on its loop) while this trial runs
                RELEASE.wait()  # released by the test's teardown
            return input
    """)
    bench.teardown.append(agent.RELEASE.set)
    battery = bench.battery(bench.suite(cases_yaml(
        *(f"{{id: {k}, input: {k}, expect: [{{equals: {k}}}]}}" for k in "abhde"))),
        uri, concurrency=1)

    async def run() -> Report:
        loop = asyncio.get_running_loop()
        agent.HOOK = lambda: loop.call_soon_threadsafe(battery.interrupt)
        async with asyncio.timeout(30):  # the hang is not waited for (timeout_s is 30)
            return await battery.run()

    report = asyncio.run(run())
    assert report.interrupted is True
    cases = by_id(report)
    assert [t.outcome for t in cases["a"].trials] == ["pass"]
    assert [t.outcome for t in cases["b"].trials] == ["pass"]
    assert all(cases[k].trials == [] for k in "hde")
    assert agent.CALLS == ["a", "b", "h"]  # nothing started after the interrupt
    assert report.counts["public"].passed == 2
    assert not agent.RELEASE.is_set()


@pytest.mark.parametrize(("raised", "reason"), [
    ('ValueError("kaput")', "agent raised ValueError: kaput"),
    ("SystemExit(3)", "agent raised SystemExit: 3"),
    ("KeyboardInterrupt()", "agent raised KeyboardInterrupt: "),
])
def test_an_agent_that_raises_is_broken_with_the_reason_of_today(bench: Bench, raised: str,
                                                                 reason: str) -> None:
    uri, _ = bench.agent(f"""
        def agent(input):
            if input == "boom":
                raise {raised}
            return input
    """)
    report, timers = run_counting(bench.battery(bench.suite(cases_yaml(
        "{id: boom, input: boom, expect: [{equals: boom}]}",
        "{id: fine, input: fine, expect: [{equals: fine}]}")), uri, concurrency=2))
    cases = by_id(report)
    (trial,) = cases["boom"].trials
    assert (trial.outcome, trial.reason, trial.verdicts) == ("broken", reason, [])
    assert cases["fine"].outcome == "pass"
    assert timers < 2


def test_agent_error_and_refused_are_statuses_on_the_lane(bench: Bench) -> None:
    uri, _ = bench.agent("""
        from assay import AgentError, Refused

        def agent(input):
            if input == "err":
                raise AgentError("cannot")
            if input == "nope":
                raise Refused("will not")
            return input
    """)
    battery = bench.battery(bench.suite(cases_yaml(
        "{id: err, input: err, expect: [{status: error}]}",
        "{id: nope, input: nope, expect: [{status: refused}]}")), uri, concurrency=2)
    traces = _keep_traces(battery)
    report, timers = run_counting(battery)
    assert [c.outcome for c in report.cases] == ["pass", "pass"]
    err, refused = traces["err"], traces["nope"]
    assert err is not None and (err.status, err.error, err.settled) == ("error", "cannot", False)
    assert refused is not None and (refused.status, refused.error) == ("refused", "will not")
    assert refused.settled is True
    assert timers < 2


def test_trials_off_the_lane_share_its_concurrency(bench: Bench) -> None:
    # A blocking check (a function grader) keeps its trials on today's path; the run mixes
    # them with the lane's, and no more agents run at once than the concurrency.
    name, _ = bench.module("""
        def grade(trace):
            return trace.output == "g"
    """, prefix="graders")
    uri, agent = bench.agent("""
        import threading

        LOCK = threading.Lock()
        NOW = [0]
        MOST = [0]
        MEET = threading.Barrier(2, timeout=20)
        GRADED_STARTED = threading.Event()

        def agent(input):
            with LOCK:
                NOW[0] += 1
                MOST[0] = max(MOST[0], NOW[0])
            try:
                if input == "g":
                    GRADED_STARTED.set()
                    MEET.wait()  # the graded trial and the first quick one run at once
                elif input == "q0":
                    MEET.wait()
                else:
                    # Had the lane taken more, this one would run beside the two above.
                    GRADED_STARTED.wait(20)
                return input
            finally:
                with LOCK:
                    NOW[0] -= 1
    """)
    suite = cases_yaml(f'{{id: graded, input: g, expect: [{{grader: "{name}:grade"}}]}}',
                       *(f"{{id: q{i}, input: q{i}, expect: [{{equals: q{i}}}]}}"
                         for i in range(6)))
    report, timers = run_counting(bench.battery(bench.suite(suite), uri, concurrency=2))
    cases = by_id(report)
    (graded,) = cases["graded"].trials
    assert graded.outcome == "pass"
    assert graded.verdicts[0].provenance == f"grader:{name}:grade"
    assert [cases[f"q{i}"].outcome for i in range(6)] == ["pass"] * 6
    assert agent.MEET.broken is False
    assert agent.MOST[0] == 2  # never three at once
    assert timers == 1  # the graded trial's timeout; none for the quick ones


def test_a_failure_of_the_battery_on_the_lane_is_raised(bench: Bench) -> None:
    uri, _ = bench.agent(ECHO_IN_THREAD)
    battery = bench.battery(bench.suite(cases_yaml(
        *(f"{{id: c{i}, input: x{i}, expect: [{{equals: x{i}}}]}}" for i in range(4)))),
        uri, concurrency=2)

    def on_result(case: Any, result: Any) -> None:
        raise RuntimeError("the record could not be written")

    battery.on_result = on_result
    with pytest.raises(RuntimeError, match="could not be written"):
        run_counting(battery)

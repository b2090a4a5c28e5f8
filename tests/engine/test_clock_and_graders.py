"""The injected clock and seed, and graders that run off the event loop."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from assay.engine import stamp
from assay.model import CaseResult, Report

if TYPE_CHECKING:
    from conftest import Bench


def by_id(report: Report) -> dict[str, CaseResult]:
    return {c.id: c for c in report.cases if isinstance(c, CaseResult)}


class FixedClock:
    """Wall time from a list (the last one repeats); monotonic time in steps of 1.5 s."""

    def __init__(self, *moments: datetime) -> None:
        self.moments = list(moments)
        self.ticks = 100.0

    def now(self) -> datetime:
        if len(self.moments) > 1:
            return self.moments.pop(0)
        return self.moments[0]

    def monotonic(self) -> float:
        self.ticks += 1.5
        return self.ticks


START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
END = datetime(2024, 5, 1, 12, 3, 4, 567891, tzinfo=UTC)

SUITE = """
    suite: t/clock@1
    cases:
      - {id: a, input: a, expect: [{equals: a}]}
      - {id: boom, input: boom, expect: [{equals: boom}]}
"""

AGENT = """
    def agent(input):
        if input == "boom":
            raise RuntimeError("broke")
        return input
"""


def test_started_and_finished_are_what_the_clock_says(bench: Bench) -> None:
    uri, _ = bench.agent(AGENT)
    report = bench.run(SUITE, uri, concurrency=1, seed=7, clock=FixedClock(START, END))
    assert report.started_at == "2024-05-01T12:00:00.000Z"
    assert report.finished_at == "2024-05-01T12:03:04.567Z"
    assert report.run_id.startswith("20240501T120000Z-")
    # A trial that broke is timed on the same clock: one tick between two readings.
    assert by_id(report)["boom"].trials[0].duration_s == 1.5


def test_stamp_is_utc_with_a_z() -> None:
    from datetime import timedelta, timezone

    two_hours_east = timezone(timedelta(hours=2))
    assert stamp(datetime(2024, 5, 1, 14, 0, tzinfo=two_hours_east)) == "2024-05-01T12:00:00.000Z"


def test_a_fixed_seed_is_recorded_and_never_makes_run_ids_collide(bench: Bench) -> None:
    # The same seed in the same second (the clock held still) is two runs: a
    # seeded id would give both one name, and the store would confuse them.
    uri, _ = bench.agent(AGENT)
    runs = [bench.run(SUITE, uri, seed=1234, clock=FixedClock(START)) for _ in range(3)]
    assert len({r.run_id for r in runs}) == 3
    assert all(r.run_id.startswith("20240501T120000Z-") for r in runs)
    assert [r.seed for r in runs] == [1234, 1234, 1234]


def test_without_a_seed_one_is_drawn_and_recorded(bench: Bench) -> None:
    uri, _ = bench.agent(AGENT)
    runs = [bench.run(SUITE, uri, clock=FixedClock(START)) for _ in range(2)]
    assert all(isinstance(r.seed, int) for r in runs)
    assert runs[0].seed != runs[1].seed
    assert runs[0].run_id != runs[1].run_id


def test_a_script_grader_works_inside_a_battery(bench: Bench) -> None:
    bench.write("graders/grade.py", """
        import json
        import sys

        trace = json.load(sys.stdin)
        good = trace["output"] == {"answer": 42}
        print("some chatter first")
        print(json.dumps({"outcome": "pass" if good else "fail",
                          "note": "saw " + json.dumps(trace["output"])}))
    """)
    uri, _ = bench.agent("""
        def agent(input):
            return {"answer": input}
    """)
    report = bench.run("""
        suite: t/grader@1
        trials: 2
        cases:
          - {id: right, input: 42, expect: [{grader: ./graders/grade.py}]}
          - {id: wrong, input: 41, expect: [{grader: ./graders/grade.py}]}
    """, uri, concurrency=4)
    cases = by_id(report)
    assert cases["right"].outcome == "pass"
    assert cases["wrong"].outcome == "fail"
    verdict = cases["wrong"].trials[0].verdicts[0]
    assert verdict.outcome == "fail"
    assert verdict.note == 'saw {"answer": 41}'
    assert verdict.provenance == "grader:./graders/grade.py"


def test_a_function_grader_runs_off_the_event_loop(bench: Bench) -> None:
    name, graders = bench.module("""
        import asyncio
        import threading

        SEEN = []

        def grade(trace):
            try:
                asyncio.get_running_loop()
                on_loop = True
            except RuntimeError:
                on_loop = False
            SEEN.append((on_loop, threading.current_thread() is threading.main_thread()))
            if on_loop:
                return ("fail", "graded on the event loop")
            return trace.output == "yes"
    """, prefix="graders")
    uri, _ = bench.agent("""
        async def agent(input):
            return input
    """)
    report = bench.run(f"""
        suite: t/grader@1
        trials: 2
        cases:
          - {{id: good, input: "yes", expect: [{{grader: "{name}:grade"}}]}}
          - {{id: bad, input: "no", expect: [{{grader: "{name}:grade"}}]}}
    """, uri)
    cases = by_id(report)
    assert graders.SEEN == [(False, False)] * 4
    assert cases["good"].outcome == "pass"
    assert cases["bad"].outcome == "fail"

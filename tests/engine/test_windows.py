"""Batteries by window: where a window starts, and one stored battery per window.

The flooring is checked at every boundary with a clock the test holds; the
runs go through ``engine.runs.run_suites`` into a real SQLite store (the
writer process included), and the store is read back by its rows and its
ledger. The race between processes is in tests/cli/test_windows.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.engine.runs import RunResult, RunSettings, run_suites
from assay.engine.windows import Window, current_window, window_at, window_start
from assay.errors import UsageError
from assay.store import schema
from assay.store.database import open_store
from assay.store.ledger.keys import signing_key
from assay.store.runs.record import LocalSink

from .conftest import Bench

TICK = timedelta(microseconds=1)


class HeldClock:
    """A clock that reads the moment the test set."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment

    def monotonic(self) -> float:
        return 0.0


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


@pytest.mark.parametrize(("size", "boundary", "before"), [
    ("1h", at(2025, 1, 6, 11), at(2025, 1, 6, 10)),
    ("1h", at(2025, 1, 1, 0), at(2024, 12, 31, 23)),  # the hour that ends a year
    ("24h", at(2025, 1, 7), at(2025, 1, 6)),
    ("24h", at(2024, 3, 1), at(2024, 2, 29)),  # a leap day
    ("7d", at(2025, 1, 6), at(2024, 12, 30)),  # Monday 6 January; the week before began in 2024
    ("7d", at(2025, 1, 13), at(2025, 1, 6)),
])
def test_a_window_starts_at_its_boundary_and_the_moment_before_is_the_window_before(
        size: str, boundary: datetime, before: datetime) -> None:
    clock = HeldClock(boundary)
    assert current_window(size, clock).start == boundary
    clock.moment = boundary - TICK
    assert current_window(size, clock).start == before
    clock.moment = boundary + TICK
    assert current_window(size, clock).start == boundary


@pytest.mark.parametrize(("size", "start", "length"), [
    ("1h", at(2025, 1, 8, 10), timedelta(hours=1)),
    ("24h", at(2025, 1, 8), timedelta(days=1)),
    ("7d", at(2025, 1, 6), timedelta(days=7)),
])
def test_every_moment_of_a_window_floors_to_its_start(
        size: str, start: datetime, length: timedelta) -> None:
    steps = [timedelta(0), timedelta(minutes=1), length / 2, length - timedelta(seconds=1),
             length - TICK]
    assert {window_start(size, start + step) for step in steps} == {start}
    assert window_start(size, start + length) == start + length


def test_a_window_is_taken_in_utc_whatever_the_moments_zone() -> None:
    # Monday 01:30 in UTC+2 is Sunday 23:30 UTC: the day before, the week before.
    moment = datetime(2025, 1, 13, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    assert window_at("1h", moment).start == at(2025, 1, 12, 23)
    assert window_at("24h", moment).start == at(2025, 1, 12)
    assert window_at("7d", moment).start == at(2025, 1, 6)
    assert window_at("24h", moment).start.tzinfo == UTC


def test_a_window_without_a_zone_or_of_another_size_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_start("1h", datetime(2025, 1, 6, 10))  # noqa: DTZ001 - the point of the test
    with pytest.raises(ValueError, match="no window size '2h'"):
        window_start("2h", at(2025, 1, 6))


def test_a_window_is_named_after_suite_agent_version_and_start() -> None:
    window = window_at("24h", at(2025, 1, 6, 17, 45, 3))
    assert window == Window("24h", at(2025, 1, 6))
    assert window.label == "24h@2025-01-06T00:00:00Z"
    assert window.name("t/w@1", "sha256:ab") == "t/w@1 sha256:ab 24h@2025-01-06T00:00:00Z"


AGENT = """
calls = []

def agent(input):
    calls.append(input)
    return {"echo": input}
"""
SUITE = """
suite: t/windows@1
cases:
  - {id: a, input: x, expect: [{path: $.echo, equals: x}]}
  - {id: b, input: y, expect: [{path: $.echo, equals: y}]}
"""
DAY = window_at("24h", at(2025, 1, 6, 9))


def battery(bench: Bench, url: str, uri: str, window: Window | None) -> RunResult:
    loaded = bench.suite(SUITE)
    [result] = run_suites(lambda: [loaded], [uri], RunSettings(concurrency=2, window=window),
                          db=url)
    return result


def stored(url: str) -> tuple[list[dict[str, object]], list[str], list[str]]:
    """Runs rows (id, status, window), trial run ids, ledger kinds."""
    store = open_store(url)
    r = schema.runs.c
    with store.engine.connect() as connection:
        runs = [dict(row._mapping) for row in connection.execute(
            sa.select(r.run_id, r.status, r.target_digest, r.window_size, r.window_start)
            .order_by(r.started_at))]
        trials = [row.run_id for row in connection.execute(sa.select(schema.trials.c.run_id))]
    kinds = [entry.kind for entry in store.ledger.entries()]
    store.close()
    return runs, trials, kinds


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'assay.db'}"


def test_one_battery_per_window_a_second_run_registers_nothing(bench: Bench, url: str) -> None:
    uri, module = bench.agent(AGENT)
    first = battery(bench, url, uri, DAY)
    assert first.report is not None and first.report.seal is not None and first.existing is None
    before = stored(url)
    assert before[2] == ["run-registered", "trial-verdict", "trial-verdict", "run-sealed"]

    # Later the same day: the window's battery is that run; the agent is not called again.
    again = battery(bench, url, uri, window_at("24h", at(2025, 1, 6, 23, 59, 59)))
    assert again.report is None and again.harness_failure is None
    assert again.existing == (first.report.run_id, "sealed")
    assert stored(url) == before
    assert len(module.calls) == 2

    runs, trials, _ = before
    assert [(row["run_id"], row["window_size"], row["window_start"]) for row in runs] == \
        [(first.report.run_id, "24h", "2025-01-06T00:00:00Z")]
    assert set(trials) == {first.report.run_id}


def test_the_registration_entry_names_the_window(bench: Bench, url: str) -> None:
    uri, _ = bench.agent(AGENT)
    result = battery(bench, url, uri, DAY)
    assert result.report is not None
    store = open_store(url)
    [registered] = [e for e in store.ledger.entries() if e.kind == "run-registered"]
    content = json.loads(store.ledger.content(registered.content_digest) or b"")
    store.close()
    digest = result.report.target.digest
    assert content["window"] == {"name": f"t/windows@1 {digest} 24h@2025-01-06T00:00:00Z",
                                 "size": "24h", "start": "2025-01-06T00:00:00Z"}


def test_another_window_or_another_agent_version_is_another_battery(
        bench: Bench, url: str) -> None:
    uri, module = bench.agent(AGENT)
    ids = []
    for window in (DAY, window_at("24h", at(2025, 1, 7)), window_at("1h", at(2025, 1, 6, 9))):
        result = battery(bench, url, uri, window)
        assert result.report is not None and result.existing is None
        ids.append(result.report.run_id)
    # The agent's file changes: a new agent version, so a new battery of the same window.
    path = bench.root / f"{uri.split(':')[1]}.py"
    path.write_text(path.read_text() + "\n# edited\n")
    edited = battery(bench, url, uri, DAY)
    assert edited.report is not None and edited.existing is None
    ids.append(edited.report.run_id)

    runs, trials, kinds = stored(url)
    assert [row["run_id"] for row in runs] == ids
    assert len({row["target_digest"] for row in runs}) == 2
    assert len(trials) == 8 and set(trials) == set(ids)
    assert kinds.count("run-registered") == kinds.count("run-sealed") == 4
    assert len(module.calls) == 8


def test_runs_without_a_window_never_collide(bench: Bench, url: str) -> None:
    uri, _ = bench.agent(AGENT)
    results = [battery(bench, url, uri, None) for _ in range(2)]
    assert all(r.report is not None and r.existing is None for r in results)
    runs, _, _ = stored(url)
    assert [(row["window_size"], row["window_start"]) for row in runs] == [(None, None)] * 2


def test_an_open_battery_holds_its_window(bench: Bench, url: str) -> None:
    """A battery still running (or stopped part-way) is the window's: no second one starts."""
    from assay.engine.battery import RunStart
    from assay.engine.record import RunRecorder

    uri, module = bench.agent(AGENT)
    loaded = bench.suite(SUITE)
    sealed = battery(bench, url, uri, None)  # only to learn the agent's digest
    assert sealed.report is not None
    store = open_store(url)
    recorder = RunRecorder(LocalSink(store, signing_key(url)))
    start = RunStart(run_id="open-one", seed=1, started_at="2025-01-06T09:00:00.000Z",
                     target_uri=uri, target_digest=sealed.report.target.digest)
    assert recorder.register(start, loaded, 1, {}, DAY) is None
    store.close()

    again = battery(bench, url, uri, DAY)
    assert again.existing == ("open-one", "open")
    assert len(module.calls) == 2  # only the first run's


def test_a_window_without_the_store_is_refused(bench: Bench, url: str) -> None:
    uri, module = bench.agent(AGENT)
    loaded = bench.suite(SUITE)
    with pytest.raises(UsageError, match="--no-store"):
        run_suites(lambda: [loaded], [uri], RunSettings(window=DAY), db=url, store=False)
    assert module.calls == []


def test_batteries_lists_the_sealed_runs_of_one_suite_and_agent_newest_first(
        bench: Bench, url: str) -> None:
    uri, _ = bench.agent(AGENT)
    other, _ = bench.agent(AGENT)  # another module: another agent version
    plain = battery(bench, url, uri, None)
    day = battery(bench, url, uri, DAY)
    hour = battery(bench, url, uri, window_at("1h", at(2025, 1, 6, 9)))
    battery(bench, url, other, DAY)
    assert plain.report and day.report and hour.report
    store = open_store(url)
    listed = store.batteries("t/windows@1", day.report.target.digest)
    assert store.batteries("t/windows@1", "sha256:none") == []
    assert store.batteries("t/other@1", day.report.target.digest) == []
    store.close()
    assert [b.run_id for b in listed] == [hour.report.run_id, day.report.run_id,
                                         plain.report.run_id]
    assert [b.window for b in listed] == ["1h@2025-01-06T09:00:00Z", "24h@2025-01-06T00:00:00Z",
                                          None]
    assert [b.started_at for b in listed] == sorted((b.started_at for b in listed), reverse=True)

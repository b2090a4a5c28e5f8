"""A queued run as a worker finds it registered: its suite loaded again from the files the
run was started from and checked against the digests it registered, its settings, its
battery's options and its judges — what a chunk and the seal both start from.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AssayError

if TYPE_CHECKING:
    from ..engine.battery import BatteryOptions
    from ..engine.runs import RunSettings
    from ..judging.panel import Panel
    from ..judging.simulated_user import UserSimulator
    from ..store.database import OpenRun
    from ..suites import LoadedSuite


class Refused(AssayError):
    """This worker cannot run the run's trials (another agent, another suite); says why."""


def queue_options(stored: OpenRun) -> dict[str, Any]:
    """The ``queue`` part of a run's options (what the submitter recorded for the workers)."""
    found = stored.options.get("queue")
    if not isinstance(found, dict):
        raise Refused(f"run {stored.run_id} was not started on the queue")
    return found


def load_registered(stored: OpenRun, workers: int) -> tuple[LoadedSuite, RunSettings]:
    """The run's suite loaded from its files, checked against what it registered; its settings.

    ``Refused`` names what differs (the suite, its hidden set), never a case.
    """
    from ..engine.runs import RunSettings
    from ..grading.adaptive import DEFAULT_MAX_TRIALS
    from ..judging.options import JudgeOptions
    from ..suites import discover

    queued = queue_options(stored)
    hidden_dir = queued.get("hidden_dir")
    cwd = queued.get("cwd")
    if isinstance(cwd, str) and cwd not in sys.path:
        sys.path.insert(0, cwd)  # python: targets name modules from where the run started
    paths = [Path(p) for p in queued.get("paths") or []]
    try:
        found = [item for item in discover(paths, Path(hidden_dir) if hidden_dir else None)
                 if item.suite.id == stored.suite_id]
    except AssayError as error:
        # Its type only: a suite file's error may quote a hidden case.
        raise Refused(f"run {stored.run_id}: its suite cannot be loaded here from "
                      f"{', '.join(str(p) for p in paths)} ({type(error).__name__})") from None
    if not found:
        raise Refused(f"run {stored.run_id}: no suite {stored.suite_id} under "
                      f"{', '.join(str(p) for p in paths)} on this machine")
    loaded = found[0]
    if loaded.digest != stored.suite_digest or loaded.hidden_digest != stored.hidden_set:
        which = "suite" if loaded.digest != stored.suite_digest else "hidden set"
        raise Refused(f"run {stored.run_id}: the {which} of {stored.suite_id} here is not the "
                      "one the run registered")
    adaptive = stored.options.get("adaptive")
    judges = JudgeOptions(judge=queued.get("judge"), base_url=queued.get("judge_base_url"),
                          concurrency=workers, cache=queued.get("judge_cache", True) is True)
    settings = RunSettings(
        trials=stored.options.get("trials"), concurrency=workers,
        timeout_s=stored.options.get("timeout_s"), seed=stored.seed,
        base_url=queued.get("base_url"), upstreams=_upstreams(queued.get("upstreams")),
        judges=judges, review=queued.get("review", "both"),
        user_model=queued.get("user_model"),
        adaptive=adaptive is not None,
        max_trials=(adaptive or {}).get("max_trials", DEFAULT_MAX_TRIALS))
    return loaded, settings


def _upstreams(value: Any) -> tuple[tuple[str, str], ...]:
    """The upstream URLs the run was started with (``--upstream-openai`` …, settings).

    None recorded (a run enqueued before they travelled, or started without
    them): the worker's own environment names them, as for a local run.
    """
    if not isinstance(value, dict):
        return ()
    return tuple((api, url) for api, url in sorted(value.items())
                 if isinstance(api, str) and isinstance(url, str) and url)


def battery_options(settings: RunSettings) -> BatteryOptions:
    """How a worker's batteries of this run go (the run's registered choices)."""
    from ..engine.battery import BatteryOptions

    return BatteryOptions(concurrency=settings.concurrency, trials=settings.trials,
                          timeout_s=settings.timeout_s, seed=settings.seed,
                          adaptive=settings.adaptive, max_trials=settings.max_trials)


def make_panel(loaded: LoadedSuite, settings: RunSettings) -> Panel | None:
    """The run's judges, when its suite asks opinions."""
    from ..engine.runs import judge_options
    from ..judging.opinion import asks_opinions
    from ..judging.panel import Panel

    if not any(asks_opinions(case) for case in loaded.suite.cases):
        return None
    return Panel(loaded.suite, judge_options(settings))


def make_users(loaded: LoadedSuite, settings: RunSettings) -> UserSimulator | None:
    """The run's simulated users (SPEC §16), when its suite has any: as the submitter
    registered them (its ``--user-model``), served where its judges are."""
    from ..engine.runs import judge_options
    from ..judging.simulated_user import UserSimulator

    if not any(case.user is not None for case in loaded.suite.cases):
        return None
    return UserSimulator(loaded.suite, judge_options(settings), user_model=settings.user_model)



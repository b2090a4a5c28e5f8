"""A run's whole life in one place: open the record, start the target, register, run, seal.

The command line, the workbench, the pytest plugin and a queue worker all
start runs through here, so a run is registered, versioned, interrupted,
resumed and sealed the same way whoever asked for it
(docs/decisions/0019-agent-version.md). This module decides nothing about
exit codes and prints nothing: what the caller shows goes through a
``Watcher``.

The order is the point:

1. the record opens (a writer process forks while the suites load);
2. the target starts — a target that cannot start is a harness failure and
   leaves nothing registered, so nothing un-runnable is offered for resume;
3. its identity is taken (the agent version) and the run registered with it,
   or, for a resume, checked against the one registered, naming what changed;
   a battery by window whose window has its run already stops here, having
   registered nothing (``RunResult.existing``, docs/decisions/0026-windows.md);
4. the battery runs; its trials are recorded in batches as they finish;
5. the run is sealed with its report (an interrupted run with what finished).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import AssayError, HarnessFailure, UsageError
from ..grading.adaptive import DEFAULT_MAX_TRIALS
from ..store.runs.trials import Sink
from . import collector

if TYPE_CHECKING:
    from ..judging.options import JudgeOptions
    from ..model import Report
    from ..store.runs.trials import Holder
    from ..suites import LoadedSuite
    from ..targets import Target
    from .battery import Resume, RunStart
    from .windows import Window


@dataclass(frozen=True)
class RunSettings:
    """How runs go: the battery's options and where ``openai:`` targets are served."""

    trials: int | None = None
    concurrency: int = 8
    timeout_s: float | None = None
    seed: int | None = None
    base_url: str | None = None
    #: ``--upstream-openai`` …: the real endpoints behind an ``exec:`` agent's proxy.
    upstreams: tuple[tuple[str, str], ...] = ()
    #: ``--otel``: ``python:`` agents' in-process spans are collected per trial.
    otel: bool = False
    #: Run each (suite, target) as the battery of this window: at most one run per
    #: suite id, agent version and window is stored (``engine.windows``).
    window: Window | None = None
    #: Who judges the quality checks (``--judge``, ``--judge-base-url``, the judge cache).
    judges: JudgeOptions | None = None
    #: The run whose recorded outputs this one judges again (``assay rejudge``).
    rejudge_of: str | None = None
    #: ``--agent-cache``: the model calls of ``openai:`` targets are kept and served
    #: again (``targets.agent_cache``, docs/decisions/0033-agent-cache.md).
    agent_cache: bool = False
    #: ``--review``: which trials the sealed run queues for a person (``review.queue``).
    review: str = "both"
    #: ``--adaptive``: cases with quality checks add trials while one straddles its
    #: threshold, up to ``max_trials`` each (docs/decisions/0036-adaptive-runs.md).
    adaptive: bool = False
    max_trials: int = DEFAULT_MAX_TRIALS
    #: ``--hidden-dir``, as the suites were loaded with it: a queued run records it for
    #: its workers, which load the suite from the same files.
    hidden_dir: Path | None = None
    #: ``--keep-workspaces DIR``: public trials' final workspaces are kept there.
    keep_workspaces: Path | None = None
    #: ``--user-model``: who plays a simulated user whose case names no model, before
    #: the suite's ``user_model`` (SPEC §16).
    user_model: str | None = None


class Watcher(Protocol):
    """What a caller shows while runs go (the terminal's progress bar, a page's events)."""

    def battery(self, label: str,
                total: int | None) -> AbstractContextManager[Callable[[str], None]]:
        """A context for one battery of ``total`` trials; it yields the per-trial callback.

        ``total`` is None when it is not known ahead: an adaptive battery adds
        trials as it goes.
        """

    def notice(self, text: str) -> None:
        """Something the user should know that is not a result (e.g. a resume's progress)."""

    def registered(self, run_id: str) -> None:
        """The run is in the store under ``run_id`` (registered, or reopened for a resume).

        Called once per run, before its first trial: from here a reader of the
        store (``assay show --follow``, the workbench) can follow it, and a
        caller that started this process can be told which run it is.
        """


class QuietWatcher:
    """Shows nothing (tests, embedding)."""

    def battery(self, label: str,
                total: int | None) -> AbstractContextManager[Callable[[str], None]]:
        """A context yielding a callback that does nothing."""
        return contextlib.nullcontext(lambda outcome: None)

    def notice(self, text: str) -> None:
        """Nothing."""

    def registered(self, run_id: str) -> None:
        """Nothing."""


class Executor(Protocol):
    """Where a run's batteries go once their suites are loaded, when not here.

    ``run_suites`` runs batteries in this process unless it is handed an
    executor; the queue's (``queue.submit.QueueExecutor``) enqueues them for
    ``assay worker`` processes instead. The caller that takes the user's
    choice (the command line, a schedule) picks one: the engine does not know
    which executors exist.
    """

    def refuse(self, settings: RunSettings, db: str | None, store: bool) -> None:
        """Raise ``UsageError`` naming what this executor cannot do, before anything loads."""

    def execute(self, load: Callable[[], Sequence[LoadedSuite]], targets: Sequence[str],
                settings: RunSettings, watcher: Watcher, db: str | None) -> list[RunResult]:
        """Load the suites (``checked_plans``) and hand each (suite, target) battery on."""


@dataclass
class RunResult:
    """One run's end: its full (unredacted, sealed when recorded) report, or why it never ran."""

    suite_id: str
    target_uri: str
    report: Report | None = None
    interrupted: bool = False
    #: The harness could not run it (a target that cannot start): the reason.
    harness_failure: str | None = None
    #: The window's battery existed already (open or sealed): that run. Nothing ran,
    #: nothing was registered, and ``report`` is None.
    existing: Holder | None = None
    #: A queued run (``--executor queue``): its id, known once it is registered.
    run_id: str | None = None
    #: Queued and not followed to its seal (``--detach``, or the follower stopped):
    #: ``report`` is None and the battery goes on in the workers.
    detached: bool = False


@dataclass
class _Recording:
    sink: Sink
    resume: Resume | None = None
    #: The identity a resumed run registered ({} for runs registered before identities).
    identity: dict[str, str] = field(default_factory=dict)
    target_digest: str | None = None
    #: Waits until the store is open (``OpenSink.ready``), asked once the battery is made
    #: and just before it starts: the writer process opens the store meanwhile.
    ready: Callable[[], None] | None = None


class _NotReady(Exception):  # noqa: N818 - carries the store's own error, raised as it is
    """The store could not be opened: ``failure`` stops everything, as it would have before
    the battery was made, not just this run (``_run_one`` raises it as it is)."""

    def __init__(self, failure: AssayError) -> None:
        super().__init__(str(failure))
        self.failure = failure


class OpenSink(Sink, Protocol):
    """A sink a run opens before loading suites and stops at the end."""

    def ready(self) -> None:
        """Wait until the store is open; raise what stopped it."""

    def stop(self) -> None:
        """Close the store (or the writer process)."""


def run_suites(load: Callable[[], Sequence[LoadedSuite]], targets: Sequence[str],
               settings: RunSettings, *, db: str | None, store: bool = True,
               watcher: Watcher | None = None, sink: OpenSink | None = None,
               executor: Executor | None = None) -> list[RunResult]:
    """Load suites (``load``), run each against its targets (``targets`` or the suite's own),
    record and seal each run unless ``store`` is False; stop at an interrupt.

    ``executor``: where the batteries go instead of running here (``Executor``).

    ``load`` runs while the store opens in the writer process; a store that
    cannot be opened stops everything before any trial (``sink.ready``).
    ``sink`` is the record ``open_sink(db)`` opened already, for a caller that
    forks the writer before importing what a run needs (``assay run``); it is
    stopped here either way.
    """
    watcher = watcher or QuietWatcher()
    if settings.window is not None and not store:
        if sink is not None:
            sink.stop()
        # The store's unique index is what keeps one battery per window: none without it.
        raise UsageError("--window names a stored battery: it cannot go with --no-store")
    if executor is not None:
        try:
            executor.refuse(settings, db, store)
        except UsageError:
            if sink is not None:
                sink.stop()
            raise
    if settings.window is not None and settings.agent_cache:
        if sink is not None:
            sink.stop()
        raise UsageError(_WINDOW_AND_CACHE)
    thresholds = collector.tune_gc()
    try:
        if not store:
            if sink is not None:
                sink.stop()
            plans = checked_plans(load, targets, settings, watcher)
            return _run_all(plans, settings, watcher, None)
        if executor is not None:
            if sink is not None:
                sink.stop()
            return executor.execute(load, targets, settings, watcher, db)
        if sink is None:
            sink = open_sink(db)
        try:
            plans = checked_plans(load, targets, settings, watcher)
            # Not waited for here: each run waits once its battery is made (_Recording.ready),
            # so that making it (its target, its registration's parts) overlaps the writer
            # process's start, which a warm suite load no longer hides.
            return _run_all(plans, settings, watcher, sink, ready=sink.ready)
        finally:
            sink.stop()
    finally:
        collector.restore_gc(thresholds)


def resume_run(run_id: str, load: Callable[[str], Sequence[LoadedSuite]],
               targets: Sequence[str], settings: RunSettings, *, db: str | None,
               watcher: Watcher | None = None) -> RunResult:
    """Finish an open run: only its missing trials, with the suite and agent it registered.

    ``load(suite_id)`` loads the suites with that id. Refused (``UsageError``)
    when the run is sealed, another target or trial count is asked for, or
    the suite, hidden set or agent changed since registration — naming what.
    An adaptive run goes on adaptive, with its cap: both are the run's options.
    """
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key
    from ..store.runs.record import LocalSink
    from .battery import Resume

    watcher = watcher or QuietWatcher()
    if settings.window is not None:
        raise UsageError("--window names a new battery; a resume finishes the run it registered")
    key = signing_key(db)
    store = open_store(db)
    thresholds = collector.tune_gc()
    try:
        stored = store.open_run(run_id)
        if stored.status != "open":
            raise UsageError(f"run {run_id} is sealed: there is nothing to resume")
        if targets and list(targets) != [stored.target_uri]:
            raise UsageError(f"run {run_id} registered the target {stored.target_uri}; "
                             "a resume runs that target only")
        if settings.trials or settings.seed is not None or settings.agent_cache \
                or settings.adaptive:
            raise UsageError("--trials, --seed, --agent-cache and --adaptive were fixed when the "
                             "run was registered; a resume takes them from the store")
        registered_user = stored.options.get("user_model")
        if settings.user_model is not None and settings.user_model != registered_user:
            # Its simulated users are part of what the run is: never mixed within one.
            raise UsageError(f"run {run_id} registered its simulated users' model "
                             f"({registered_user or 'the cases and the suite'}); a resume "
                             "runs them with it: leave --user-model out")
        loaded = list(load(stored.suite_id))
        if not loaded:
            raise UsageError(f"run {run_id}: no suite {stored.suite_id} under the paths given")
        item = loaded[0]
        if item.digest != stored.suite_digest or item.hidden_digest != stored.hidden_set:
            which = "suite" if item.digest != stored.suite_digest else "hidden set"
            raise UsageError(f"run {run_id}: the {which} of {stored.suite_id} changed since the "
                             "run was registered; a resumed run must run what it registered")
        done = store.load_trials(run_id)
        options = dict(stored.options)
        identity = options.pop("target_identity", None) or {}
        adaptive = options.get("adaptive")
        resume = Resume(run_id=run_id, seed=stored.seed or 0, started_at=stored.started_at,
                        done=done)
        settings = RunSettings(trials=options.get("trials"),
                               timeout_s=settings.timeout_s or options.get("timeout_s"),
                               concurrency=settings.concurrency, base_url=settings.base_url,
                               upstreams=settings.upstreams, judges=settings.judges,
                               agent_cache=options.get("agent_cache") is True,
                               otel=options.get("otel") is True,
                               user_model=registered_user if isinstance(registered_user, str)
                               else None,
                               adaptive=adaptive is not None,
                               max_trials=(adaptive or {}).get("max_trials", DEFAULT_MAX_TRIALS))
        _check_judges([(item, stored.target_uri)], settings)
        _check_conversations([(item, stored.target_uri)], settings)
        watcher.notice(f"resuming run {run_id}: {len(done)} trial(s) recorded")
        recording = _Recording(LocalSink(store, key), resume, identity, stored.target_digest)
        return _run_one(item, stored.target_uri, settings, watcher, recording)
    finally:
        store.close()
        collector.restore_gc(thresholds)


def open_sink(db: str | None) -> OpenSink:
    """The writer process where the platform can fork; else the store, opened here."""
    from ..store.runs.recorder_process import fork_available, start_writer

    if fork_available():
        # The database libraries are the writer process's: not imported here.
        return start_writer(db)
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key
    from ..store.runs.record import LocalSink

    key = signing_key(db)
    return LocalSink(open_store(db), key, owned=True)


def checked_plans(load: Callable[[], Sequence[LoadedSuite]], targets: Sequence[str],
                  settings: RunSettings, watcher: Watcher) -> list[tuple[LoadedSuite, str]]:
    """The suites ``load`` gives, each paired with its targets (``targets`` or the suite's
    own), refused now for what would fail later: a judge not named; ``--judge``,
    ``--agent-cache`` or ``--adaptive`` where nothing could use them."""
    plans = _plans(load(), targets)
    _check_workspaces(plans)
    _check_invocations(plans)
    _check_conversations(plans, settings)
    _check_judges(plans, settings)
    _check_agent_cache(plans, settings, watcher)
    _check_adaptive(plans, settings)
    return plans


def _plans(loaded: Sequence[LoadedSuite], given: Sequence[str]) -> list[tuple[LoadedSuite, str]]:
    gc.freeze()  # the loaded suites live as long as the runs: never rescan them
    plans: list[tuple[LoadedSuite, str]] = []
    for item in loaded:
        if given:
            plans.extend((item, uri) for uri in given)
        elif item.suite.target:
            plans.append((item, item.suite.target))
        else:
            raise UsageError(f"{item.path}: suite {item.suite.id} names no target; "
                             "give --target URI")
    return plans


def _check_workspaces(plans: Sequence[tuple[LoadedSuite, str]]) -> None:
    """A suite with a workspace runs only on targets that can give an agent one (SPEC §14),
    and a host is given its folder as ``workspace:``, not ``fixture:``: refused now, at the
    case that asks, as a load error (exit 2), before anything runs."""
    from ..errors import SuiteError
    from ..suites.build import WITHHELD
    from ..targets import folder_fixture_refusal, workspace_refusal

    for item, uri in plans:
        for case, why in ((item.workspace_case, workspace_refusal(uri)),
                          (item.folder_fixture_case, folder_fixture_refusal(uri))):
            if case is None or why is None:
                continue
            hidden = case.split == "hidden"
            what = "a hidden case" if hidden else f"case {case.id!r}"
            if case is item.folder_fixture_case:
                said = f"{what}: fixture {case.fixture!r}: {why} (did you mean workspace: " \
                    f"{case.fixture}?)" if not hidden else \
                    f"{what}: its fixture is a folder; {why} {WITHHELD}"
            else:
                said = f"{what} has a workspace, which target {uri} cannot give: {why}"
            raise SuiteError(case.file or str(item.path), case.line if not hidden else None,
                             said)


def _check_conversations(plans: Sequence[tuple[LoadedSuite, str]],
                         settings: RunSettings) -> None:
    """A conversation runs only on a target that can hold one, and a simulated user only
    with a model to play it (SPEC §16): refused now, at the case, as a load error (exit 2);
    its server's address and ``--user-model`` are checked as a judge's are (exit 2)."""
    from ..errors import SuiteError
    from ..judging.simulated_user import UserSimulator
    from ..targets import conversation_refusal

    for item, uri in plans:
        refusals = []
        why = conversation_refusal(uri)
        if why is not None:
            refusals.append((item.conversation_case, f"is a conversation, which target {uri} "
                                                     f"cannot hold: {why}"))
        if settings.user_model is None and item.suite.user_model is None:
            refusals.append((item.unmodelled_user_case,
                             "has a simulated user and no model to play it: give it "
                             "model: openai:MODEL, or the suite user_model: openai:MODEL, or "
                             "pass --user-model openai:MODEL"))
        for case, said in refusals:
            if case is None:
                continue
            hidden = case.split == "hidden"
            what = "a hidden case" if hidden else f"case {case.id!r}"
            raise SuiteError(case.file or str(item.path), case.line if not hidden else None,
                             f"{what} {said}")
        if item.simulated_case is not None:
            # Its server and model checked now, as a judge's are: made and let go.
            UserSimulator(item.suite, judge_options(settings), user_model=settings.user_model)


def _check_invocations(plans: Sequence[tuple[LoadedSuite, str]]) -> None:
    """A case whose invocation names a skill runs only where the target can come to it: a
    host that looks where the skill is, and for ``explicit`` a host at all (SPEC §2);
    refused now, at the case, as a load error (exit 2), before anything runs."""
    from ..errors import SuiteError
    from ..suites.build import WITHHELD
    from ..targets import skill_refusal

    for item, uri in plans:
        for use in item.skill_uses:
            why = skill_refusal(uri, use.invocation.mode, use.invocation.skill, use.hosts,
                                use.found)
            if why is None:
                continue
            case = use.case
            hidden = case.split == "hidden"
            said = f"case {case.id!r}: invocation {use.invocation.mode} of skill " \
                f"{use.invocation.skill!r} cannot run on target {uri}: {why}" if not hidden \
                else f"a hidden case's invocation cannot run on target {uri} {WITHHELD}"
            raise SuiteError(case.file or str(item.path), case.line if not hidden else None,
                             said)


def judge_options(settings: RunSettings) -> JudgeOptions:
    """Who judges this run's quality checks: the given options, priced, at its concurrency."""
    from dataclasses import replace

    from ..judging.options import JudgeOptions
    from ..targets.prices import load_prices

    given = settings.judges or JudgeOptions()
    # The judges' answers are priced like the agent's: the shipped table plus the
    # user's ASSAY_PRICES (a bad file is a usage error here, before anything runs).
    prices = given.prices if given.prices is not None else load_prices(dict(given.env))
    return replace(given, concurrency=settings.concurrency, prices=prices)


def _check_judges(plans: Sequence[tuple[LoadedSuite, str]], settings: RunSettings) -> None:
    """Every suite that asks opinions can be judged: its judges named and reachable by name.

    Checked before anything runs: a missing judge is a usage error now, not
    a battery of inconclusive trials later.
    """
    from ..judging.opinion import suite_asks_opinions

    seen: set[int] = set()
    for item, _ in plans:
        if id(item) in seen or not suite_asks_opinions(item.suite.cases):
            continue
        seen.add(id(item))
        from ..judging.panel import Panel

        Panel(item.suite, judge_options(settings))
    if not seen and settings.judges is not None and settings.judges.judge is not None:
        # A flag that would silently do nothing is refused (EXAMPLES: refuse with the reason).
        raise UsageError("--judge: no suite run here has a judged check (judge, rubric); "
                         "its checks are deterministic, and a judge would decide nothing")


_WINDOW_AND_CACHE = ("--window measures the agent as it answers in its window; --agent-cache "
                     "serves answers kept from earlier calls: they cannot go together")


def _check_agent_cache(plans: list[tuple[LoadedSuite, str]], settings: RunSettings,
                       watcher: Watcher) -> None:
    """Refuse ``--agent-cache`` when no target of the run can use it; name those that run uncached.

    A flag that would silently do nothing is refused: only ``openai:`` targets
    make model calls of assay's own (a host CLI makes its inside its process).
    """
    from ..targets.agent_cache import caches_model_calls
    from ..targets.call_cache import cache_root

    if not settings.agent_cache:
        return
    uncached = list(dict.fromkeys(uri for _, uri in plans if not caches_model_calls(uri)))
    if len(uncached) == len({uri for _, uri in plans}):
        raise UsageError("--agent-cache keeps the model calls assay makes for openai:MODEL "
                         "targets; no target of this run is one (a host CLI such as claude "
                         "or codex makes its own calls, and python:, mcp+…, http(s):// and "
                         "scripted: targets make none through assay): leave the flag out")
    watcher.notice(f"--agent-cache: model calls are served from {cache_root() / 'agent'} "
                   "when kept there, and kept there when not; the run is marked agent_cache: on")
    for uri in uncached:
        watcher.notice(f"--agent-cache: {uri} makes no model calls through assay; "
                       "it runs uncached")
def _check_adaptive(plans: Sequence[tuple[LoadedSuite, str]], settings: RunSettings) -> None:
    """``--adaptive`` on runs none of whose cases could adapt is refused, as ``--judge`` is."""
    if not settings.adaptive:
        return
    from .battery import has_quality

    if not any(has_quality(case) for item, _ in plans for case in item.suite.cases):
        raise UsageError("--adaptive: no suite run here has a quality check (judge, rubric, "
                         "similar); its checks are binary, and more trials would not change "
                         "how they fold")


def _run_all(plans: list[tuple[LoadedSuite, str]], settings: RunSettings, watcher: Watcher,
             sink: Sink | None, *, ready: Callable[[], None] | None = None) -> list[RunResult]:
    results = []
    for item, uri in plans:
        result = _run_one(item, uri, settings, watcher,
                          _Recording(sink, ready=ready) if sink is not None else None)
        results.append(result)
        if result.interrupted:
            break
    return results


def _run_one(item: LoadedSuite, uri: str, settings: RunSettings, watcher: Watcher,
             recording: _Recording | None, target: Target | None = None) -> RunResult:
    from .windows import WindowTaken

    result = RunResult(suite_id=item.suite.id, target_uri=uri)
    try:
        asyncio.run(_battery(item, uri, settings, watcher, recording, result, target))
    except _NotReady as not_ready:
        raise not_ready.failure from None
    except HarnessFailure as failure:
        result.harness_failure = str(failure)
    except WindowTaken as taken:
        result.existing = taken.holder
    return result


async def _battery(item: LoadedSuite, uri: str, settings: RunSettings, watcher: Watcher,
                   recording: _Recording | None, result: RunResult,
                   target: Target | None = None) -> None:
    # The report goes out through ``result``, not as the coroutine's return
    # value: on Python 3.11 asyncio.run formats its main task's repr (result
    # included) when it checks the SIGINT handler, which costs seconds for a
    # large report.
    from ..targets import make_target, target_options
    from ..targets.agent_cache import caches_model_calls
    from .battery import Battery, BatteryOptions
    from .record import RunRecorder
    from .windows import WindowTaken

    # Relative names resolve beside the suite file first, then in the working folder.
    cached = settings.agent_cache and caches_model_calls(uri)
    replayed = target is not None
    if target is None:  # given: a rejudge's recorded outputs (engine.rejudge)
        target = make_target(uri, target_options(item.suite, item.path.parent,
                                                 concurrency=settings.concurrency,
                                                 base_url=settings.base_url, agent_cache=cached,
                                                 upstreams=settings.upstreams,
                                                 otel=settings.otel))
    options = BatteryOptions(concurrency=settings.concurrency, trials=settings.trials,
                             timeout_s=settings.timeout_s, seed=settings.seed,
                             rejudge_of=settings.rejudge_of,
                             adaptive=settings.adaptive, max_trials=settings.max_trials,
                             keep_workspaces=settings.keep_workspaces)
    resume = recording.resume if recording is not None else None
    panel = None
    from ..judging.opinion import suite_asks_opinions

    if suite_asks_opinions(item.suite.cases):
        from ..judging.panel import Panel

        panel = Panel(item.suite, judge_options(settings))
    users = None
    if item.simulated_case is not None and not replayed:  # a rejudge replays its turns
        from ..judging.simulated_user import UserSimulator

        users = UserSimulator(item.suite, judge_options(settings),
                              user_model=settings.user_model)
    battery = Battery(item, target, options, resume=resume, panel=panel, users=users)
    recorder: RunRecorder | None = None
    if recording is not None:
        recorder = writer = RunRecorder(recording.sink)
        per_case = settings.trials or item.suite.trials
        chosen: dict[str, Any] = {"trials": settings.trials, "timeout_s": settings.timeout_s}
        if cached:  # only when on: the options of runs without it stay as they were
            chosen["agent_cache"] = True
        if settings.otel and uri.startswith("python:"):  # the same; a resume goes on with it
            chosen["otel"] = True
        if settings.rejudge_of is not None:
            chosen["rejudge_of"] = settings.rejudge_of
        if users is not None and settings.user_model is not None:
            chosen["user_model"] = settings.user_model  # what a resume plays its users with
        cap = settings.max_trials if settings.adaptive else None
        if cap is not None:  # what a resume goes on with (resume_run)
            chosen["adaptive"] = {"max_trials": cap}

        def on_start(start: RunStart) -> None:
            if start.resumed:
                _check_agent(start, recording)
                writer.reopen(start.run_id)
            else:  # registered before any trial runs, with the agent version that started
                if battery.adaptive is None:
                    # How many trials the run will have, for whoever follows it from the
                    # store (the workbench's progress); an adaptive run knows only at its end.
                    chosen["planned"] = battery.planned()
                holder = writer.register(start, item, per_case, chosen, settings.window,
                                         max_trials=cap)
                if holder is not None:  # the window has its battery: run nothing
                    raise WindowTaken(holder)
            watcher.registered(start.run_id)

        if resume is None:
            writer.prepare(item)
        if recording.ready is not None:
            try:
                recording.ready()
            except AssayError as failure:
                writer.discard()
                # Made for the battery that will not run: let go of their clients now.
                if panel is not None:
                    await panel.close()
                if users is not None:
                    await users.close()
                raise _NotReady(failure) from None
        battery.on_start = on_start
        battery.on_result = writer.record
    # An adaptive battery's total is known only at its end.
    total = None if battery.adaptive is not None else battery.planned()
    held_off = collector.HeldCollector(collector.COLLECT_AFTER_BYTES, collector.COLLECT_EVERY)
    with watcher.battery(item.suite.id, total) as on_trial, held_off as held:
        battery.on_trial = held.counting(on_trial)
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            if battery.interrupted:
                os._exit(130)  # a second Ctrl-C: stop now
            battery.interrupt()

        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            try:
                report = await battery.run()
            finally:
                if panel is not None:
                    await panel.close()
                if users is not None:
                    await users.close()
        except BaseException:
            if recorder is not None and recorder.run_id is not None:
                # Keep what finished before the harness failed: a resume needs it.
                with contextlib.suppress(Exception):
                    recorder.close()
            raise
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    if recorder is not None:
        # Sealed once the battery ended (an interrupted run with what finished).
        from ..review.queue import sealed_items

        # Its failing and inconclusive trials are queued for a person in the seal's
        # transaction, as of the battery's end.
        report = recorder.seal(report, sealed_items(report, settings.review,
                                                    report.finished_at))
    result.report = report
    result.interrupted = battery.interrupted


def _check_agent(start: RunStart, recording: _Recording) -> None:
    """A resumed run runs the agent it registered: refuse another version, saying what changed."""
    from ..targets.identity import changes

    if start.target_digest == recording.target_digest:
        return
    if recording.identity:
        what = "; ".join(changes(recording.identity, start.target_identity))
    else:
        what = "its version differs (this run was registered before assay kept what it covers)"
    raise UsageError(f"the agent {start.target_uri} changed since the run was registered: "
                     f"{what}; a resumed run must run what it registered")


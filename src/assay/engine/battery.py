"""The battery: every case × trial against one target, bounded and interruptible.

Data flows one way: the plan becomes trial requests, the target turns each
into a Trace, the checks turn the Trace into verdicts, and the pure grading
core folds those into the run's Report. Progress events carry outcomes only,
never a case's content, so nothing of a hidden case reaches the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
from array import array
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..checks import Opinions, grade_facts, grade_trace_plain, lookup, reads_opinions, verdict_plain
from ..errors import HarnessFailure
from ..grading import RunInfo
from ..grading.adaptive import DEFAULT_MAX_TRIALS, case_adds_trial, first_trials
from ..grading.fold import BINARY_FAMILIES, AnyTrial, fold_case_plain, fold_trial_plain
from ..grading.report import tallied_report
from ..grading.tally import Tally
from ..model import (
    Adaptive,
    Assertion,
    Case,
    Evidence,
    Report,
    SuiteRef,
    TargetRef,
    Trace,
    TrialResult,
)
from ..model.packed import PackedCases
from ..model.records import PlainCase, PlainTrial, PlainVerdict
from ..suites import LoadedSuite
from ..targets import Target, TrialBroken, TrialRequest
from ..targets.base import LaneTarget
from ..targets.identity import identity_digest
from .clock import Clock, SystemClock, stamp
from .lane import Lane, LaneJob
from .spool import CaseSpool

if TYPE_CHECKING:
    from pathlib import Path

    from ..judging.panel import Panel
    from ..judging.simulated_user import TrialUser, UserSimulator
    from ..model.fixture import ToolFixture
    from ..workspaces import Workspace
    from .outcomes import Staging

#: Jobs a lane keeps queued beyond those its threads run, at least (``Battery._lane_room``):
#: a thread that finishes takes the next at once, and the loop is woken once for many
#: results, not once for every few (each wake-up costs tens of µs of thread switches).
_LANE_AHEAD = 64

#: What every trial of one case is run with (``Battery._slot_parts``).
_Parts = tuple[float, "Path | None", "ToolFixture | None", bool, bool, "Path | None"]

#: Called after each trial with its outcome (pass, fail, inconclusive, broken).
OnTrial = Callable[[str], None]
#: Called after each trial with its case and whole result (e.g. to record it): a plain
#: record (``model.records``) or, for a trial recorded before, the model; both read alike.
OnResult = Callable[[Case, AnyTrial], None]


@dataclass(frozen=True)
class RunStart:
    """What is known of a run before its first trial: given to ``on_start``.

    The target has started by then, so its identity — the agent version — is
    complete: ``target_digest`` is the one value the report, the ledger and a
    receipt name.
    """

    run_id: str
    seed: int
    started_at: str
    target_uri: str = ""
    target_digest: str = ""
    target_identity: dict[str, str] = field(default_factory=dict)
    target_facets: dict[str, str] = field(default_factory=dict)
    #: A resumed run: the start of a run registered before (nothing to register).
    resumed: bool = False


#: Called once, after the target started and before any trial runs (to register
#: the run, or to check a resumed run's agent); what it raises stops the run.
OnStart = Callable[[RunStart], None]


@dataclass(frozen=True)
class Resume:
    """A run that stopped part-way: its identity and the trials it already has.

    ``done`` maps (case id, trial index) to the recorded result; the battery
    runs every other planned trial and folds all of them into one report.
    """

    run_id: str
    seed: int
    started_at: str
    done: dict[tuple[str, int], TrialResult]


@dataclass(frozen=True)
class BatteryOptions:
    """How a battery runs. ``trials``/``timeout_s`` override the suite's when set."""

    concurrency: int = 8
    trials: int | None = None
    timeout_s: float | None = None
    seed: int | None = None
    #: The run whose recorded outputs this battery judges again (``assay rejudge``).
    rejudge_of: str | None = None
    #: ``--adaptive``: a case with quality checks starts at ``first_trials`` and adds
    #: one trial at a time while ``grading.adaptive.case_adds_trial`` says so.
    adaptive: bool = False
    #: ``--max-trials``: the most trials an adaptive case runs.
    max_trials: int = DEFAULT_MAX_TRIALS
    #: ``--keep-workspaces DIR``: each public trial's final workspace is moved to
    #: ``DIR/RUN/CASE/TRIAL`` instead of being removed (SPEC §14).
    keep_workspaces: Path | None = None


def has_quality(case: Case) -> bool:
    """Whether the case has a quality check (judge, rubric, similar): one ``--adaptive`` adapts."""
    return any((c := lookup(a.check)) is not None and c.family == "quality" for a in case.expect)


@dataclass
class _Slot:
    case_index: int
    request: TrialRequest
    blocking: bool
    #: Some of the case's checks are read from opinions (judges, a local model).
    judged: bool = False
    #: The folder each trial works in a fresh copy of (SPEC §14), or None.
    workspace: Path | None = None


@dataclass
class _LaneRun:
    """A run through the thread lane, as the loop keeps it (``Battery._run_lane``)."""

    lane: Lane[_Slot]
    plan: Iterator[_Slot]
    #: Set once nothing is left to hand out or in flight (or the battery stopped).
    done: asyncio.Future[None]
    #: The concurrency: agents running at most, and trials in flight while any is on
    #: the other path (``Battery._lane_room``).
    width: int
    #: The plan has given its last trial.
    ended: bool = False
    #: Jobs in the lane, and trials on the other path, not finished yet.
    jobs: int = 0
    others: int = 0
    #: What stopped the run (the first), raised once what was in flight is in.
    failure: BaseException | None = None


class Battery:
    """One suite against one target. ``interrupt()`` stops it; what finished is kept."""

    def __init__(
        self,
        loaded: LoadedSuite,
        target: Target,
        options: BatteryOptions,
        *,
        clock: Clock | None = None,
        on_trial: OnTrial | None = None,
        on_start: OnStart | None = None,
        on_result: OnResult | None = None,
        resume: Resume | None = None,
        panel: Panel | None = None,
        only: Mapping[str, Collection[int] | None] | None = None,
        gate: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
        users: UserSimulator | None = None,
    ) -> None:
        self.loaded = loaded
        #: A part of the battery (a queue worker's chunk): the cases to run, each with
        #: the trial numbers to run (None: every trial it plans, as an adaptive case
        #: adds them). Cases not named are neither run nor folded into anything.
        self.only = only
        #: Entered around each trial, outside its timeout: a queue worker's bound on
        #: trials in flight across its chunks, and the target's permits (``queue``).
        self.gate = gate
        #: The judges of the suite's quality checks (None: the suite has none).
        self.panel = panel
        #: The simulated users of its conversations (None: it has none, or its trials
        #: are replayed from a record, as a rejudge's are).
        self.users = users
        self._judging: set[asyncio.Task[None]] = set()
        # Trials waiting for their judges, at most: a slow judge holds the agents back
        # rather than piling up traces in memory.
        self._backlog = asyncio.Semaphore(2 * max(1, options.concurrency))
        self.target = target
        self.options = options
        self.clock = clock or SystemClock()
        self.on_trial = on_trial or (lambda outcome: None)
        self.on_start = on_start or (lambda start: None)
        self.on_result = on_result
        self.resume = resume
        self.interrupted = False
        #: The agent version, taken once the target started (``run``).
        self.target_digest = ""
        #: The run's id, once ``begin`` named it (a queue worker's chunk has none here).
        self.run_id = ""
        #: The trials' workspaces (``engine.outcomes.Staging``), made at the first one.
        self._staging: Staging | None = None
        self._plan: Iterator[_Slot] | None = None
        #: The thread lane's run, when this battery's trials go through one (``_run_lane``).
        self._lane: _LaneRun | None = None
        self._workers: list[asyncio.Task[None]] = []
        #: Workers whose loop has not ended (an adaptive run starts more when trials are added).
        self._live = 0
        #: An adaptive run's trials not yet taken by a worker (grows as cases add trials).
        self._pending: deque[_Slot] = deque()
        cases = loaded.suite.cases
        position = loaded.positions()
        #: The cases this battery runs, by position: all, or a chunk's few of many (its
        #: state below is kept for these only, so a chunk costs what it runs).
        self._indices = list(range(len(cases))) if only is None else \
            sorted(position[case_id] for case_id in only if case_id in position)
        #: Per case position, the trials a chunk runs (``only``; None: every trial).
        self._chosen: dict[int, Collection[int] | None] = {} if only is None else \
            {position[case_id]: trials for case_id, trials in only.items()
             if case_id in position}
        #: Per case position: its finished trials by number, until the case is final.
        self._results: dict[int, dict[int, AnyTrial]] = {}
        #: Final cases (all their trials in, nothing to add) go to disk and leave their
        #: numbers in the tally: nothing of a case is held once it is final.
        self._spool = CaseSpool(len(cases))
        self._tally = Tally(len(cases))
        self._case_facets: dict[int, dict[str, str]] = {}
        if resume is not None:
            self.seed = resume.seed
            for (case_id, n), result in resume.done.items():
                index = position.get(case_id)
                if index is not None:
                    self._results.setdefault(index, {})[n] = result
        else:
            fresh = random.SystemRandom().getrandbits(32)
            self.seed = options.seed if options.seed is not None else fresh
        self.rng = random.Random(self.seed)
        #: Per case, whether it adapts (``--adaptive`` and a quality check); None when
        #: none does, and the battery runs a fixed plan as it always did.
        self.adaptive: dict[int, bool] | None = None
        if options.adaptive:
            adapts = {index: has_quality(cases[index]) for index in self._indices}
            self.adaptive = adapts if any(adapts.values()) else None
        #: Per case position, the trials planned so far: an adaptive case's grows one at a time.
        self._expected = array("l", [0]) * len(cases)
        if only is None and self.adaptive is None and isinstance(cases, PackedCases):
            # Each case's own trials, read without making 100,000 cases to read one field.
            fallback = options.trials or loaded.suite.trials
            for index, own in enumerate(cases.trials()):
                self._expected[index] = options.trials or own or fallback
        else:
            for index in self._indices:
                self._expected[index] = self._first_trials(index, cases[index])

    def trials_for(self, case: Case) -> int:
        """Trials of one case: the override, else the case's, else the suite's."""
        return self.options.trials or case.trials or self.loaded.suite.trials

    def _first_trials(self, index: int, case: Case) -> int:
        """The trials planned for a case before any finishes (an adaptive one adds to them)."""
        configured = self.trials_for(case)
        if self.adaptive is None or not self.adaptive[index]:
            return configured
        # A resumed case planned every index up to the highest it recorded at least;
        # those count towards the cap, and the rule goes on from there.
        recorded = max(self._results.get(index, ()), default=0)
        return max(first_trials(configured, self.options.max_trials), recorded)

    def plan(self) -> Iterator[_Slot]:
        """Every trial to run, case by case, made as it is taken; a resume skips those it has.

        One iterator, however often it is asked for: what one caller took is
        not given again. A case's request is made when its first trial is
        taken, so the battery holds the cases in flight, not the suite.
        """
        if self._plan is None:
            self._plan = self._make_plan()
        return self._plan

    def planned(self) -> int:
        """How many trials the plan has (an adaptive case's first ones only)."""
        return sum(1 for _ in self.planned_trials())

    def planned_trials(self) -> Iterator[tuple[int, int]]:
        """(case position, trial number) of each trial the plan runs, without making requests."""
        only, results, expected = self.only, self._results, self._expected
        for index in self._indices:
            chosen = self._chosen.get(index) if only is not None else None
            have = results.get(index, ())
            for n in range(1, expected[index] + 1):
                if n not in have and (chosen is None or n in chosen):
                    yield index, n

    def expected(self, index: int) -> int:
        """The trials planned so far for the case at ``index``."""
        return self._expected[index]

    def _make_plan(self) -> Iterator[_Slot]:
        call = self.loaded.suite.call
        cases = self.loaded.suite.cases
        case: Case | None = None
        parts: _Parts | None = None
        last = -1
        for index, n in self.planned_trials():
            if index != last:
                case = cases[index]
                parts, last = self._slot_parts(index, case), index
            assert case is not None and parts is not None
            timeout, fixture, tools, blocking, judged, workspace = parts
            yield _Slot(index, TrialRequest(case=case, n=n, timeout_s=timeout, fixture=fixture,
                                            tools=tools, call=call,
                                            user=None if case.user is None
                                            else self._user(case, n)),
                        blocking, judged, workspace)
        if self.adaptive is None:
            return
        for index in self._indices:
            have = self._results.get(index, {})
            if self.adaptive[index] and have and len(have) == self._expected[index]:
                # Resumed with every planned trial in: the rule is asked now, as the last
                # of them finishing would have asked it.
                folded = self._fold(index)
                added = self._adapt(index, folded)
                if added is not None:
                    yield added
                else:
                    self._final(index, folded)

    def _slot_parts(self, index: int, case: Case | None = None) -> _Parts:
        """What every trial of one case is run with: timeout, fixture, tools, blocking,
        judged, workspace."""
        loaded = self.loaded
        if case is None:
            case = loaded.suite.cases[index]
        timeout = self.options.timeout_s or case.timeout_s or loaded.suite.timeout_s
        blocking = any((c := lookup(a.check)) is not None and c.blocking for a in case.expect)
        judged = self.panel is not None and any(reads_opinions(a) for a in case.expect)
        fixture = loaded.fixture_path(case)
        tools = loaded.fixtures.get(str(fixture)) if fixture is not None else None
        return timeout, fixture, tools, blocking, judged, loaded.workspace_path(case)

    def _user(self, case: Case, n: int) -> TrialUser | None:
        """Trial ``n``'s simulated user, for a case that has one (SPEC §16); else None."""
        if case.user is None or self.users is None:
            return None
        return self.users.for_trial(case, n)

    def _adapt(self, index: int, folded: PlainCase) -> _Slot | None:
        """The next trial of an adaptive case whose planned trials are all in, if it adds one.

        ``grading.adaptive.case_adds_trial`` decides on the case's folded quality
        rates; the trial is planned (``_expected`` grows) and the case is
        folded again once it is in. An interrupted battery adds nothing.
        """
        trials = len(self._results.get(index, ()))
        if self.interrupted or not case_adds_trial(trials, folded.quality,
                                                   self.options.max_trials):
            return None
        n = self._expected[index] = self._expected[index] + 1
        case = self.loaded.suite.cases[index]
        timeout, fixture, tools, blocking, judged, workspace = self._slot_parts(index, case)
        request = TrialRequest(case=case, n=n, timeout_s=timeout,
                               fixture=fixture, tools=tools, call=self.loaded.suite.call,
                               user=self._user(case, n))
        return _Slot(index, request, blocking, judged, workspace)

    def fold_recorded(self, done: Mapping[tuple[str, int], TrialResult]) -> None:
        """Fold the cases these recorded trials belong to, each final at once (a queue's seal).

        The trials were run elsewhere; a case is folded from what ``done``
        holds of it (so give all of a case's trials at once), and nothing is
        added to an adaptive one: its workers added what it needed.
        """
        position = self.loaded.positions()
        for (case_id, n), result in done.items():
            index = position.get(case_id)
            if index is not None and not self._spool.has(index):
                self._results.setdefault(index, {})[n] = result
        for index in sorted({position[c] for c, _ in done if c in position}):
            if not self._spool.has(index):
                self._final(index, self._fold(index))

    def interrupt(self) -> None:
        """Stop: trials in flight are abandoned, finished ones are kept."""
        self.interrupted = True
        if self._lane is not None:
            self._lane_stop()
        for worker in [*self._workers, *self._judging]:
            worker.cancel()

    async def run(self) -> Report:
        """Run the battery and fold it into the full (unredacted) report."""
        # Started first: a target that cannot start leaves nothing registered, and
        # the agent version is taken from what started, once (RunStart).
        await self.target.start()
        try:
            start = self.begin()
            await self.run_trials()
        finally:
            await self.target.close()
        return self.report(start.run_id, start.started_at, stamp(self.clock.now()))

    def begin(self) -> RunStart:
        """Take the started target's identity, name the run and hand it to ``on_start``.

        The target must have started. ``run`` calls it; so does a queue's
        submitter, which registers the run and enqueues it instead of running it.
        """
        identity = self.target.identity()
        self.target_digest = identity_digest(identity)
        if self.resume is not None:
            run_id, started_at = self.resume.run_id, self.resume.started_at
        else:
            started = self.clock.now()
            run_id = f"{started:%Y%m%dT%H%M%S}Z-{secrets.token_hex(4)}"  # never seeded
            started_at = stamp(started)
        start = RunStart(
            run_id=run_id, seed=self.seed, started_at=started_at, target_uri=self.target.uri,
            target_digest=self.target_digest, target_identity=identity,
            target_facets=dict(self.target.facets), resumed=self.resume is not None)
        self.run_id = run_id
        self.on_start(start)
        return start

    async def run_trials(self) -> None:
        """Run the planned trials on the started target (``begin`` first, or a worker's chunk).

        Each finished trial goes to ``on_result`` and ``on_trial``; cases whose
        trials are all in are folded as they finish.
        """
        if self._lane_fits():
            await self._run_lane(self.plan())
            return
        count = max(1, min(self.options.concurrency, self.planned()))
        slots = self.plan()
        # A fixed plan: the workers share one iterator over it. An adaptive one:
        # cases add trials as theirs finish, each worker drains the pending ones
        # and ends when there are none, and _finish starts workers again for
        # trials it adds (never more than ``concurrency`` at once).
        queue = iter(slots) if self.adaptive is None else None
        self._pending.extend(slots if queue is None else ())
        for _ in range(count):
            if self.interrupted or self._live >= count:
                break  # stopped, or an adaptive case's added trial started one already
            self._spawn(queue if queue is not None else self._drain())
            # Each worker takes its first trial before the next one starts: a
            # judged trial's question goes out then, not after every worker's
            # first trial (64 agent calls and gradings, at the start of a run).
            await asyncio.sleep(0)
        # Trials handed to their judges finish here (each is recorded as it does),
        # and so do the workers an adaptive case's added trials started.
        while waiting := [*(w for w in self._workers if not w.done()), *self._judging]:
            await asyncio.gather(*waiting, return_exceptions=True)
        for worker in self._workers:
            if not worker.cancelled() and worker.exception() is not None:
                raise worker.exception()  # type: ignore[misc]

    def report(self, run_id: str, started_at: str, finished_at: str, *,
               target: TargetRef | None = None) -> Report:
        """Fold every case into the full (unredacted) report.

        Cases whose trials all finished were folded as they finished; the rest
        (an interrupted run) are folded from what they have. ``target``: the
        agent as registered, when this battery's target did not run it (a
        queue's seal); by default the target's own.
        """
        suite = self.loaded.suite
        for index in range(len(suite.cases)):
            if not self._spool.has(index):
                self._final(index, self._fold(index))
        if target is None:
            target = TargetRef(uri=self.target.uri, digest=self.target_digest,
                               facets=dict(self.target.facets),
                               evidence=dict(self.target.evidence))
        info = RunInfo(
            run_id=run_id,
            suite=SuiteRef(id=suite.id, digest=self.loaded.digest,
                           hidden_set=self.loaded.hidden_digest,
                           hidden_source=self.loaded.hidden_source),
            target=target, started_at=started_at, finished_at=finished_at,
            trials_per_case=self.options.trials or suite.trials, pass_mark=suite.pass_mark,
            seed=self.seed, interrupted=self.interrupted, rejudge_of=self.options.rejudge_of,
            part=self.loaded.part,
            adaptive=Adaptive(max_trials=self.options.max_trials) if self.options.adaptive
            else None,
        )
        return tallied_report(info, self._tally, self._spool)

    def _spawn(self, queue: Iterator[_Slot]) -> None:
        self._live += 1
        self._workers.append(asyncio.create_task(self._work(queue)))

    def _drain(self) -> Iterator[_Slot]:
        """An adaptive run's pending trials, until there are none (a worker's queue)."""
        pending = self._pending
        while pending:
            yield pending.popleft()

    async def _work(self, queue: Iterator[_Slot]) -> None:
        gate = self.gate
        try:
            for slot in queue:
                if gate is None:
                    result = await self._trial(slot)
                else:
                    async with gate():
                        result = await self._trial(slot)
                if result is not None:  # None: handed to its judges, who finish it
                    self._finish(slot, result)
        finally:
            self._live -= 1

    def _finish(self, slot: _Slot, result: AnyTrial) -> None:
        """Keep one finished trial: record it, count it, fold its case once it is complete."""
        index = slot.case_index
        have = self._results.setdefault(index, {})
        have[slot.request.n] = result
        if self.on_result is not None:
            self.on_result(slot.request.case, result)
        self.on_trial(result.outcome)
        if len(have) == self._expected[index]:
            # Fold now, while other trials wait on their agents, not all at the end.
            folded = self._fold(index, slot.request.case)
            if self.adaptive is not None and self.adaptive[index]:
                added = self._adapt(index, folded)
                if added is not None:
                    # First in line: the case is folded sooner, and the rule asked again.
                    self._pending.appendleft(added)
                    if self._live < self.options.concurrency:
                        self._spawn(self._drain())
                    return
            self._final(index, folded)

    def _final(self, index: int, folded: PlainCase) -> None:
        """A case with nothing more to run: to the spool and the tally, and let go of here."""
        self._spool.put(index, folded)
        self._tally.add(index, folded)
        self._results.pop(index, None)
        self._case_facets.pop(index, None)

    def _fold(self, index: int, case: Case | None = None) -> PlainCase:
        """The case at ``index`` folded from its trials (``case``: if at hand, not read again)."""
        if case is None:
            case = self.loaded.suite.cases[index]
        trials = self._results.get(index, {})
        return fold_case_plain(case, [trials[n] for n in sorted(trials)],
                               facets=self._facets(index, case))

    def _facets(self, index: int, case: Case) -> dict[str, str]:
        """What ``assay compare`` aligns the case on: the suite's facets, and its judges'."""
        found = self._case_facets.get(index)
        if found is None:
            found = self.loaded.case_facets(case)
            judged = self.panel.facet(case) if self.panel is not None else None
            if judged is not None:
                found = {**found, "judge": judged}
            # Its simulated user is a model of the harness, like a judge: a facet too.
            user = self.users.facet(case) if self.users is not None else None
            if user is not None:
                found = {**found, "user": user}
            self._case_facets[index] = found
        return found

    async def _trial(self, slot: _Slot) -> PlainTrial | None:
        try:
            return await self._attempt(slot)
        finally:
            slot.request.partial.drop()

    async def _attempt(self, slot: _Slot) -> PlainTrial | None:
        if slot.workspace is None:
            return await self._run_and_grade(slot, slot.request, None)
        if self._staging is None:
            from .outcomes import Staging

            self._staging = Staging(self.options.concurrency)
        began = self.clock.monotonic()
        try:
            staged = await self._staging.stage(slot.workspace)
        except Exception as exc:  # a folder that cannot be copied breaks this trial, not the run
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            return self._broken(slot, f"the workspace could not be staged: {why}", began)
        try:
            given = slot.request
            request = TrialRequest(case=given.case, n=given.n, timeout_s=given.timeout_s,
                                   fixture=given.fixture, tools=given.tools, call=given.call,
                                   workspace=staged.path, partial=given.partial,
                                   user=given.user)
            result = await self._run_and_grade(slot, request, staged)
        except BaseException:
            staged.remove()  # an interrupt too leaves no workspace behind
            raise
        if staged.small and self.options.keep_workspaces is None:
            staged.remove()
        else:
            await asyncio.to_thread(self._let_go, slot, staged)
        return result

    def _let_go(self, slot: _Slot, staged: Workspace) -> None:
        """A graded trial's workspace: kept for a person (``--keep-workspaces``), else removed.

        A hidden case's is never kept: its files are hidden content (SPEC §14).
        """
        keep = self.options.keep_workspaces
        case = slot.request.case
        if keep is not None and case.split == "public" and self.run_id:
            from .outcomes import keep as keep_workspace

            # Kept or not, the trial stands; what could not be moved is removed below.
            with contextlib.suppress(OSError):
                keep_workspace(staged, keep / self.run_id / _safe_name(case.id)
                               / str(slot.request.n))
        staged.remove()

    async def _run_and_grade(self, slot: _Slot, request: TrialRequest,
                             staged: Workspace | None) -> PlainTrial | None:
        began = self.clock.monotonic()
        user: TrialUser | None = request.user
        try:
            # asyncio.timeout rather than wait_for: no extra task per trial.
            async with asyncio.timeout(request.timeout_s):
                trace = await self.target.run(request)
        except TimeoutError:
            if user is not None and user.asking:  # the simulator's wait, not the agent's
                return self._user_broken(slot, user, user.timed_out(), began)
            cut = self._timed_out_trace(slot, began)
            if cut is None:
                if user is not None and user.use().calls:
                    return self._user_broken(slot, user, f"timed out after "
                                             f"{request.timeout_s:g}s before any output", began)
                return self._broken(slot, f"timed out after {request.timeout_s:g}s before any "
                                          "output", began)
            trace = cut
        except TrialBroken as exc:
            if user is not None:
                return self._user_broken(slot, user, str(exc) or "the trial broke", began)
            return self._broken(slot, str(exc) or "the trial broke", began)
        except HarnessFailure:
            raise
        except Exception as exc:  # a target's own fault still leaves a broken trial, not a crash
            reason = f"target error: {type(exc).__name__}: {exc}"
            if user is not None:
                return self._user_broken(slot, user, reason, began)
            return self._broken(slot, reason, began)
        if user is not None:
            if user.failure is not None:  # a target that took the simulator's failure for its own
                return self._user_broken(slot, user, user.failure, began)
            update: dict[str, Any] = {"simulator": user.use()}
            if user.cut and trace.settled is False and trace.error is None:
                update["error"] = (f"the simulated user's max_turns ({user.plan.max_turns}) "
                                   "ran out before the conversation ended")
            trace = trace.model_copy(update=update)
        if staged is not None:
            from .outcomes import collect

            try:
                facts = await collect(staged, request.case, inline=staged.small)
            except Exception as exc:  # what cannot be read breaks this trial, not the run
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                return self._broken(slot, f"the workspace could not be read after the trial: "
                                          f"{why}", began)
            trace = trace.model_copy(update={
                "workspace": facts,
                "evidence": {**trace.evidence, "workspace": Evidence.OBSERVED}})
        return await self._grade(slot, trace)

    async def _grade(self, slot: _Slot, trace: Trace) -> PlainTrial | None:
        expect = slot.request.case.expect
        if not slot.judged:
            if slot.blocking:
                return await asyncio.to_thread(self._graded_now, slot, trace)
            return self._graded_now(slot, trace)
        # The checks that read the trace alone first; those read from opinions wait.
        if slot.blocking:
            decided = await asyncio.to_thread(grade_facts, expect, trace)
        else:
            decided = grade_facts(expect, trace)
        if any(v is not None and v.family in BINARY_FAMILIES and v.outcome == "fail"
               for v in decided):
            # A failed deterministic check decides the trial: no judge is asked.
            return fold_trial_plain(slot.request.n, _opinions_read(expect, trace, decided, None),
                                    duration_s=trace.duration_s, usage=trace.usage, trace=trace)
        # Judges next, off this worker, which goes on to its next trial while they answer.
        await self._backlog.acquire()
        task = asyncio.create_task(self._judge(slot, trace, decided))
        self._judging.add(task)
        task.add_done_callback(self._judging.discard)
        # The judges' task asks now, before this worker's next trial: the question
        # goes out while the agent works, not after a run of trials.
        await asyncio.sleep(0)
        return None

    def _graded_now(self, slot: _Slot, trace: Trace) -> PlainTrial:
        """A trial no judge reads, graded on its trace and folded (in any thread: pure)."""
        verdicts = grade_trace_plain(slot.request.case.expect, trace)
        return fold_trial_plain(slot.request.n, verdicts, duration_s=trace.duration_s,
                                usage=trace.usage, trace=trace)

    async def _judge(self, slot: _Slot, trace: Trace,
                     decided: list[PlainVerdict | None]) -> None:
        """Ask the trial's judges, grade it on their opinions, and finish it.

        Interrupted before they answered, the trial is kept all the same,
        its quality checks inconclusive (not judged): the agent's work is
        not thrown away with the judges'.
        """
        assert self.panel is not None
        expect = slot.request.case.expect
        try:
            try:
                opinions = await self.panel.opinions(slot.request.case, slot.request.n, trace)
            except Exception as exc:  # a fault of ours in asking: said, never a lost trial
                opinions = _unasked(slot.request.case, f"judging failed ({type(exc).__name__})")
            except asyncio.CancelledError:
                self._finish(slot, fold_trial_plain(slot.request.n,
                                                    _opinions_read(expect, trace, decided, None),
                                                    duration_s=trace.duration_s,
                                                    usage=trace.usage, trace=trace))
                raise
            self._finish(slot, fold_trial_plain(slot.request.n,
                                                _opinions_read(expect, trace, decided, opinions),
                                                duration_s=trace.duration_s, usage=trace.usage,
                                                trace=trace, opinions=opinions))
        finally:
            self._backlog.release()

    def _timed_out_trace(self, slot: _Slot, began: float) -> Trace | None:
        """A hang keeps what happened before it (docs/decisions/0003-folding.md).

        The target's record up to the timeout is graded as a trace with status
        ``timeout``; only a trial that recorded nothing is broken (None here).
        """
        request = slot.request
        waited = f"timed out after {request.timeout_s:g}s"
        try:
            trace = request.partial.trace()
        except Exception:  # a record that cannot be read is no record
            trace = None
        if trace is None or not (trace.events or trace.usage.tokens is not None
                                 or trace.usage.cost_usd is not None):
            return None
        update: dict[str, Any] = {
            "status": "timeout", "error": waited, "output": None, "settled": False,
            "partial": True, "duration_s": self.clock.monotonic() - began}
        if request.user is not None:
            update["simulator"] = request.user.use()
        return trace.model_copy(update=update, deep=True)

    def _broken(self, slot: _Slot, reason: str, began: float,
                trace: Trace | None = None) -> PlainTrial:
        return fold_trial_plain(slot.request.n, [], broken=True, reason=reason,
                                duration_s=self.clock.monotonic() - began, trace=trace)

    def _user_broken(self, slot: _Slot, user: TrialUser, reason: str,
                     began: float) -> PlainTrial:
        """A broken trial of a simulated conversation, what happened so far kept.

        The simulator's failure is the reason when it failed (the harness's,
        not the agent's); the trace the target kept up to then (its turns,
        the agent's usage) and the simulator's identity and cost go with the
        trial, so the report counts what the simulator spent and a person
        can read how far the conversation went. It has no verdicts: a broken
        trial is run again, not graded.
        """
        if user.failure is not None:
            reason = user.failure
        try:
            kept = slot.request.partial.trace()
        except Exception:  # a record that cannot be read is no record
            kept = None
        update: dict[str, Any] = {
            "status": "error", "error": reason, "output": None, "settled": False,
            "partial": True, "duration_s": self.clock.monotonic() - began,
            "simulator": user.use()}
        trace = kept.model_copy(update=update, deep=True) if kept is not None \
            else Trace(**update)
        return self._broken(slot, reason, began, trace)


    # The thread lane (engine/lane.py, docs/decisions/0083-sync-agent-lane.md): a sync
    # python: agent's quick trials run whole in lane threads and come back in batches.

    def _lane_fits(self) -> bool:
        """Whether this run goes through a lane: its target offers one (``LaneTarget``), its
        plan is fixed (an adaptive one adds trials as they finish) and no queue worker's
        gate bounds its trials. Which of its trials take the lane is ``_lane_takes``."""
        return (self.adaptive is None and self.gate is None
                and getattr(self.target, "sync_lane", False) is True)

    @staticmethod
    def _lane_takes(slot: _Slot) -> bool:
        """A trial the lane runs: one question (no conversation, no simulated user), no
        workspace, nothing its grading waits for (a judge, a blocking check)."""
        request = slot.request
        case = request.case
        return not (slot.judged or slot.blocking or slot.workspace is not None
                    or request.user is not None or case.user is not None
                    or case.turns is not None)

    async def _run_lane(self, slots: Iterator[_Slot]) -> None:
        """``run_trials`` through a lane: hand out trials as there is room, finish each as it
        comes back, and end when none is left (or raise what stopped the run)."""
        loop = asyncio.get_running_loop()
        width = max(1, min(self.options.concurrency, self.planned()))
        lane: Lane[_Slot] = Lane(width, loop, run=self._lane_trace, grade=self._lane_graded,
                                 deliver=self._lane_delivered, clock=self.clock.monotonic)
        state = self._lane = _LaneRun(lane, slots, loop.create_future(), width)
        try:
            self._lane_feed()
            await state.done
        finally:
            lane.close()
        # Trials handed to their judges finish here, as they do after the workers.
        while waiting := [*(w for w in self._workers if not w.done()), *self._judging]:
            await asyncio.gather(*waiting, return_exceptions=True)
        if state.failure is not None:
            raise state.failure

    def _lane_feed(self) -> None:
        """Hand out trials from the plan while there is room: quick ones to the lane, the
        rest to a task each (today's path). Set ``done`` once nothing is left in flight.

        No more agents run at once than the concurrency allows: the lane has that many
        threads, and while a trial is on the other path no more trials are in flight.
        Otherwise jobs are queued ahead for the threads; with a concurrency of one none
        is, and each trial starts once the one before it was kept, as with one worker.
        The plan is read here, on the loop, only.
        """
        state = self._lane
        assert state is not None
        while not (state.ended or self.interrupted or state.failure is not None) \
                and state.jobs + state.others < self._lane_room(state):
            try:
                slot = next(state.plan, None)
            except Exception as exc:  # a case that cannot be read stops the run, as a worker
                state.failure = exc
                break
            if slot is None:
                state.ended = True
                break
            if self._lane_takes(slot):
                state.jobs += 1
                state.lane.put(slot, slot.request.timeout_s)
            else:
                state.others += 1
                task = asyncio.create_task(self._lane_other(slot))
                self._workers.append(task)
                task.add_done_callback(self._workers.remove)
        if not (state.jobs or state.others or state.done.done()) and (
                state.ended or self.interrupted or state.failure is not None):
            state.done.set_result(None)

    @staticmethod
    def _lane_room(state: _LaneRun) -> int:
        """How many trials may be in flight: the concurrency, and jobs queued for the lane
        beyond it while the lane alone runs (``_LANE_AHEAD``)."""
        width = state.width
        if width == 1 or state.others:
            return width
        return width + max(width, _LANE_AHEAD)

    async def _lane_other(self, slot: _Slot) -> None:
        """A trial of a lane's run that the lane does not take: ``_trial``, as ``_work`` runs it."""
        state = self._lane
        assert state is not None
        try:
            result = await self._trial(slot)
            if result is not None:  # None: handed to its judges, who finish it
                self._finish(slot, result)
        except Exception as exc:  # stops the run once what is in flight is in
            state.failure = state.failure or exc
        finally:
            state.others -= 1
            self._lane_feed()

    def _lane_trace(self, job: LaneJob[_Slot]) -> Trace | PlainTrial:
        """In a lane thread, cut at the timeout: the trial's trace, or the broken trial, as
        ``_run_and_grade`` makes them."""
        slot = job.item
        target: LaneTarget = self.target  # type: ignore[assignment]  # _lane_fits said so
        try:
            return target.run_sync(slot.request)
        except TrialBroken as exc:
            return self._broken(slot, str(exc) or "the trial broke", job.began)
        except HarnessFailure:
            raise
        except Exception as exc:  # a target's own fault still leaves a broken trial
            return self._broken(slot, f"target error: {type(exc).__name__}: {exc}", job.began)

    def _lane_graded(self, job: LaneJob[_Slot], got: Trace | PlainTrial) -> PlainTrial:
        """In a lane thread, once the agent answered (no longer cut): the trial graded."""
        slot = job.item
        slot.request.partial.drop()
        return self._graded_now(slot, got) if isinstance(got, Trace) else got

    def _lane_delivered(self, jobs: list[LaneJob[_Slot]]) -> None:
        """On the loop: a batch from the lane, each trial kept as ``_work`` keeps one; a trial
        cut at its timeout is finished from what it recorded, as ``_run_and_grade`` does."""
        state = self._lane
        assert state is not None
        for job in jobs:
            if self.interrupted:
                return  # what was not kept before the interrupt is abandoned
            state.jobs -= 1
            if job.failure is not None:
                state.failure = state.failure or job.failure
                continue
            try:
                self._finish(job.item, self._lane_cut(job) if job.cut else job.value)
            except Exception as exc:
                state.failure = state.failure or exc
        self._lane_feed()

    def _lane_cut(self, job: LaneJob[_Slot]) -> PlainTrial:
        """A lane trial cut at its timeout: graded on what it recorded, else broken."""
        slot = job.item
        try:
            cut = self._timed_out_trace(slot, job.began)
        finally:
            slot.request.partial.drop()
        if cut is None:
            return self._broken(slot, f"timed out after {slot.request.timeout_s:g}s before any "
                                      "output", job.began)
        return self._graded_now(slot, cut)

    def _lane_stop(self) -> None:
        """An interrupt: the lane takes nothing more and drops what it has not handed over."""
        state = self._lane
        assert state is not None
        state.lane.close()
        if not state.done.done():
            state.done.set_result(None)


def _safe_name(case_id: str) -> str:
    """A case id as one folder name: no separators, not ``.`` or ``..``."""
    name = "".join("_" if c in "/\\\0" else c for c in case_id)
    return name if name not in ("", ".", "..") else name.replace(".", "_") or "_"


def _opinions_read(expect: list[Assertion], trace: Trace, decided: list[PlainVerdict | None],
                   opinions: Opinions | None) -> list[PlainVerdict]:
    """Every verdict of a judged trial: those ``grade_facts`` decided, and the quality
    checks' read from ``opinions`` (None: not judged, so inconclusive)."""
    return [found if found is not None else
            verdict_plain(assertion, trace, opinions.get(position, ()) if opinions else ())
            for position, (assertion, found) in enumerate(zip(expect, decided, strict=True))]


def _unasked(case: Case, why: str) -> dict[int, list[Any]]:
    """Opinions that say why none was given, one per answer each quality check needs."""
    from ..judging.opinion import Opinion

    found: dict[int, list[Any]] = {}
    for position, assertion in enumerate(case.expect):
        if reads_opinions(assertion):
            criteria = assertion.arg.get("criteria") if assertion.check == "rubric" \
                and isinstance(assertion.arg, dict) else None
            count = len(criteria) if isinstance(criteria, list) and criteria else 1
            found[position] = [Opinion(raw=None, model="unknown", prompt_digest="", error=why)
                               for _ in range(count)]
    return found

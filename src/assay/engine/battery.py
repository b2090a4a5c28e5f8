"""The battery: every case × trial against one target, bounded and interruptible.

Data flows one way: the plan becomes trial requests, the target turns each
into a Trace, the checks turn the Trace into verdicts, and the pure grading
core folds those into the run's Report. Progress events carry outcomes only,
never a case's content, so nothing of a hidden case reaches the terminal.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..checks import grade_trace, lookup
from ..errors import HarnessFailure
from ..grading import RunInfo, build_report, fold_case, fold_trial
from ..grading.fold import BINARY_FAMILIES
from ..model import Case, CaseResult, Report, SuiteRef, TargetRef, Trace, TrialResult, Verdict
from ..suites import LoadedSuite
from ..targets import Target, TrialBroken, TrialRequest
from ..targets.identity import identity_digest
from .clock import Clock, SystemClock, stamp

if TYPE_CHECKING:
    from ..judging.panel import Panel

#: Called after each trial with its outcome (pass, fail, inconclusive, broken).
OnTrial = Callable[[str], None]
#: Called after each trial with its case and whole result (e.g. to record it).
OnResult = Callable[[Case, TrialResult], None]


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


@dataclass
class _Slot:
    case_index: int
    request: TrialRequest
    blocking: bool
    #: Some of the case's checks are read from opinions (judges, a local model).
    judged: bool = False


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
    ) -> None:
        self.loaded = loaded
        #: The judges of the suite's quality checks (None: the suite has none).
        self.panel = panel
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
        self._plan: list[_Slot] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._results: list[dict[int, TrialResult]] = [{} for _ in loaded.suite.cases]
        self._expected = [self.trials_for(case) for case in loaded.suite.cases]
        self._folded: list[CaseResult | None] = [None for _ in loaded.suite.cases]
        if resume is not None:
            self.seed = resume.seed
            position = {case.id: index for index, case in enumerate(loaded.suite.cases)}
            for (case_id, n), result in resume.done.items():
                if case_id in position:
                    self._results[position[case_id]][n] = result
        else:
            fresh = random.SystemRandom().getrandbits(32)
            self.seed = options.seed if options.seed is not None else fresh
        self.rng = random.Random(self.seed)

    def trials_for(self, case: Case) -> int:
        """Trials of one case: the override, else the case's, else the suite's."""
        return self.options.trials or case.trials or self.loaded.suite.trials

    def plan(self) -> list[_Slot]:
        """Every trial to run, case by case (computed once); a resume skips those it has."""
        if self._plan is None:
            self._plan = self._make_plan()
        return self._plan

    def _make_plan(self) -> list[_Slot]:
        loaded = self.loaded
        suite = loaded.suite
        slots: list[_Slot] = []
        for index, case in enumerate(suite.cases):
            have = self._results[index]
            timeout = self.options.timeout_s or case.timeout_s or suite.timeout_s
            blocking = any((c := lookup(a.check)) is not None and c.blocking for a in case.expect)
            judged = self.panel is not None and any(
                (c := lookup(a.check)) is not None and c.opinions for a in case.expect)
            fixture = loaded.fixture_path(case)
            tools = loaded.fixtures.get(str(fixture)) if fixture is not None else None
            slots.extend(
                _Slot(index, TrialRequest(case=case, n=n, timeout_s=timeout, fixture=fixture,
                                          tools=tools, call=suite.call), blocking, judged)
                for n in range(1, self.trials_for(case) + 1) if n not in have
            )
        return slots

    def interrupt(self) -> None:
        """Stop: trials in flight are abandoned, finished ones are kept."""
        self.interrupted = True
        for worker in [*self._workers, *self._judging]:
            worker.cancel()

    async def run(self) -> Report:
        """Run the battery and fold it into the full (unredacted) report."""
        suite = self.loaded.suite
        slots = self.plan()
        # Started first: a target that cannot start leaves nothing registered, and
        # the agent version is taken from what started, once (RunStart).
        await self.target.start()
        try:
            identity = self.target.identity()
            self.target_digest = identity_digest(identity)
            if self.resume is not None:
                run_id, started_at = self.resume.run_id, self.resume.started_at
            else:
                started = self.clock.now()
                run_id = f"{started:%Y%m%dT%H%M%S}Z-{secrets.token_hex(4)}"  # never seeded
                started_at = stamp(started)
            self.on_start(RunStart(
                run_id=run_id, seed=self.seed, started_at=started_at, target_uri=self.target.uri,
                target_digest=self.target_digest, target_identity=identity,
                target_facets=dict(self.target.facets), resumed=self.resume is not None))
            queue = iter(slots)
            count = max(1, min(self.options.concurrency, len(slots)))
            self._workers = [asyncio.create_task(self._work(queue)) for _ in range(count)]
            await asyncio.gather(*self._workers, return_exceptions=True)
            # Trials handed to their judges finish here (each is recorded as it does).
            while self._judging:
                await asyncio.gather(*list(self._judging), return_exceptions=True)
            for worker in self._workers:
                if not worker.cancelled() and worker.exception() is not None:
                    raise worker.exception()  # type: ignore[misc]
        finally:
            await self.target.close()
        finished = self.clock.now()
        # Cases whose trials all finished were folded as they finished; the
        # rest (an interrupted run) are folded from what they have.
        cases = [folded or self._fold(i) for i, folded in enumerate(self._folded)]
        info = RunInfo(
            run_id=run_id,
            suite=SuiteRef(id=suite.id, digest=self.loaded.digest,
                           hidden_set=self.loaded.hidden_digest,
                           hidden_source=self.loaded.hidden_source),
            target=TargetRef(uri=self.target.uri, digest=self.target_digest,
                             facets=dict(self.target.facets),
                             evidence=dict(self.target.evidence)),
            started_at=started_at, finished_at=stamp(finished),
            trials_per_case=self.options.trials or suite.trials, pass_mark=suite.pass_mark,
            seed=self.seed, interrupted=self.interrupted, rejudge_of=self.options.rejudge_of,
        )
        return build_report(info, cases)

    async def _work(self, queue: Iterator[_Slot]) -> None:
        for slot in queue:
            result = await self._trial(slot)
            if result is not None:  # None: handed to its judges, who finish it
                self._finish(slot, result)

    def _finish(self, slot: _Slot, result: TrialResult) -> None:
        """Keep one finished trial: record it, count it, fold its case once it is complete."""
        index = slot.case_index
        self._results[index][slot.request.n] = result
        if self.on_result is not None:
            self.on_result(slot.request.case, result)
        self.on_trial(result.outcome)
        if len(self._results[index]) == self._expected[index]:
            # Fold now, while other trials wait on their agents, not all at the end.
            self._folded[index] = self._fold(index)

    def _fold(self, index: int) -> CaseResult:
        trials, case = self._results[index], self.loaded.suite.cases[index]
        facets = self.loaded.case_facets(case)
        judged = self.panel.facet(case) if self.panel is not None else None
        if judged is not None:
            facets = {**facets, "judge": judged}
        return fold_case(case, [trials[n] for n in sorted(trials)], facets=facets)

    async def _trial(self, slot: _Slot) -> TrialResult | None:
        request = slot.request
        began = self.clock.monotonic()
        try:
            # asyncio.timeout rather than wait_for: no extra task per trial.
            async with asyncio.timeout(request.timeout_s):
                trace = await self.target.run(request)
        except TimeoutError:
            return await self._timed_out(slot, began)
        except TrialBroken as exc:
            return self._broken(slot, str(exc) or "the trial broke", began)
        except HarnessFailure:
            raise
        except Exception as exc:  # a target's own fault still leaves a broken trial, not a crash
            return self._broken(slot, f"target error: {type(exc).__name__}: {exc}", began)
        return await self._grade(slot, trace)

    async def _grade(self, slot: _Slot, trace: Trace) -> TrialResult | None:
        expect = slot.request.case.expect
        if slot.blocking:
            verdicts = await asyncio.to_thread(grade_trace, expect, trace)
        else:
            verdicts = grade_trace(expect, trace)
        if slot.judged and not any(v.family in BINARY_FAMILIES and v.outcome == "fail"
                                   for v in verdicts):
            # Judges after the deterministic checks, and only when those left the trial
            # open (a failed one decides it): off this worker, which goes on to its next
            # trial while the judges answer.
            await self._backlog.acquire()
            task = asyncio.create_task(self._judge(slot, trace, verdicts))
            self._judging.add(task)
            task.add_done_callback(self._judging.discard)
            return None
        return fold_trial(slot.request.n, verdicts, duration_s=trace.duration_s,
                          usage=trace.usage, trace=trace)

    async def _judge(self, slot: _Slot, trace: Trace, verdicts: list[Verdict]) -> None:
        """Ask the trial's judges, grade it on their opinions, and finish it.

        Interrupted before they answered, the trial is kept all the same,
        its quality checks inconclusive (not judged): the agent's work is
        not thrown away with the judges'.
        """
        assert self.panel is not None
        try:
            try:
                opinions = await self.panel.opinions(slot.request.case, slot.request.n, trace)
            except Exception as exc:  # a fault of ours in asking: said, never a lost trial
                opinions = _unasked(slot.request.case, f"judging failed ({type(exc).__name__})")
            except asyncio.CancelledError:
                self._finish(slot, fold_trial(slot.request.n, verdicts,
                                              duration_s=trace.duration_s, usage=trace.usage,
                                              trace=trace))
                raise
            graded = grade_trace(slot.request.case.expect, trace, opinions)
            self._finish(slot, fold_trial(slot.request.n, graded, duration_s=trace.duration_s,
                                          usage=trace.usage, trace=trace, opinions=opinions))
        finally:
            self._backlog.release()

    async def _timed_out(self, slot: _Slot, began: float) -> TrialResult | None:
        """A hang keeps what happened before it (docs/decisions/0003-folding.md).

        The target's record up to the timeout is graded as a trace with status
        ``timeout``; only a trial that recorded nothing is broken.
        """
        request = slot.request
        waited = f"timed out after {request.timeout_s:g}s"
        try:
            trace = request.partial.trace()
        except Exception:  # a record that cannot be read is no record
            trace = None
        if trace is None or not (trace.events or trace.usage.tokens is not None
                                 or trace.usage.cost_usd is not None):
            return self._broken(slot, f"{waited} before any output", began)
        trace = trace.model_copy(update={
            "status": "timeout", "error": waited, "output": None, "settled": False,
            "partial": True, "duration_s": self.clock.monotonic() - began,
        }, deep=True)
        return await self._grade(slot, trace)

    def _broken(self, slot: _Slot, reason: str, began: float) -> TrialResult:
        return fold_trial(slot.request.n, [], broken=True, reason=reason,
                          duration_s=self.clock.monotonic() - began, trace=None)


def _unasked(case: Case, why: str) -> dict[int, list[Any]]:
    """Opinions that say why none was given, one per answer each quality check needs."""
    from ..judging.opinion import Opinion

    found: dict[int, list[Any]] = {}
    for position, assertion in enumerate(case.expect):
        if assertion.check in ("judge", "rubric", "similar"):
            criteria = assertion.arg.get("criteria") if assertion.check == "rubric" \
                and isinstance(assertion.arg, dict) else None
            count = len(criteria) if isinstance(criteria, list) and criteria else 1
            found[position] = [Opinion(raw=None, model="unknown", prompt_digest="", error=why)
                               for _ in range(count)]
    return found

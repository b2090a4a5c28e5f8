"""The thread lane: quick sync trials run whole in agent threads, handed to the loop in batches.

A sync ``python:`` agent must run off the event loop (it may block), so each
of its trials used to go out to a thread and back: a future, a timer for its
timeout (``asyncio.timeout``), the trial's task suspended and resumed. For an
agent that answers in microseconds that trip costs several times the agent
(docs/plans/issue-32-hot-path.md §3: 26–33 µs a trial against about 3 µs
here). In the lane a thread takes a job from a queue and does the whole
trial — the agent's call, its trace, the grading — and posts the result; the
loop is woken once per batch of results, not once per trial, and keeps the
results single-threaded from there (the battery's ``_finish``).

A hang must still be cut at the trial's timeout, from outside the thread
that hangs. Each thread writes its job's deadline when it takes the job; one
watchdog thread sleeps until the earliest deadline in flight, and a job still
running then is cut: marked so, posted to the loop (which finishes its trial
from what the target kept, as a timeout is finished anywhere else), and its
thread replaced, so the lane keeps its size. The hung thread is a daemon; if
it ever comes back, what it brings is dropped. With one timeout for every
trial, a job taken later never has an earlier deadline, so the watchdog
sleeps a whole timeout between looks and nobody wakes it; only a job whose
deadline comes sooner than the one it sleeps until does.

A job's life, each step under the lane's lock: queued → running (its
deadline counts) → answered (the cuttable part is done: grading is not cut,
as a timeout never covered it) → posted; or running → cut (by the
watchdog); or anything before posted → dropped (the lane closed: an
interrupt, or the end of the run).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

_QUEUED, _RUNNING, _ANSWERED, _POSTED, _CUT, _DROPPED = range(6)

ItemT = TypeVar("ItemT")


class LaneJob(Generic[ItemT]):
    """One trial in the lane: what it is (``item``), its timeout, and how it ended."""

    __slots__ = ("item", "timeout_s", "began", "deadline", "state", "value", "failure")

    def __init__(self, item: ItemT, timeout_s: float) -> None:
        self.item = item
        self.timeout_s = timeout_s
        #: When a thread took it, on the battery's clock (a trial's duration counts from it).
        self.began = 0.0
        #: When it is cut, on ``time.monotonic``'s clock (the loop's own, as its timers).
        self.deadline = math.inf
        self.state = _QUEUED
        #: What ``grade`` made of it, once posted.
        self.value: Any = None
        #: What ``run`` or ``grade`` raised instead (the battery's own fault, not the agent's).
        self.failure: BaseException | None = None

    @property
    def cut(self) -> bool:
        """Cut at its timeout: posted without a value, its thread left behind."""
        return self.state == _CUT


class _Runner:
    """One lane thread's record: the job it runs, and whether it was replaced."""

    __slots__ = ("job", "retired")

    def __init__(self) -> None:
        self.job: LaneJob[Any] | None = None
        self.retired = False


class Lane(Generic[ItemT]):
    """Daemon threads of a fixed working size that run jobs whole, and their watchdog.

    ``run(job)`` is the part a timeout cuts (the agent's call and its trace),
    ``grade(job, value)`` the rest; both run in a lane thread. ``deliver(jobs)``
    gets the posted jobs on ``loop``, a batch at a time: each done (``value``
    or ``failure``) or ``cut``. ``clock`` stamps ``began``.
    """

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop, *,
                 run: Callable[[LaneJob[ItemT]], Any],
                 grade: Callable[[LaneJob[ItemT], Any], Any],
                 deliver: Callable[[list[LaneJob[ItemT]]], None],
                 clock: Callable[[], float], name: str = "assay-agent") -> None:
        self._loop = loop
        self._run, self._grade, self._deliver, self._clock = run, grade, deliver, clock
        self._name = name
        self._jobs: queue.SimpleQueue[LaneJob[ItemT] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._watch = threading.Condition(self._lock)
        self._runners: list[_Runner] = []
        self._posted: list[LaneJob[ItemT]] = []
        #: When the watchdog looks next (inf: it waits to be told).
        self._wake_at = math.inf
        #: The latest job's timeout: how long a watchdog with nothing running sleeps.
        self._patience = math.inf
        self._closed = False
        # The agent sees the context the battery runs in, as ``copy_context`` per call
        # gives it on the other path; each thread its own copy, each trial a copy of that.
        self._context = contextvars.copy_context()
        with self._lock:
            for _ in range(max(1, size)):
                self._add_runner()
        threading.Thread(target=self._guard, name=f"{name}-watchdog", daemon=True).start()

    def put(self, item: ItemT, timeout_s: float) -> LaneJob[ItemT]:
        """Queue one job (from the loop); a free thread takes it."""
        job = LaneJob(item, timeout_s)
        self._jobs.put(job)
        return job

    def close(self) -> None:
        """Take no more: jobs not posted yet are dropped, idle threads end, and so does the
        watchdog. A thread stuck in a hang is a daemon, left behind. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for runner in self._runners:
                job = runner.job
                if job is not None and job.state in (_RUNNING, _ANSWERED):
                    job.state = _DROPPED
            for job in self._posted:
                job.state = _DROPPED
            self._posted.clear()
            count = len(self._runners)
            self._watch.notify()
        for _ in range(count):
            self._jobs.put(None)

    def _add_runner(self) -> None:
        """One more thread (the lock held)."""
        runner = _Runner()
        self._runners.append(runner)
        threading.Thread(target=self._context.copy().run, args=(self._serve, runner),
                         name=self._name, daemon=True).start()

    def _serve(self, runner: _Runner) -> None:
        """A lane thread: take jobs and do each (``_do``); end on None or once replaced.

        A job is held only while it is done: a thread waiting for its next job keeps
        nothing of the last one alive (its trial, its trace).
        """
        while (job := self._jobs.get()) is not None:
            if not self._do(runner, job):
                return
            del job

    def _do(self, runner: _Runner, job: LaneJob[ItemT]) -> bool:
        """Run and grade one job and post it; False when this thread was replaced."""
        lock = self._lock
        with lock:
            if self._closed or job.state != _QUEUED:
                job.state = _DROPPED
                return True
            job.state = _RUNNING
            job.began = self._clock()
            job.deadline = time.monotonic() + job.timeout_s
            runner.job = job
            self._patience = job.timeout_s
            if job.deadline < self._wake_at:
                self._watch.notify()
        value: Any = None
        try:
            value = self._run(job)
        except BaseException as exc:  # the battery's fault: it decides what it means
            job.failure = exc
        with lock:
            runner.job = None
            if job.state != _RUNNING:  # cut (the loop finished its trial) or dropped
                return not runner.retired  # a replaced thread ends: a fresh one has its place
            job.state = _ANSWERED
        if job.failure is None:
            try:
                job.value = self._grade(job, value)
            except BaseException as exc:
                job.failure = exc
        with lock:
            if job.state != _ANSWERED:
                return True  # dropped while it was graded
            job.state = _POSTED
            self._posted.append(job)
            first = len(self._posted) == 1
        if first:
            self._wake()
        return True

    def _wake(self) -> None:
        """Ask the loop for one hand-over; later posts ride along with it."""
        # A loop that is gone (RuntimeError) has nobody waiting for these any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        """On the loop: the jobs posted since the last hand-over, to ``deliver``."""
        with self._lock:
            posted, self._posted = self._posted, []
        if posted:
            self._deliver(posted)

    def _guard(self) -> None:
        """The watchdog: cut every job past its deadline, then sleep until the next one."""
        with self._watch:
            while not self._closed:
                now = time.monotonic()
                earliest = self._cut_overdue(now)
                if earliest == math.inf:
                    earliest = now + self._patience
                self._wake_at = earliest
                wait = earliest - now
                self._watch.wait(None if wait == math.inf else min(wait, threading.TIMEOUT_MAX))

    def _cut_overdue(self, now: float) -> float:
        """Cut the jobs whose deadline has passed (the lock held), each thread replaced, and
        post them; the earliest deadline still to come (inf: none running)."""
        earliest = math.inf
        cut: list[LaneJob[ItemT]] = []
        for runner in list(self._runners):
            job = runner.job
            if job is None or job.state != _RUNNING:
                continue
            if job.deadline > now:
                earliest = min(earliest, job.deadline)
                continue
            job.state = _CUT
            runner.job, runner.retired = None, True
            self._runners.remove(runner)
            self._add_runner()  # the lane keeps its size for the trials still to run
            cut.append(job)
        if cut:
            first = not self._posted
            self._posted.extend(cut)
            if first:
                self._wake()
        return earliest

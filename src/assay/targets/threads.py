"""Threads for synchronous agents, that a hanging agent cannot starve.

A sync agent must run off the event loop, and one that hangs cannot be
stopped from outside. ``concurrent.futures.ThreadPoolExecutor`` would keep
the hung call in one of its few threads (every later trial then waits in its
queue) and would make the process wait for it at exit. Here the threads are
daemons, and a call whose trial was abandoned while it ran is replaced by a
fresh thread, so the pool always has its full size for the trials that are
still to run.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class _Job:
    mailbox: _Mailbox
    future: asyncio.Future[tuple[bool, Any]]
    call: Callable[[], Any]
    started: bool = False
    finished: bool = False


def _settle(future: asyncio.Future[tuple[bool, Any]], ok: bool, value: Any) -> None:
    if not future.done():
        future.set_result((ok, value))


class _Mailbox:
    """Answers from the threads to one event loop, with one wake-up per batch.

    Waking the loop (``call_soon_threadsafe``) costs more than the call of a
    fast agent; threads that finish while a wake-up is pending only add their
    answer to the batch.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.answers: list[tuple[asyncio.Future[tuple[bool, Any]], bool, Any]] = []
        self.lock = threading.Lock()

    def post(self, future: asyncio.Future[tuple[bool, Any]], ok: bool, value: Any) -> None:
        with self.lock:
            self.answers.append((future, ok, value))
            if len(self.answers) > 1:
                return  # a wake-up is already on its way
        try:
            self.loop.call_soon_threadsafe(self.deliver)
        except RuntimeError:  # the loop is gone: nobody waits for these answers
            pass

    def deliver(self) -> None:
        with self.lock:
            answers, self.answers = self.answers, []
        for future, ok, value in answers:
            _settle(future, ok, value)


class AgentThreads:
    """A pool of daemon threads of a fixed working size."""

    def __init__(self, size: int, name: str = "assay-agent") -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._name = name
        self._threads: list[threading.Thread] = []
        self._mailbox: _Mailbox | None = None
        self._lock = threading.Lock()  # guards every job's started/finished flags
        self._grow(max(1, size))

    def _grow(self, count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                if job.future.cancelled():
                    continue
                job.started = True
            try:
                ok, value = True, job.call()
            except BaseException as exc:  # handed to the trial, which decides what it means
                ok, value = False, exc
            with self._lock:
                job.finished = True
            job.mailbox.post(job.future, ok, value)

    async def run(self, call: Callable[[], Any]) -> Any:
        """Run ``call`` on a pool thread; its exception is raised here (BaseExceptions wrapped)."""
        loop = asyncio.get_running_loop()
        mailbox = self._mailbox
        if mailbox is None or mailbox.loop is not loop:
            mailbox = self._mailbox = _Mailbox(loop)
        job = _Job(mailbox, loop.create_future(), call)
        self._jobs.put(job)
        try:
            ok, value = await job.future
        except asyncio.CancelledError:
            with self._lock:
                stuck = job.started and not job.finished
            if stuck:  # that thread may never come back: keep the pool at its size
                self._grow(1)
            raise
        if ok:
            return value
        if isinstance(value, Exception):
            raise value
        raise AgentCrash(value)

    def close(self) -> None:
        """Let idle threads end; a hung one is a daemon and does not hold the process."""
        for _ in self._threads:
            self._jobs.put(None)


class AgentCrash(Exception):
    """An agent raised a BaseException (SystemExit, KeyboardInterrupt) in its thread."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original

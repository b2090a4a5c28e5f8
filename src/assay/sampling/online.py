"""Online evaluation: sample production calls, grade them off the hot path (SPEC §10).

``assay.online(suite=…, sample=0.05)`` returns an :class:`Online`: a
decorator for a production agent function (sync or async), and, through
``.asgi(app)``, a middleware for an ASGI app (``sampling.asgi``). A
seeded share of the calls is recorded — input, output, ok or error,
duration — and offered to a bounded buffer without waiting; a full buffer
drops the sample and counts it. The draw and the buffer are the ones the
MCP proxy uses (``sampling.buffer``): one daemon thread, started with
the first sample, grades each with the suite's reference-free checks
(``sampling.reference_free``) through the pure grading core, and queues the
failing and inconclusive ones for review (``store.reviews.items.add_item``,
source ``online``). Nothing the grader does reaches the call: the call's
result and exceptions are the function's own. Choices and their reasons:
docs/decisions/0039-online.md.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..model import Assertion, Suite
from .buffer import Handled, SampleBuffer, Sampler, Tally
from .reference_free import Selection, SetAside, select
from .samples import Sample, call_input, describe, grade_sample, raised, returned, sample_trace

if TYPE_CHECKING:
    from ..store.database import Store
    from .asgi import ASGIApp, OnlineASGI

F = TypeVar("F", bound=Callable[..., Any])

#: What a decorated function's recording vouches for: its return value, nothing else
#: (it does not see the tool calls, steps or cost inside the function).
OBSERVED = frozenset({"output"})


@dataclass(frozen=True)
class OnlineStats:
    """What an :class:`Online` has done so far (a snapshot).

    ``calls`` seen; ``sampled`` of them chosen by the draw; ``dropped``
    because the buffer was full; ``cancelled`` (a chosen call that never
    finished: cancelled, interrupted — not the agent's answer, not recorded);
    ``graded`` by the grader thread, as ``passed``, ``failed`` or
    ``inconclusive``; ``queued`` for review (the failed and inconclusive
    ones); ``grader_errors``: samples whose grading or queueing raised (the
    last one's message is ``Online.last_error``).
    """

    calls: int
    sampled: int
    dropped: int
    cancelled: int
    graded: int
    passed: int
    failed: int
    inconclusive: int
    queued: int
    grader_errors: int


def online(suite: Suite | str | Path, sample: float = 0.05, *, seed: int | None = None,
           db: str | None = None, buffer: int = 1000) -> Online:
    """Sample a share ``sample`` of production calls and grade them with ``suite``'s
    reference-free checks; failures go to the review queue (SPEC §10).

    ``suite``: a suite file (``*.suite.yaml``, ``*_eval.py``) or a ``Suite``.
    ``seed``: the sampler's seed (a fresh one when None; ``Online.seed`` says
    which). ``db``: the store the queue lives in (default ``$ASSAY_DB``, else
    ``.assay/assay.db`` in the folder this was called from). ``buffer``: how
    many samples may wait for the grader before new ones are dropped.

    Use the result as a decorator (``@online(...)``) or as ASGI middleware
    (``online(...).asgi(app)``). ValueError when an argument is wrong or the
    suite has no check that can grade a production call; SuiteError for a
    bad suite file.
    """
    return Online(suite, sample, seed=seed, db=db, buffer=buffer)


class Online:
    """A sampler, its buffer and its grader thread; see :func:`online`.

    ``observed``: the kinds of fact the recording vouches for (a decorator and
    the middleware see the output only); a check reading any other fact is set
    aside rather than left inconclusive on every sample.
    """

    def __init__(self, suite: Suite | str | Path, sample: float = 0.05, *,
                 seed: int | None = None, db: str | None = None, buffer: int = 1000,
                 observed: Iterable[str] = OBSERVED) -> None:
        rate = check_rate(sample)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed is a whole number, not {seed!r}")
        #: The seed of the draws (a fresh one when none was given).
        self.seed = secrets.randbelow(2**32) if seed is None else seed
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"buffer is how many samples may wait for grading (≥ 1); "
                             f"not {buffer!r}")
        loaded = _suite(suite)
        self.observed = frozenset(observed)
        chosen = select(loaded, self.observed)
        if not chosen.checks:
            raise ValueError(_nothing_to_grade(loaded.id, chosen))
        #: The suite's id, recorded with every queued item.
        self.suite_id = loaded.id
        #: The share of calls sampled (K).
        self.sample = rate
        #: The checks each sample is graded with, and the public ones set aside (with why).
        self.checks: list[Assertion] = chosen.checks
        self.set_aside: list[SetAside] = chosen.set_aside
        #: The message of the last grading or queueing that raised (None: none has).
        self.last_error: str | None = None
        self._take = Sampler(rate * 100, self.seed).take
        self._db_url = db or os.environ.get("ASSAY_DB") or \
            f"sqlite:///{Path.cwd() / '.assay' / 'assay.db'}"
        self._capacity = buffer
        self._calls = itertools.count()
        self._lock = threading.Lock()
        self._cancelled = 0
        #: The buffer samples go to: made with the first sample (a process that forks after
        #: importing a decorated function gets its own), made anew after ``close``.
        self._buffer: SampleBuffer[Sample] | None = None
        #: What buffers closed before the current one counted.
        self._before = Tally()
        self._store: Store | None = None

    def __repr__(self) -> str:
        return (f"<Online {self.suite_id} sample={self.sample} seed={self.seed} "
                f"checks={len(self.checks)}>")

    # --- the hot path --------------------------------------------------------------------

    def draw(self) -> int | None:
        """Count a call; its number if it is sampled, else None. Cheap: it runs per call.

        The number comes from an ``itertools.count`` and the draw from the
        sampler's ``random.Random``, each one atomic step: no lock is taken on
        the path of a call that is not sampled (a lock cost as much as the rest
        of that path here).
        """
        index = next(self._calls)
        return index if self._take() else None

    def submit(self, sample: Sample) -> None:
        """Offer ``sample`` to the buffer without waiting; full, it is dropped and counted."""
        buffer = self._buffer
        if buffer is None or not buffer.running:
            buffer = self._new_buffer()
        buffer.offer(sample)

    def count_cancelled(self) -> None:
        """A sampled call ended without an answer (cancelled, interrupted): not recorded."""
        with self._lock:
            self._cancelled += 1

    def __call__(self, function: F) -> F:
        """Wrap a production agent function (sync or async); calls go through unchanged."""
        if not callable(function):
            raise TypeError(f"online(...) wraps a function, not {type(function).__name__}")
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError("online(...) wraps a function that returns its answer; "
                            f"{_name(function)} is a generator (it streams): collect its "
                            "answer in a function that returns it, or wrap the ASGI app with "
                            ".asgi(app)")
        if _looks_asgi(function):
            raise TypeError(f"{_name(function)} takes (scope, receive, send): it looks like an "
                            "ASGI app; wrap it with online(...).asgi(app)")
        where = _name(function)
        draw, submit = self.draw, self.submit
        if inspect.iscoroutinefunction(function):
            @functools.wraps(function)
            async def sampled_async(*args: Any, **kwargs: Any) -> Any:
                index = draw()
                if index is None:
                    return await function(*args, **kwargs)
                given = call_input(args, kwargs)
                started = time.perf_counter()
                try:
                    output = await function(*args, **kwargs)
                except Exception as exc:
                    submit(raised(index, given, exc, started, where))
                    raise
                except BaseException:
                    self.count_cancelled()
                    raise
                submit(returned(index, given, output, started, where))
                return output

            sampled_async.online = self  # type: ignore[attr-defined]
            return sampled_async  # type: ignore[return-value]

        @functools.wraps(function)
        def sampled(*args: Any, **kwargs: Any) -> Any:
            index = draw()
            if index is None:
                return function(*args, **kwargs)
            given = call_input(args, kwargs)
            started = time.perf_counter()
            try:
                output = function(*args, **kwargs)
            except Exception as exc:
                submit(raised(index, given, exc, started, where))
                raise
            except BaseException:
                self.count_cancelled()
                raise
            submit(returned(index, given, output, started, where))
            return output

        sampled.online = self  # type: ignore[attr-defined]
        return sampled  # type: ignore[return-value]

    def asgi(self, app: ASGIApp, *, paths: Iterable[str] | None = None,
             max_body: int | None = None) -> OnlineASGI:
        """``app`` wrapped as ASGI middleware: sampled HTTP requests are recorded and graded.

        ``paths``: only requests whose path starts with one of these are
        counted and sampled (default: all). ``max_body``: the bytes kept of a
        request's and a response's body (default ``online_asgi.MAX_BODY``).
        """
        from .asgi import MAX_BODY, OnlineASGI

        return OnlineASGI(app, self, paths=paths,
                          max_body=MAX_BODY if max_body is None else max_body)

    # --- state ---------------------------------------------------------------------------

    @property
    def stats(self) -> OnlineStats:
        """The counts so far (a snapshot)."""
        with self._lock:
            buffer, cancelled = self._buffer, self._cancelled
            tally = _plus(self._before, buffer.tally() if buffer is not None else Tally())
        # repr(count(n)) is "count(n)": n, the next number, is how many calls were drawn.
        return OnlineStats(
            calls=int(repr(self._calls)[6:-1]), sampled=tally.sampled + cancelled,
            dropped=tally.dropped, cancelled=cancelled, graded=tally.graded,
            passed=tally.graded - tally.failed - tally.inconclusive, failed=tally.failed,
            inconclusive=tally.inconclusive, queued=tally.queued, grader_errors=tally.lost)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every buffered sample is graded; False if ``timeout`` ran out first."""
        buffer = self._buffer
        return buffer is None or buffer.flush(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Grade what is buffered, stop the grader thread and close the store.

        False if ``timeout`` ran out first (the thread is then left to finish
        on its own). Calls made afterwards still work; a new sample starts a
        new grader.
        """
        buffer = self._buffer
        if buffer is not None:
            finished = threading.Event()
            buffer.close(finished.set)
            if not finished.wait(timeout):
                return False
            with self._lock:
                self._before = _plus(self._before, buffer.tally())
                self._buffer = None
        if self._store is not None:
            self._store.close()
            self._store = None
        return True

    # --- the grader thread ---------------------------------------------------------------

    def _new_buffer(self) -> SampleBuffer[Sample]:
        with self._lock:
            buffer = self._buffer
            if buffer is None or not buffer.running:
                if buffer is not None:  # its thread is gone (a fork): keep what it counted
                    self._before = _plus(self._before, buffer.tally())
                buffer = self._buffer = SampleBuffer(self._capacity, self._grade)
            return buffer

    def _grade(self, sample: Sample) -> Handled:
        """Grade one sample and queue it unless it passed; runs in the buffer's thread."""
        from ..review.queue import call_label
        from ..store.ledger.entries import utc_stamp
        from ..store.reviews.items import add_item

        try:
            record = sample.recorded()
            trace = sample_trace(record, self._facets(sample.index, record.where))
            outcome, reason = grade_sample(self.checks, trace, record.unseen)
        except BaseException as exc:  # counted as lost by the buffer; the message kept here
            self.last_error = describe(exc)
            raise
        if outcome == "pass":
            return Handled("pass")
        try:
            if self._store is None:
                from ..store.database import open_store

                self._store = open_store(self._db_url)
            add_item(self._store, {
                "source": "online", "run_id": None, "suite_id": self.suite_id,
                "case_id": None, "split": "public", "n": None,
                "label": call_label(record.where, sample.index),
                "outcome": outcome, "reason": reason, "added_at": utc_stamp(),
            }, trace.model_dump_json().encode("utf-8"))
        except BaseException as exc:  # noqa: BLE001 - the store's trouble costs this sample only
            self.last_error = describe(exc)
            return Handled(outcome, lost=True)
        return Handled(outcome, queued=True)

    def _facets(self, index: int, where: str) -> dict[str, str]:
        # Named as the proxy names its draw (sample_seed, sample_percent).
        return {"harness": "online", "online_function": where, "online_call": str(index),
                "sample_seed": str(self.seed), "sample_percent": f"{self.sample * 100:g}"}


def _plus(a: Tally, b: Tally) -> Tally:
    return Tally(**{name: getattr(a, name) + getattr(b, name)
                    for name in Tally.__dataclass_fields__})


def check_rate(sample: object) -> float:
    """``sample`` as a share of calls in (0, 1]; ValueError saying why it is not one."""
    rate = float(sample) if isinstance(sample, int | float) and \
        not isinstance(sample, bool) else math.nan
    if not 0.0 < rate <= 1.0:  # NaN fails this too
        zero = " (a rate of 0 would record nothing)" if rate == 0.0 else ""
        raise ValueError(f"sample is a fraction of calls in (0, 1], such as 0.05; "
                         f"not {sample!r}{zero}")
    return rate


# --- helpers ----------------------------------------------------------------------------


def _name(function: Callable[..., Any]) -> str:
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}:{name}" if module else str(name)


def _looks_asgi(function: Callable[..., Any]) -> bool:
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False
    return names[-3:] == ["scope", "receive", "send"]


def _suite(suite: Suite | str | Path) -> Suite:
    """The suite to take checks from: loaded from its file, or checked as given."""
    if isinstance(suite, Suite):
        return _checked(suite)
    if not isinstance(suite, str | Path):
        raise ValueError(f"suite is a suite file or an assay.Suite, not {type(suite).__name__}")
    path = Path(suite)
    if path.is_dir():
        raise ValueError(f"suite {str(path)!r} is a folder; name the suite file "
                         "(*.suite.yaml or *_eval.py)")
    from ..suites.loader import load_suite_file

    return load_suite_file(path).suite


def _checked(suite: Suite) -> Suite:
    """A Suite built in Python, its public cases' assertions validated and prepared."""
    from ..suites.build import Problem, check_case

    cases = []
    for case in suite.public_cases():
        copy = case.model_copy(deep=True)
        problem = Problem(case.file or "<suite>", functools.partial(_line, case.line),
                          secret=False)
        base = Path(case.file).parent if case.file else Path.cwd()
        cases.append(check_case(copy, problem, [], base_dir=base))
    return suite.model_copy(update={"cases": cases})


def _line(line: int | None, loc: object) -> int | None:
    return line


def _nothing_to_grade(suite_id: str, chosen: Selection) -> str:
    shown = "; ".join(f"{a.assertion} ({a.case}): {a.why}" for a in chosen.set_aside[:5])
    more = f"; and {len(chosen.set_aside) - 5} more" if len(chosen.set_aside) > 5 else ""
    listed = f": {shown}{more}" if shown else " (its public cases have no checks)"
    return (f"suite {suite_id} has no check that can grade a production call, so sampling "
            f"would record nothing anyone looks at{listed}. Add one that holds for any input "
            "(status: ok, type, schema, not_contains, a grader)")

"""A judge that is a Python callable: ``model: python:pkg.module:function`` (SPEC §9).

The user's function is given the rendered prompt — exactly what a model
judge would read — and, when it takes a second parameter, the structured
pieces the prompt was made from (``inputs``: the check's kind, its
criteria, the reference and the output; for a rubric the criterion's name
and description; for pairwise the two outputs as shown). It returns the
answer text, which is read by the same strict rules as a model's answer
(``answers.py``, ``pairwise.py``): a function that answers out of form has
not passed anything.

**Identity.** A judge's identity is what makes it this judge and not
another: for a model, its name and sampling settings; here, the callable's
path and the sha256 of its module file (``module_digest``), with the
digest of the local modules that file imports beside it (``code_digest``,
the rule a ``python:`` target's agent version follows:
``targets.identity.python_identity``). Both go into the prompt digest, so a
judge whose file was edited is a changed judge: its opinions miss the judge
cache, and ``assay compare`` does not line its runs up with the old ones.

**Calling.** A coroutine function is awaited on the loop; a plain function
runs on a daemon thread of its own pool (``targets.threads``), so a slow
one cannot stall the loop and a hung one, abandoned at ``judge_timeout_s``,
does not hold the process at exit. ``ask`` never raises but on
cancellation: an exception, a timeout or an answer that is not text is an
opinion with ``error`` set, and its verdict is ``inconclusive``.

What the judge printed, and the exception it raised (type and message, one
line), are kept as the opinion's ``stream``: never in assay's own output
(``targets.capture``), and never in ``error``, which the ``judge-opinion``
ledger entry holds as it is. The user's code may put a case's content in a
message, and the stream is kept by digest, so it can be erased like a raw
answer; ``error`` says only ``raised TypeName``. A Python judge reports no
tokens and no cost: both are unavailable (None), never 0.

Loading (``load``) imports the module, checks the attribute is callable
and takes the digests (``check``: the first two only, for a suite's load);
what goes wrong is a ``ValueError`` the caller words as a load error (file
and line) or a usage error (``--judge``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import importlib.util
import inspect
import io
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..canonical import file_digest
from ..importing import resolve_function
from ..model.storable import json_copy, storable_note, storable_text
from ..model.values import one_line
from ..targets.capture import captured, sink
from ..targets.identity import identity_digest, python_identity
from ..targets.threads import AgentCrash, AgentThreads
from .client import DEFAULT_TIMEOUT_S
from .judges import JudgeRef
from .opinion import Opinion

#: The longest answer kept, in characters: a model judge's reply is capped at the same
#: size in bytes (``wire.MAX_BODY``); a longer one is an error, not a truncated answer.
MAX_ANSWER = 8 * 1024 * 1024
#: How much of an exception's message the reason keeps.
REASON_LIMIT = 200
#: How much of what a judge printed its opinion keeps, in characters.
MAX_PRINTED = 64 * 1024

#: Each judge module's file digest when this process imported it (by module name): a
#: long-lived process (the workbench, a worker) whose judge file was edited since
#: imports it again, so that the identity it records is the code that answers.
_imported: dict[str, str | None] = {}
_import_lock = threading.Lock()


@dataclass(frozen=True)
class PythonJudge:
    """One loaded ``python:`` judge: its callable, how to call it, what identifies it."""

    ref: JudgeRef
    func: Callable[..., Any] = field(repr=False)
    #: Whether it is given ``inputs`` as a second argument.
    takes_inputs: bool
    #: ``callable``, ``module_digest`` and ``code_digest``: recorded with every opinion
    #: and part of the prompt digest.
    parameters: Mapping[str, Any]

    @property
    def is_async(self) -> bool:
        """Whether it is a coroutine function, awaited on the loop (else it runs on a thread;
        an awaitable it returns there, as an object with an async ``__call__`` does, is
        awaited on the loop after)."""
        return inspect.iscoroutinefunction(self.func)


def check(ref: JudgeRef, base_dir: Path | None) -> None:
    """Whether the judge ``ref`` names can be imported and called; ``ValueError`` says why not.

    What a suite's load asks of each check that names one: the import and
    the attribute, not the digests, which the run takes once (``load``).
    """
    if ref.kind != "python":
        raise ValueError(f"{ref.uri} is not a python judge")
    _callable(ref, resolve_function(ref.model, base_dir or Path.cwd()))


def _callable(ref: JudgeRef, func: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isclass(func):
        raise ValueError(f"{ref.model!r} is a class, not a function: a judge is called with "
                         "the prompt and returns the answer text")
    return func


def load(ref: JudgeRef, base_dir: Path | None) -> PythonJudge:
    """Import the judge ``ref`` names, with ``base_dir`` importable; ``ValueError`` says why not.

    ``base_dir`` is the folder of the suite file that names the judge, as
    for a ``python:`` target and a ``grader:`` (None: the working folder).
    """
    if ref.kind != "python":
        raise ValueError(f"{ref.uri} is not a python judge")
    module_name = ref.model.partition(":")[0]
    with _import_lock:
        func = resolve_function(ref.model, base_dir or Path.cwd())
        module = sys.modules.get(module_name)
        if module is not None:
            func = _fresh(ref, module, func)
    func = _callable(ref, func)
    module = sys.modules.get(module_name)
    parameters: dict[str, Any] = {"callable": ref.model, "module_digest": None,
                                  "code_digest": None}
    if module is not None:
        parameters["module_digest"] = _module_digest(module)
        parameters["code_digest"] = identity_digest(python_identity(ref.uri, module))
    return PythonJudge(ref, func, _takes_inputs(func), parameters)


def _fresh(ref: JudgeRef, module: ModuleType, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``, from the module as its file is now: imported again if the file changed."""
    name = module.__name__
    now = _module_digest(module)
    before = _imported.setdefault(name, now)
    if before == now:
        return func
    _forget_bytecode(module)
    try:
        importlib.reload(module)
    except Exception as exc:  # the edited file no longer imports: say how
        raise ValueError(f"cannot import {name!r} again after it changed: "
                         f"{type(exc).__name__}: {one_line(_text(exc), REASON_LIMIT)}") from None
    _imported[name] = now
    return resolve_function(ref.model, None)


def _forget_bytecode(module: ModuleType) -> None:
    """Remove the module's cached bytecode, so that ``reload`` compiles the file as it is.

    The cache is trusted when the file's mtime (in whole seconds) and size
    match: an edit within the same second that keeps the size (``'pass'`` to
    ``'fail'``) would otherwise reload the old code under the new digest.
    """
    file = getattr(module, "__file__", None)
    if isinstance(file, str) and file.endswith(".py"):
        with contextlib.suppress(OSError, ValueError, NotImplementedError):
            Path(importlib.util.cache_from_source(file)).unlink(missing_ok=True)


def _module_digest(module: ModuleType) -> str | None:
    """``sha256:`` of the module's file; None for a module with none (a built-in)."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    try:
        path = Path(file)
        return file_digest(path) if path.is_file() else None
    except OSError:
        return None


def _takes_inputs(func: Callable[..., Any]) -> bool:
    """Whether ``func`` can be called with two positional arguments (prompt, inputs)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):  # no signature to read (some built-ins): the prompt alone
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def inputs_of(kind: str, **pieces: Any) -> dict[str, Any]:
    """The ``inputs`` a judge is given: ``kind`` and the pieces, as fresh JSON copies.

    Copies, so that a judge that changes what it was given cannot change the
    trace it judges; a piece that is not JSON (it cannot be, after a trace's
    checks) is given as its text.
    """
    given: dict[str, Any] = {"kind": kind}
    for name, value in pieces.items():
        try:
            given[name] = json_copy(value)
        except (TypeError, ValueError, RecursionError):
            given[name] = repr(value)
    return given


class Caller:
    """Calls ``python:`` judges for one battery or one comparison; ``close()`` when done.

    Holds the threads plain functions run on and the switch that keeps a
    judge's prints out of assay's output, both made on the first call.
    """

    def __init__(self, concurrency: int,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.concurrency = max(1, concurrency)
        self.clock = clock
        self._threads: AgentThreads | None = None
        self._capture: Any = None

    async def ask(self, judge: PythonJudge, prompt: str, inputs: Mapping[str, Any], *,
                  prompt_digest: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Opinion:
        """Ask ``judge`` once; never raises but on cancellation."""
        start = self.clock()

        buffer = io.StringIO()  # what the judge prints, kept from assay's own output

        def opinion(raw: str | None, error: str | None, raised: BaseException | None = None
                    ) -> Opinion:
            return Opinion(raw=raw, model=judge.ref.uri, prompt_digest=prompt_digest,
                           parameters=judge.parameters, latency_s=round(self.clock() - start, 6),
                           error=error, stream=_stream(buffer.getvalue(), raised))

        if self._capture is None:
            self._capture = captured()
            self._capture.__enter__()
        args = (prompt, dict(inputs)) if judge.takes_inputs else (prompt,)
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self._call(judge, args, buffer)
                if inspect.isawaitable(answer):  # a plain callable that returned a coroutine
                    answer = await answer
        except TimeoutError:
            return opinion(None, f"timed out after {timeout_s:g}s")
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the battery's own cancel: an interrupt
            return opinion(None, "raised CancelledError")
        except AgentCrash as exc:  # SystemExit, KeyboardInterrupt raised in its thread
            return opinion(None, f"raised {type(exc.original).__name__}", exc.original)
        except (Exception, SystemExit) as exc:
            return opinion(None, f"raised {type(exc).__name__}", exc)
        if not isinstance(answer, str):
            return opinion(None, f"the judge returned {_type_name(answer)}, not text")
        if len(answer) > MAX_ANSWER:
            return opinion(None, f"the answer is longer than {MAX_ANSWER:,} characters")
        return opinion(storable_text(answer), None)

    async def _call(self, judge: PythonJudge, args: tuple[Any, ...], buffer: io.StringIO) -> Any:
        if judge.is_async:
            token = sink.set(buffer)
            try:
                return await judge.func(*args)
            finally:
                sink.reset(token)
        if self._threads is None:
            self._threads = AgentThreads(self.concurrency, name="assay-judge")

        def call() -> Any:
            sink.set(buffer)
            return judge.func(*args)

        context = contextvars.copy_context()
        return await self._threads.run(lambda: context.run(call))

    def close(self) -> None:
        """Let the threads go (a hung one is a daemon) and give assay its output back."""
        if self._threads is not None:
            self._threads.close()
            self._threads = None
        if self._capture is not None:
            self._capture.__exit__(None, None, None)
            self._capture = None


def _text(exc: BaseException) -> str:
    """An exception's message, or what stands for it when even that raises."""
    try:
        return str(exc)
    except Exception:  # a hostile __str__: the type alone will do
        return "(its message cannot be read)"


def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def reason(exc: BaseException) -> str:
    """``Type: message`` on one line, cut short, storable: what a judge raised."""
    message = one_line(storable_note(_text(exc)), REASON_LIMIT)
    printable = "".join(c if c.isprintable() else " " for c in message).strip()
    name = type(exc).__name__
    return f"{name}: {printable}" if printable else name


def _stream(printed: str, raised: BaseException | None) -> str | None:
    """The opinion's ``stream``: what the judge printed (cut at ``MAX_PRINTED``) and, last,
    what it raised; None when it did neither."""
    if len(printed) > MAX_PRINTED:
        printed = printed[:MAX_PRINTED] + \
            f"\n[assay: {len(printed) - MAX_PRINTED:,} more characters printed, not kept]\n"
    if raised is not None:
        if printed and not printed.endswith("\n"):
            printed += "\n"
        printed += f"raised {reason(raised)}\n"
    return storable_text(printed) if printed else None


__all__ = ["MAX_ANSWER", "Caller", "PythonJudge", "check", "inputs_of", "load", "reason"]

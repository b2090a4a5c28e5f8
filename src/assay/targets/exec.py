"""``exec:COMMAND ARGS…`` — any program, in any language, as an agent (SPEC §15).

Each trial runs the program once, in its own process group, in the trial's
workspace (SPEC §14) or, for a case without one, in an empty folder of its
own; HOME is a throwaway folder, and the environment is the user's minus
provider keys and assay's own secrets (``hosts.process.child_environment``),
plus ``ASSAY_TRIAL`` (an opaque id, never case content) and, with a
workspace, ``ASSAY_WORKSPACE``.

- Input: the case input as JSON on stdin (a string input too: ``"text"``),
  one line. When an argument holds ``{input}``, the input goes there
  instead — a string as it is, anything else as its JSON text — and stdin
  is empty.
- Output: stdout, parsed as JSON when the whole of it parses, else the text
  (one trailing newline dropped); nothing at all is ``None``.
- Status: a final output object ``{"status": "refused", …}`` is
  ``refused`` (``refusal.refusal_in_output``), whatever the exit code; else
  a non-zero exit is ``error`` ("exited with code N: " and stderr's last
  line), the output kept; else ``ok``. A program ended by a signal never
  answered: the trial is broken, and says which signal.
- stderr is kept as the trace's ``stdout`` (what a Python agent's prints
  are), its last ``STDERR_KEPT`` bytes; never printed.
- stdout past ``STDOUT_KEPT`` is read and dropped: the output is the text
  kept, unparsed, and the status ``error`` says how much there was.

What another observer of the process adds (the recording proxy its model
calls go through, the OTLP receiver its spans go to) comes in through the
``Observer`` seam below: extra environment per trial, and facts added to its
trace. See docs/decisions/0067-exec-target.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shlex
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import HarnessFailure, UsageError
from ..mcp_uri import resolve_command
from ..model import Evidence, Status, Trace
from ..model.values import one_line
from .base import TargetOptions, TrialBroken, TrialRequest, case_facets, evidence
from .hosts.process import Kept, child_environment, run_group, throwaway_home
from .identity import file_entries, identity_digest
from .refusal import refusal_in_output

#: The URI's prefix.
SCHEME = "exec:"
#: Where an argument takes the case input instead of stdin.
INPUT = "{input}"
#: Kept of the program's stdout, from its start; the rest is counted and dropped.
STDOUT_KEPT = 8 * 1024 * 1024
#: Kept of its stderr, from its end (the trace's ``stdout``).
STDERR_KEPT = 1024 * 1024
#: Longest stderr line a non-zero exit's reason quotes.
REASON_CHARS = 500

#: Why a case's model or effort pin does not reach a program.
UNPINNABLE = "an exec: agent picks its own model and effort"


# --- the seam: what watches a program from outside its process ----------------------------

@dataclass(frozen=True)
class ExecTrial:
    """One trial of an ``exec:`` agent, as an observer around its process sees it.

    ``id`` is the trial's ``ASSAY_TRIAL``: random, unique per trial, and free
    of case content, so that it may name a route, a span attribute or a log
    line. ``workdir`` is where the program runs, ``home`` its throwaway HOME.
    """

    id: str
    request: TrialRequest
    workdir: Path
    home: Path


class Watch(Protocol):
    """What one observer keeps of one trial (a proxy route, a receiver's filter)."""

    #: Variables the program gets besides the user's (``OPENAI_BASE_URL`` …); they
    #: win over the user's, and over ``ASSAY_TRIAL``/``ASSAY_WORKSPACE`` never.
    env: Mapping[str, str]

    def seen(self, trace: Trace) -> Trace:
        """``trace`` with what was observed added (events, usage, steps, facets, evidence).

        Called once: for the finished trial, or for the trace so far of one
        stopped at its timeout (status ``timeout``). Must not raise.
        """

    def end(self) -> None:
        """The trial is over: nothing more is taken for it (a late request is refused)."""


class Observer(Protocol):
    """Something that watches every trial of an ``exec:`` target from outside its process.

    Started with the target and closed with it; ``watch`` is called as each
    trial's process is about to start. ``evidence`` says which facts it can
    observe (merged into the target's own claim).
    """

    evidence: Mapping[str, Evidence]

    async def start(self) -> None:
        """Get ready (listen on a port …); raise HarnessFailure if it cannot."""

    def watch(self, trial: ExecTrial) -> Watch:
        """Begin watching one trial."""

    async def close(self) -> None:
        """Release what ``start`` took."""


# --- the URI ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """The program and its arguments, relative names resolved beside the suite."""

    argv: tuple[str, ...]
    #: Files the URI names (a program beside the suite, any argument naming a file):
    #: part of the agent version.
    named: tuple[Path, ...]
    #: True when an argument takes the input (``{input}``), so stdin is empty.
    takes_input: bool


def parse_command(uri: str, base_dir: Path) -> Command:
    """The command ``exec:COMMAND ARGS…`` names; ``UsageError`` when it names none.

    A relative program path (``./agent.sh``, ``bin/agent``) and every argument
    that names an existing file or folder beside the suite are made absolute:
    the program runs elsewhere (in the trial's workspace). Flags (``-…``),
    ``.``/``..`` and arguments holding ``{input}`` are left as written.
    """
    try:
        words = shlex.split(uri.removeprefix(SCHEME))
    except ValueError as exc:
        raise UsageError(f"target {uri!r}: {exc}") from None
    if not words:
        raise UsageError(f"target {uri!r}: give the command that runs the agent, "
                         "e.g. exec:python agent.py")
    base = base_dir.resolve()
    program, *args = words
    named: list[Path] = []
    if os.sep in program:  # a path, not a name to look up on PATH
        path = Path(program).expanduser()
        if not path.is_absolute():  # beside the suite: part of the agent
            path = base / path
            named.append(path)
        # An absolute program is what runs the agent (an interpreter), as a name on
        # PATH is: not a file of the agent's.
        program = str(path)
    resolved = []
    for arg in args:
        candidate = base / arg
        if (arg and not arg.startswith("-") and INPUT not in arg and arg not in (".", "..")
                and not os.path.isabs(arg) and candidate.exists()):
            named.append(candidate)
            arg = str(candidate)
        elif os.path.isabs(arg) and Path(arg).is_file():
            named.append(Path(arg))
        resolved.append(arg)
    return Command(argv=(program, *resolved), named=tuple(named),
                   takes_input=any(INPUT in arg for arg in args))


def input_argument(value: Any) -> str:
    """The case input as ``{input}`` puts it into an argument: a string as it is,
    anything else as its JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def input_stdin(value: Any) -> bytes:
    """The case input as the program reads it on stdin: its JSON text, one line, UTF-8.

    A lone surrogate (``"\\ud800"`` in YAML) has no UTF-8: such an input is
    written with ASCII escapes instead, which every JSON reader reads alike.
    """
    try:
        return (json.dumps(value, ensure_ascii=False) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(value) + "\n").encode()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_output(text: str) -> Any:
    """The output stdout gives: its JSON value when the whole of it parses, else the text
    with one trailing newline dropped; nothing at all is None.

    ``NaN`` and ``Infinity`` are not JSON (a store cannot keep them): such a text
    stays text. Reading never raises.
    """
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if text == "":
        return None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return text


def last_line(text: str) -> str:
    """The last line of ``text`` with something on it, on one line and cut."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return one_line(line, REASON_CHARS)
    return ""


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; a number no signal has, as the number."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# --- the target -----------------------------------------------------------------------------

class ExecTarget:
    """A program run once per trial; stdin the input, stdout the output, exit code observed.

    ``observers`` watch each trial from outside its process (the seam for
    the recording proxy and the OTLP receiver; none by default).
    """

    def __init__(self, uri: str, options: TargetOptions,
                 observers: Sequence[Observer] = ()) -> None:
        self.uri = uri
        self.options = options
        self.command = parse_command(uri, options.base_dir)
        self.observers = list(observers)
        self.evidence = evidence(output="observed", exit_code="observed")
        for observer in self.observers:
            self.evidence.update(observer.evidence)
        self.facets: dict[str, str] = {"harness": "exec"}
        self._argv: list[str] = []

    async def start(self) -> None:
        """Find the program (a path beside the suite, or a name on PATH) and start the
        observers; a program that is not there is a harness failure."""
        try:
            self._argv = resolve_command(self.command.argv, self.options.base_dir)
        except ValueError as exc:
            raise HarnessFailure(f"target {self.uri}: {exc}") from None
        started: list[Observer] = []
        try:
            for observer in self.observers:
                await observer.start()
                started.append(observer)
        except BaseException:
            for observer in reversed(started):
                await observer.close()
            raise

    async def close(self) -> None:
        """Close the observers; each trial's process and folder are gone when it ends."""
        for observer in reversed(self.observers):
            await observer.close()

    def identity(self) -> dict[str, str]:
        """The URI and the content of the files it names: the program when it is a path
        beside the suite, and every argument that names a file (a folder is not read)."""
        identity = {"uri": self.uri}
        identity.update(file_entries(self.command.named, self.options.base_dir))
        return identity

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())

    async def run(self, request: TrialRequest) -> Trace:
        """One run of the program, in the trial's workspace or a folder of its own."""
        assert self._argv, "start() first"
        value = request.case.input
        if self.command.takes_input:
            given = input_argument(value)
            argv = [self._argv[0], *(arg.replace(INPUT, given) for arg in self._argv[1:])]
            stdin = b""
        else:
            argv, stdin = list(self._argv), input_stdin(value)
        with throwaway_home("assay-exec-") as home:
            if request.workspace is not None:
                work = request.workspace
            else:
                work = home / "work"
                work.mkdir()
            trial = ExecTrial(id=secrets.token_hex(8), request=request, workdir=work, home=home)
            watches = [observer.watch(trial) for observer in self.observers]
            try:
                return await self._run(trial, argv, stdin, watches)
            finally:
                for watch in watches:
                    watch.end()

    def _environment(self, trial: ExecTrial, watches: Sequence[Watch]) -> dict[str, str]:
        """The user's environment as ``child_environment`` leaves it, the observers'
        variables, then assay's own for the trial (which no observer overrides)."""
        extra: dict[str, str] = {}
        for watch in watches:
            extra.update(watch.env)
        extra["ASSAY_TRIAL"] = trial.id
        env = child_environment(os.environ, trial.home, extra)
        if trial.request.workspace is not None:
            env["ASSAY_WORKSPACE"] = str(trial.workdir)
        else:
            env.pop("ASSAY_WORKSPACE", None)  # one the user's environment had is not this trial's
        return env

    async def _run(self, trial: ExecTrial, argv: list[str], stdin: bytes,
                   watches: Sequence[Watch]) -> Trace:
        request = trial.request
        stdout = Kept(STDOUT_KEPT)
        stderr = Kept(STDERR_KEPT, head=False)
        started = time.perf_counter()
        env = self._environment(trial, watches)
        try:
            code = await run_group(argv, cwd=trial.workdir, env=env, stdin=stdin,
                                   stdout=stdout.read, stderr=stderr.read)
        except OSError as exc:
            raise TrialBroken(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        except ValueError as exc:  # a NUL, or a lone surrogate, in an argument
            raise TrialBroken(f"the program's arguments cannot be passed to it: {exc}") from None
        except asyncio.CancelledError:
            # Stopped at a timeout (or an interrupt), the group killed: what the
            # observers saw until then is the trial's record.
            try:
                cut: Trace | None = self._seen(Trace(
                    status="timeout", duration_s=time.perf_counter() - started,
                    stdout=_stderr_text(stderr), facets=self._facets(request),
                    evidence=dict(self.evidence)), watches)
            except Exception:  # an observer's fault: no record to keep, the timeout stands
                cut = None
            request.partial.keep(lambda: cut)
            raise
        duration = time.perf_counter() - started
        if code < 0:
            said = last_line(stderr.text())
            raise TrialBroken(f"the agent was killed by {signal_name(-code)}"
                              + (f"; its stderr ends with: {said}" if said else ""))
        trace = self._trace(code, stdout, stderr, duration, request)
        return self._seen(trace, watches)

    def _trace(self, code: int, stdout: Kept, stderr: Kept, duration: float,
               request: TrialRequest) -> Trace:
        status: Status = "ok"
        error: str | None = None
        if stdout.cut:
            output: Any = stdout.text()
            status, error = "error", (f"the agent printed {stdout.total:,} bytes on stdout; "
                                      f"the output is the first {STDOUT_KEPT:,}")
        else:
            output = read_output(stdout.text())
            refusal = refusal_in_output(output)
            if refusal is not None:
                status, error = "refused", refusal.reason
            elif code != 0:
                said = last_line(stderr.text())
                status, error = "error", f"exited with code {code}" + (f": {said}" if said
                                                                         else "")
        return Trace(output=output, status=status, error=error,
                     # A refusal is a final answer, as an exit 0 is; an error is not.
                     settled=status in ("ok", "refused"), exit_code=code,
                     duration_s=duration, stdout=_stderr_text(stderr),
                     facets=self._facets(request), evidence=dict(self.evidence))

    def _facets(self, request: TrialRequest) -> dict[str, str]:
        return {**self.facets, **case_facets(request.case, "exec", unpinnable=UNPINNABLE)}

    @staticmethod
    def _seen(trace: Trace, watches: Sequence[Watch]) -> Trace:
        for watch in watches:
            trace = watch.seen(trace)
        return trace


def _stderr_text(stderr: Kept) -> str:
    """stderr as the trace keeps it: its tail, saying so when its start was dropped."""
    text = stderr.text()
    if stderr.cut:
        return f"<assay: the first {stderr.total - len(stderr.data):,} bytes of stderr were " \
               f"dropped>\n{text}"
    return text

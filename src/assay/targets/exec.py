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
import contextlib
import json
import os
import secrets
import shlex
import signal
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import HarnessFailure, UsageError
from ..mcp_uri import resolve_command
from ..model import Event, Evidence, Status, Trace
from ..model.values import one_line
from .base import TargetOptions, TrialBroken, TrialRequest, case_facets, evidence
from .conversation import Talk, conversation
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


async def launched(argv: list[str], **given: Any) -> int:
    """``run_group``, with a program that cannot be started this trial's breakage."""
    try:
        return await run_group(argv, **given)
    except OSError as exc:
        raise TrialBroken(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL, or a lone surrogate, in an argument
        raise TrialBroken(f"the program's arguments cannot be passed to it: {exc}") from None


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
    #: ``time.perf_counter()`` when the trial began: what its observers time things from.
    started: float = field(default_factory=time.perf_counter)


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
        talk = conversation(request)
        # In a conversation the case's input is the system message (SPEC §16): the
        # argument that takes the input gets it (nothing when there is none), else
        # it is the first line on stdin.
        value = request.case.input if talk is None else talk.system or ""
        system: str | None = None
        if self.command.takes_input:
            given = input_argument(value)
            argv = [self._argv[0], *(arg.replace(INPUT, given) for arg in self._argv[1:])]
            stdin = b""
        else:
            argv, stdin = list(self._argv), input_stdin(value)
            system = talk.system if talk is not None else None
        with throwaway_home("assay-exec-") as home:
            if request.workspace is not None:
                work = request.workspace
            else:
                work = home / "work"
                work.mkdir()
            trial = ExecTrial(id=secrets.token_hex(8), request=request, workdir=work, home=home)
            watches = [observer.watch(trial) for observer in self.observers]
            try:
                if talk is not None:
                    return await _Conversation(self, trial, talk, system, watches).run(argv)
                return await self._run(trial, argv, stdin, watches)
            finally:
                for watch in watches:
                    watch.end()

    def environment(self, trial: ExecTrial, watches: Sequence[Watch]) -> dict[str, str]:
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
        env = self.environment(trial, watches)
        try:
            code = await launched(argv, cwd=trial.workdir, env=env, stdin=stdin,
                                   stdout=stdout.read, stderr=stderr.read)
        except asyncio.CancelledError:
            # Stopped at a timeout (or an interrupt), the group killed: what the
            # observers saw until then is the trial's record.
            try:
                cut: Trace | None = self.seen(Trace(
                    status="timeout", duration_s=time.perf_counter() - started,
                    stdout=stderr_text(stderr), facets=self.trial_facets(request),
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
        return self.seen(trace, watches)

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
                     duration_s=duration, stdout=stderr_text(stderr),
                     facets=self.trial_facets(request), evidence=dict(self.evidence))

    def trial_facets(self, request: TrialRequest) -> dict[str, str]:
        return {**self.facets, **case_facets(request.case, "exec", unpinnable=UNPINNABLE)}

    @staticmethod
    def seen(trace: Trace, watches: Sequence[Watch]) -> Trace:
        for watch in watches:
            trace = watch.seen(trace)
        return trace


def stderr_text(stderr: Kept) -> str:
    """stderr as the trace keeps it: its tail, saying so when its start was dropped."""
    text = stderr.text()
    if stderr.cut:
        return f"<assay: the first {stderr.total - len(stderr.data):,} bytes of stderr were " \
               f"dropped>\n{text}"
    return text


# --- a conversation (SPEC §16): one process, one JSON line each way per turn ----------------

#: What the stdout reader hands the conversation in place of a line when one ran past
#: ``STDOUT_KEPT`` bytes.
_TOO_LONG = (0.0, "")


class _Conversation:
    """One trial's conversation with an ``exec:`` program, and what it recorded.

    One process for the whole conversation. On stdin, one JSON object per line:
    ``{"role": "system", "content": …}`` first when the case gives an input (and
    no argument takes it), then ``{"role": "user", "content": …}`` for each user
    message, each written after the reply to the one before; stdin is closed when
    the user is done. On stdout, one line per user message: the reply, parsed as
    JSON when it parses (blank lines are skipped). See docs/targets.md.

    A reply ``{"status": "refused", …}`` ends the conversation, refused. The
    program ending without a reply (it exited, was killed, closed stdout, replied
    ``null`` or a line past ``STDOUT_KEPT``) ends it with status ``error``, the
    turns so far kept, so that a breach in an earlier turn still fails the case
    (killed by a signal before any reply, the trial is broken, as a single run
    is). After the last reply a non-zero exit is ``error`` too. Lines printed
    after the last reply are no reply: an ``error`` event counts them.
    """

    def __init__(self, target: ExecTarget, trial: ExecTrial, talk: Talk, system: str | None,
                 watches: Sequence[Watch]) -> None:
        self.target = target
        self.trial = trial
        self.talk = talk
        self.system = system
        self.watches = watches
        #: Reply lines as they arrive, with their time; None: stdout ended.
        self.lines: asyncio.Queue[tuple[float, str] | None] = asyncio.Queue()
        self.events: list[Event] = []
        self.output: Any = None
        self.replies = 0
        #: How the conversation ended before the user was done (status, why), if it did.
        self.ended: tuple[Status, str | None] | None = None
        #: The turn the program gave no reply to, if any.
        self.unanswered: int | None = None
        self.failure: Exception | None = None
        #: The user was done (no more messages): the conversation ran its course.
        self.done = False

    def _t(self) -> float:
        return round(time.perf_counter() - self.trial.started, 6)

    async def run(self, argv: list[str]) -> Trace:
        request = self.trial.request
        stderr = Kept(STDERR_KEPT, head=False)
        env = self.target.environment(self.trial, self.watches)
        try:
            code = await launched(argv, cwd=self.trial.workdir, env=env, stdin=self._talk,
                                   stdout=self._read, stderr=stderr.read)
        except asyncio.CancelledError:
            # Stopped at a timeout: every turn so far, and what the observers saw.
            try:
                cut: Trace | None = self._trace("timeout", None, stderr, None)
            except Exception:  # an observer's fault: no record to keep, the timeout stands
                cut = None
            request.partial.keep(lambda: cut)
            raise
        if self.failure is not None:  # the user's side failed (a simulated user): not the agent
            raise self.failure
        if not self.done and self.ended is None and self.unanswered is None:
            self.unanswered = self.talk.turn  # stopped waiting when the program was gone
        said = last_line(stderr.text())
        if code < 0 and not self.replies:
            raise TrialBroken(f"the agent was killed by {signal_name(-code)}"
                              + (f"; its stderr ends with: {said}" if said else ""))
        how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited with code {code}"
        status: Status
        error: str | None
        if self.unanswered is not None:
            status, error = "error", f"turn {self.unanswered}: the agent {how} without " \
                                     "replying" + (f": {said}" if said else "")
        elif self.ended is not None:
            status, error = self.ended
        elif code != 0:
            status, error = "error", f"{how}" + (f": {said}" if said else "")
        else:
            status, error = "ok", None
        return self._trace(status, error, stderr, code)

    async def _talk(self, pipe: asyncio.StreamWriter) -> None:
        """The user's side: each message written, its reply awaited, until one side is done."""
        talk = self.talk
        try:
            if self.system is not None:
                pipe.write(input_stdin({"role": "system", "content": self.system}))
            message = await talk.next()
            while message is not None:
                self.events.append(_at(talk.opened(), self._t()))
                pipe.write(input_stdin({"role": "user", "content": message}))
                await pipe.drain()
                if not await self._reply():
                    return
                message = await talk.next()
            self.done = True
        except (BrokenPipeError, ConnectionResetError):
            self.unanswered = talk.turn  # the program is gone before it read the message
        except Exception as exc:  # said after the run (``run``), once the program is stopped
            self.failure = exc
        finally:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                pipe.close()

    async def _reply(self) -> bool:
        """Read the reply to the current turn; whether the conversation goes on."""
        talk = self.talk
        got = await self.lines.get()
        if got is None:
            self.unanswered = talk.turn
            return False
        if got is _TOO_LONG:
            self.ended = "error", f"turn {talk.turn}: the reply is longer than " \
                                  f"{STDOUT_KEPT:,} bytes"
            return False
        t, line = got
        value = read_output(line)
        refusal = refusal_in_output(value)
        if refusal is not None:  # a refusal ends it in its turn (no reply event: openai's way)
            self.output = value
            self.ended = "refused", refusal.reason
            return False
        if value is None:
            self.ended = "error", f"turn {talk.turn}: the agent replied null"
            return False
        self.output = value
        self.replies += 1
        self.events.append(_at(talk.replied(value), t))
        return True

    async def _read(self, pipe: asyncio.StreamReader) -> None:
        """stdout into lines, each with its time; None at its end. A line past
        ``STDOUT_KEPT`` is ``_TOO_LONG``, and nothing more is read into lines."""
        buffer = b""
        spilled = False
        while chunk := await pipe.read(65_536):
            if spilled:
                continue  # read and let go: a program blocked on a full pipe would hang
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            t = self._t()
            for line in complete:
                if line.strip():
                    self.lines.put_nowait((t, line.decode("utf-8", "replace")))
            if len(buffer) > STDOUT_KEPT:
                spilled, buffer = True, b""
                self.lines.put_nowait(_TOO_LONG)
        if buffer.strip():
            self.lines.put_nowait((self._t(), buffer.decode("utf-8", "replace")))
        self.lines.put_nowait(None)

    def _trace(self, status: Status, error: str | None, stderr: Kept,
               code: int | None) -> Trace:
        """The conversation's trace: the observers' facts, the turns put among them by time."""
        trace = Trace(output=self.output if status in ("ok", "refused", "error") else None,
                      status=status, error=error,
                      settled=(self.talk.settled if status == "ok" else status == "refused"),
                      exit_code=code, duration_s=time.perf_counter() - self.trial.started,
                      stdout=stderr_text(stderr),
                      facets=self.target.trial_facets(self.trial.request),
                      evidence=dict(self.target.evidence))
        seen = self.target.seen(trace, self.watches)
        events = _by_time(seen.events, self.events)
        extra = self._unread()
        if extra:
            events.append(Event(kind="error", t=self._t(), turn=self.talk.turn or 1,
                                text=f"the agent printed {extra} more line(s) after its last "
                                     "reply; they are no reply"))
        return seen.model_copy(update={"events": events})

    def _unread(self) -> int:
        """How many lines the program printed that no turn read as its reply."""
        count = 0
        while not self.lines.empty():
            if self.lines.get_nowait() not in (None, _TOO_LONG):
                count += 1
        return count


def _at(event: Event, t: float) -> Event:
    event.t = t
    return event


def _by_time(seen: Sequence[Event], turns: Sequence[Event]) -> list[Event]:
    """The conversation's ``user`` and ``reply`` events put among what the observers saw,
    by time, and every event given its turn: the one open when it happened, or, for a
    tool's result or a note on a call, the turn of the call."""
    merged: list[Event] = []
    pending = deque(turns)
    for event in seen:
        while pending and event.t is not None and (pending[0].t or 0.0) <= event.t:
            merged.append(pending.popleft())
        merged.append(event)
    merged.extend(pending)
    turn = 1
    calls: dict[str, int] = {}
    for event in merged:
        if event.kind == "user" and event.turn is not None:
            turn = event.turn
        elif event.turn is None:
            called = calls.get(event.call_id) if event.call_id is not None and \
                event.kind in ("tool_result", "answer", "error") else None
            event.turn = called or turn
        if event.kind in ("tool_call", "ask") and event.call_id is not None:
            calls.setdefault(event.call_id, event.turn or turn)
    return merged

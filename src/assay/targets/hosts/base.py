"""What the ``claude`` and ``codex`` targets share: find the CLI, check it, run it per trial.

Each trial runs the installed CLI natively, in a throwaway home that holds
only a copy of the CLI's own credentials file, in a copy of the case's
fixture folder, with provider key variables removed from its environment
(principle 10). The host adapter turns the CLI's JSON event stream into a
Trace; a CLI that is missing, too old or signed out fails ``start()``, which
is a harness failure, not the agent's. A conversation (SPEC §16) runs the
CLI once per user message, resuming its own session (``HostTalk``).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ...errors import HarnessFailure, UsageError
from ...model import Event, Evidence, Status, Trace
from ...model.fixture import ToolFixture
from ...model.invocation import Invocation
from ..base import TargetOptions, TrialBroken, TrialRequest, case_facets
from ..conversation import Talk, conversation
from ..fixture_server import fixture_names, read_final_state, server_command
from ..identity import file_entries, folder_entries, identity_digest
from .process import (
    Finished,
    Version,
    child_environment,
    parse_version,
    run_cli,
    stage_workdir,
    throwaway_home,
)
from .talk import merged_steps, merged_usage, weakest_evidence

#: How long ``--version`` and sign-in checks may take.
CHECK_TIMEOUT_S = 60.0


def prompt_of(value: Any) -> str:
    """The prompt a case input gives a CLI host: a string, or a mapping's ``prompt``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
        if len(value) > 1:
            raise TrialBroken("a CLI host takes a prompt: the case input is a string or "
                              "{prompt: ...} with no other keys")
        return str(value["prompt"])
    raise TrialBroken("a CLI host takes a prompt: the case input is a string or "
                      f"{{prompt: ...}}, not {type(value).__name__}")


def tail(text: str, limit: int = 400) -> str:
    """The last ``limit`` characters of a CLI's stderr, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[-limit:]


def without(args: list[str], *flags: str) -> list[str]:
    """Flags without these (and their values): a case's pin replaces the URI's."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if name in flags:
            skip = not eq
            continue
        kept.append(arg)
    return kept


def find_binary(name: str, binary_env: str) -> str | None:
    """The CLI's executable: the one ``binary_env`` names, else ``name`` on ``PATH``.

    None when there is none, or when what is named is not an executable file.
    """
    binary = os.environ.get(binary_env) or shutil.which(name)
    if not binary or not (Path(binary).is_file() and os.access(binary, os.X_OK)):
        return None
    return binary


def version_refusal(name: str, found: Version, minimum: tuple[int, int, int]) -> str | None:
    """Why a CLI of this version is not run (None: it is), naming its version and the least.

    A prerelease's stream may change before release, and a stream older than
    ``minimum`` is one the readers were not checked against: refused, not misread.
    """
    least = ".".join(map(str, minimum))
    if found.prerelease:
        return f"{name} {found} is a prerelease; assay reads released versions, {least} or later"
    if found.release < minimum:
        return f"{name} {found} is too old; assay reads the event stream of {least} or later"
    return None


class CliHost(ABC):
    """A host CLI run once per trial. Subclasses say how to call it and read it."""

    #: The command's name, also the URI's first word.
    name: ClassVar[str]
    #: The variable that names the executable instead of ``PATH``.
    binary_env: ClassVar[str]
    #: The oldest released version whose event stream this adapter reads.
    minimum: ClassVar[tuple[int, int, int]]
    #: How to install the CLI, for the harness failure that says it is missing.
    install_hint: ClassVar[str]
    #: Flags assay sets itself; the URI may not set them.
    reserved: ClassVar[frozenset[str]] = frozenset()
    #: Flags whose value is a path, resolved against the suite's folder.
    path_flags: ClassVar[frozenset[str]] = frozenset()
    #: Path flags naming a folder that is part of the agent: its files make the agent version.
    folder_flags: ClassVar[frozenset[str]] = frozenset()
    evidence: dict[str, Evidence]

    def __init__(self, uri: str, options: TargetOptions) -> None:
        self.uri = uri
        self.options = options
        self.args = self._parse_args(uri)
        self.facets: dict[str, str] = {"harness": self.name}
        model = self.flag_value("--model", "-m")
        if model:
            self.facets["model"] = model
        self.binary = ""
        self.version = ""

    def _parse_args(self, uri: str) -> list[str]:
        try:
            words = shlex.split(uri)
        except ValueError as exc:
            raise UsageError(f"target {uri!r}: {exc}") from None
        args = words[1:]
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in self.reserved:
                raise UsageError(f"target {uri!r}: assay sets {flag} itself; leave it out")
        return [self._resolve(args, i) for i in range(len(args))]

    def _resolve(self, args: list[str], index: int) -> str:
        """A relative path after a path flag names a file beside the suite."""
        arg = args[index]
        if index == 0 or args[index - 1] not in self.path_flags or arg.startswith(("{", "-")):
            return arg
        candidate = self.options.base_dir / arg
        return str(candidate.resolve()) if candidate.exists() else arg

    def flag_value(self, *flags: str) -> str | None:
        """The value the URI gives a flag (``--model X`` or ``--model=X``), last one wins."""
        found = None
        for i, arg in enumerate(self.args):
            name, eq, value = arg.partition("=")
            if name in flags:
                found = value if eq else (self.args[i + 1] if i + 1 < len(self.args) else None)
        return found

    # --- what a subclass provides -------------------------------------------------

    @abstractmethod
    def prepare_home(self, home: Path) -> None:
        """Put the CLI's own credentials (a byte copy) and config into a throwaway home."""

    def extra_env(self, home: Path) -> dict[str, str]:
        """Variables the CLI needs besides HOME (e.g. ``CODEX_HOME``)."""
        return {}

    @abstractmethod
    def argv(self, request: TrialRequest, prompt: str, home: Path, work: Path) -> list[str]:
        """The command line of one trial."""

    def fixture_argv(self, home: Path, command: list[str]) -> list[str]:
        """Flags that give the CLI the case's tool fixture as the MCP server ``command``
        (``fixture_server``), its tools allowed without asking; after the URI's own."""
        return []

    @abstractmethod
    def invoke(self, skill: str, prompt: str) -> str:
        """The prompt that has the CLI invoke ``skill`` its own way (an ``explicit``
        invocation, SPEC §2), the case's prompt following."""

    def stdin(self, prompt: str) -> bytes:
        """What the CLI reads on stdin: the prompt (kept off the command line, where
        every user of the machine could read it)."""
        return prompt.encode()

    @abstractmethod
    def trace(self, finished: Finished, request: TrialRequest, prompt: str,
              home: Path, since: int = 0) -> Trace:
        """The trial's trace from what the CLI printed (and left in its home); ``since``:
        ``turn_mark`` before this run, for a turn of a conversation."""

    def partial_trace(self, finished: Finished, request: TrialRequest, prompt: str,
                      home: Path, since: int = 0) -> Trace | None:
        """The trace of what the CLI printed before the trial was stopped (None: nothing)."""
        return None

    # --- a conversation (SPEC §16): the host's own session, resumed -------------------

    #: Whether a resumed run reports the usage of the whole session (codex) rather than
    #: its own (claude): a conversation's usage is then its last turn's, not a sum.
    cumulative_usage: ClassVar[bool] = False

    @abstractmethod
    def session_of(self, finished: Finished) -> str | None:
        """The session a run's stream names (what ``resume_argv`` takes), if any."""

    @abstractmethod
    def resume_argv(self, argv: list[str], session: str) -> list[str]:
        """A later turn's command line: the first turn's (``argv``), resuming ``session``."""

    @abstractmethod
    def system_argv(self, home: Path, system: str) -> list[str]:
        """Give the agent a conversation's system message (the case's ``input``): what it
        writes into ``home`` and the flags that point at it, kept off the command line."""

    def turn_mark(self, home: Path) -> int:
        """Where the CLI's own record of the session stands before a turn (passed to
        ``trace`` as ``since``); 0 for a CLI whose stream says all."""
        return 0

    def merged_facets(self, turns: Sequence[dict[str, str]]) -> dict[str, str]:
        """The facets of a conversation from its turns' (a later turn's win)."""
        merged: dict[str, str] = {}
        for facets in turns:
            merged.update(facets)
        return merged

    @abstractmethod
    async def check_signed_in(self) -> None:
        """Raise HarnessFailure when the CLI has no sign-in of its own."""

    # --- the Target protocol ----------------------------------------------------

    async def start(self) -> None:
        """Find the CLI, check its version and its sign-in; any failure is the harness's."""
        binary = find_binary(self.name, self.binary_env)
        if binary is None:
            named = os.environ.get(self.binary_env)
            where = f"{self.binary_env}={named}" if named else "PATH"
            raise HarnessFailure(f"target {self.name}: the {self.name} CLI was not found on "
                                 f"{where}; {self.install_hint}")
        self.binary = binary
        done = await self.check([binary, "--version"])
        found = parse_version(done.lines[0][1] if done.lines else "")
        if done.exit_code != 0 or found is None:
            raise HarnessFailure(f"target {self.name}: `{self.name} --version` failed "
                                 f"(exit {done.exit_code}): {tail(done.stderr)}")
        self.version = str(found)
        refusal = version_refusal(self.name, found, self.minimum)
        if refusal:
            raise HarnessFailure(f"target {self.name}: {refusal} ({self.install_hint})")
        self.facets["host_version"] = self.version
        await self.check_signed_in()

    async def check(self, argv: Sequence[str]) -> Finished:
        """Run a short command of the CLI in a throwaway home prepared like a trial's."""
        with throwaway_home(f"assay-{self.name}-") as home:
            self.prepare_home(home)
            env = child_environment(os.environ, home, self.extra_env(home))
            try:
                async with asyncio.timeout(CHECK_TIMEOUT_S):
                    return await run_cli(argv, cwd=home, env=env)
            except TimeoutError:
                raise HarnessFailure(f"target {self.name}: `{' '.join(argv[1:])}` did not "
                                     f"answer within {CHECK_TIMEOUT_S:g}s") from None
            except OSError as exc:
                raise HarnessFailure(f"target {self.name}: cannot run {argv[0]}: "
                                     f"{exc.strerror or exc}") from None

    def first_prompt(self, request: TrialRequest, prompt: str) -> str:
        """The prompt of a trial's first run: ``prompt``, invoking the case's skill when its
        invocation is ``explicit``."""
        invocation = request.case.invocation
        if isinstance(invocation, Invocation) and invocation.mode == "explicit":
            return self.invoke(invocation.skill, prompt)
        # ``automatic`` and ``none`` add nothing: the host comes to the skill, or does not,
        # on the prompt as written.
        return prompt

    async def run(self, request: TrialRequest) -> Trace:
        """One trial: the CLI in a throwaway home, working in the trial's workspace; a
        conversation (SPEC §16) runs it once per turn, resuming its session (``talk``)."""
        talk = conversation(request)
        prompt = "" if talk is not None else self.first_prompt(request,
                                                               prompt_of(request.case.input))
        tools = request.tools
        if tools is not None and tools.mcp:
            raise TrialBroken(f"{self.name} takes MCP servers in its own flags: a tool "
                              "fixture's mcp: list is not given to it (give the servers in "
                              "the target's flags)")
        with throwaway_home(f"assay-{self.name}-") as home:
            self.prepare_home(home)
            served: list[str] = []
            state_file: Path | None = None
            if tools is not None:
                # The fixture's tools reach the CLI as an MCP server of its own (SPEC §14).
                folder = home / "assay-fixture"
                folder.mkdir()
                base = request.fixture.parent if request.fixture is not None else Path.cwd()
                command, state_file = server_command(tools, base, folder)
                served = self.fixture_argv(home, command)
            extra = self.extra_env(home)
            if request.workspace is not None:
                work = request.workspace
                extra = {**extra, "ASSAY_WORKSPACE": str(work)}
            else:
                work = stage_workdir(home, request.fixture)
            env = child_environment(os.environ, home, extra)
            if talk is not None:
                held = HostTalk(self, request, talk, home=home, work=work, env=env,
                                served=served, state=(state_file, tools))
                trace = await held.run()
                return self.pin_facets(with_fixture(trace, state_file, tools), request)
            finished = Finished(exit_code=-1)
            try:
                await run_cli([*self.argv(request, prompt, home, work), *served], cwd=work,
                              env=env, stdin=self.stdin(prompt), into=finished)
            except OSError as exc:
                raise TrialBroken(f"cannot run {self.name}: {exc.strerror or exc}") from None
            except asyncio.CancelledError:
                # Stopped at a timeout: what the stream said so far is the trial's
                # record, read now, while the CLI's home still holds its session.
                try:
                    cut = self.partial_trace(finished, request, prompt, home)
                    if cut is not None:
                        self.pin_facets(cut, request)
                        cut = with_fixture(cut, state_file, tools)
                except Exception:  # TrialBroken too: no record to keep, the timeout stands
                    cut = None
                request.partial.keep(lambda: cut)
                raise
            trace = self.trace(finished, request, prompt, home)
            trace = with_fixture(trace, state_file, tools)
        return self.pin_facets(trace, request)

    def pin_facets(self, trace: Trace, request: TrialRequest) -> Trace:
        """The trace with the case's pins as facets (``argv`` put them in)."""
        # The case's pins went into the command line (``argv``): honoured, so the effort
        # is a facet like the model the stream reported.
        trace.facets.update(case_facets(request.case, self.name))
        effort = request.case.effort_for(self.name)
        if effort:
            trace.facets["effort"] = effort
        return trace

    async def close(self) -> None:
        """Nothing to release: each trial's process and home are gone when it ends."""
        return None

    def identity(self) -> dict[str, str]:
        """The URI (flags included), the CLI's version, its model and the files its flags name.

        A folder flag's folder (a plugin) counts by the files in it.
        """
        identity = {"uri": self.uri, "version": self.version,
                    "model": self.facets.get("model", "the CLI's default")}
        named = [(before, Path(arg)) for before, arg in zip(self.args, self.args[1:], strict=False)
                 if before in self.path_flags]
        identity.update(file_entries(path for _, path in named))
        for before, path in named:
            if before in self.folder_flags and path.is_dir():
                identity.update(folder_entries(path))
        return identity

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())


class HostTalk:
    """One trial's conversation with a host CLI (SPEC §16), and what it recorded.

    The first user message runs the CLI as a single trial does, its prompt on
    stdin; the session its stream names (claude's ``session_id``, codex's
    ``thread_id``) is kept, and each later message runs the CLI again in the
    same throwaway home and working folder, resuming that session
    (``resume_argv``). The host reads the conversation so far from its own
    session record — nothing assay retells.

    Each run's events carry its turn and are timed from the trial's start; a
    ``user`` event opens each turn and a ``reply`` event (the run's output)
    closes it; the trial's output is the last reply. A run that ends
    otherwise than with an answer (a refusal, a limit, an error) ends the
    conversation with its status. A run that gives no trace breaks the trial
    when it is the first; after a reply it ends the conversation with status
    ``error``, the turns so far kept, so that a breach made in an earlier
    turn still fails the case. Stopped at its timeout, the trial keeps every
    turn so far and what the current run printed.
    """

    def __init__(self, host: CliHost, request: TrialRequest, talk: Talk, *, home: Path,
                 work: Path, env: Mapping[str, str], served: Sequence[str],
                 state: tuple[Path | None, ToolFixture | None]) -> None:
        self.host = host
        self.request = request
        self.talk = talk
        self.home = home
        self.work = work
        self.env = env
        self.state = state
        system = host.system_argv(home, talk.system) if talk.system else []
        #: The first turn's command line; a later turn's resumes its session from it.
        self.argv = [*host.argv(request, "", home, work), *served, *system]
        #: Each finished run's trace, in turn order.
        self.turns: list[Trace] = []
        self.events: list[Event] = []
        self.session: str | None = None
        self.started = time.perf_counter()

    def _t(self) -> float:
        return round(time.perf_counter() - self.started, 6)

    async def run(self) -> Trace:
        """Every turn, until the user is done or a run ends the conversation."""
        talk = self.talk
        message = await talk.next()
        while message is not None:
            if talk.turn > 1 and self.session is None:
                return self._ended("error", f"turn {talk.turn}: {self.host.name} named no "
                                            "session to resume")
            prompt = self.host.first_prompt(self.request, message) if talk.turn == 1 \
                else message
            self._add(talk.opened(), self._t())
            try:
                turn = await self._one(prompt)
            except TrialBroken as broken:
                if not self.turns:  # nothing answered yet: no record to keep
                    raise
                return self._ended("error", f"turn {talk.turn}: {broken}")
            self.turns.append(turn)
            if turn.status != "ok":  # a refusal, a limit or an error ends it in its turn
                return self._ended(turn.status, turn.error, output=turn.output,
                                   settled=turn.settled is True)
            self._add(talk.replied(turn.output), self._t())
            message = await talk.next()
        return self._ended("ok", None, output=self.turns[-1].output if self.turns else None,
                           settled=talk.settled)

    async def _one(self, prompt: str) -> Trace:
        """One run of the CLI: the first turn's command, or the session resumed."""
        host, request = self.host, self.request
        argv = self.argv if self.session is None else host.resume_argv(self.argv, self.session)
        since = host.turn_mark(self.home)
        offset = time.perf_counter() - self.started
        finished = Finished(exit_code=-1)
        try:
            await run_cli(argv, cwd=self.work, env=self.env, stdin=host.stdin(prompt),
                          into=finished)
        except OSError as exc:
            raise TrialBroken(f"cannot run {host.name}: {exc.strerror or exc}") from None
        except asyncio.CancelledError:
            self._keep_partial(finished, prompt, since, offset)
            raise
        trace = host.trace(finished, request, prompt, self.home, since=since)
        self.session = self.session or host.session_of(finished)
        self._add_run(trace.events, offset)
        return trace

    def _keep_partial(self, finished: Finished, prompt: str, since: int,
                      offset: float) -> None:
        """Stopped at the timeout: every turn so far, and what this run printed, read now,
        while the CLI's home still holds its session."""
        try:
            cut = self.host.partial_trace(finished, self.request, prompt, self.home,
                                          since=since)
            if cut is not None:
                self._add_run(cut.events, offset)
                self.turns.append(cut)
            ended = with_fixture(self._ended("timeout", None, settled=False), *self.state)
            trace: Trace | None = self.host.pin_facets(ended, self.request)
        except Exception:  # TrialBroken too: no record to keep, the timeout stands
            trace = None
        self.request.partial.keep(lambda: trace)

    def _add(self, event: Event, t: float) -> None:
        event.t = t
        self.events.append(event)

    def _add_run(self, events: Sequence[Event], offset: float) -> None:
        """A run's events, timed from the trial's start, in the current turn."""
        since = len(self.events)
        for event in events:
            if event.t is not None:
                event.t = round(event.t + offset, 6)
            self.events.append(event)
        self.talk.stamp(self.events, since)

    def _ended(self, status: Status, error: str | None, *, output: Any = None,
               settled: bool = False) -> Trace:
        """The conversation's trace: its turns' facts together, ended as said."""
        turns = self.turns
        last = turns[-1] if turns else None
        return Trace(
            output=output, status=status, error=error, events=list(self.events),
            usage=merged_usage(turns, cumulative=self.host.cumulative_usage),
            steps=merged_steps(turns),
            settled=settled, exit_code=last.exit_code if last is not None else None,
            duration_s=time.perf_counter() - self.started,
            stdout="\n".join(f"[turn {n}] {t.stdout}" for n, t in enumerate(turns, 1)
                             if t.stdout),
            facets=self.host.merged_facets([t.facets for t in turns]) if turns
            else dict(self.host.facets),
            evidence=weakest_evidence(turns, self.host.evidence))


def with_fixture(trace: Trace, state_file: Path | None, tools: ToolFixture | None) -> Trace:
    """The trace with the fixture server's calls under their fixture names and its final
    state (SPEC §14); a state the handlers left unstorable breaks the trial."""
    if tools is None or state_file is None:
        return trace
    names = {tool.name for tool in tools.tools}
    for event in trace.events:
        plain = fixture_names(event.name)
        if plain != event.name and plain in names:
            event.name = plain
    written, state, broken = read_final_state(state_file)
    if broken is not None:
        raise TrialBroken(broken)
    if not tools.has_state:
        return trace
    if not written:  # the server never started, or was never asked: the state as given
        state = tools.state
    return trace.model_copy(update={"state": state,
                                    "evidence": {**trace.evidence, "state": Evidence.OBSERVED}})

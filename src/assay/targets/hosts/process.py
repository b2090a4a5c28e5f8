"""One CLI run in a throwaway home: its environment, its process group, its lines.

Credentials are not ours (principle 10). The child gets the parent's
environment minus every provider key variable, which is dropped by *name*:
assay never reads, stores or prints the value. The CLI signs itself in from
its own credentials file, which the host adapter copies byte for byte into
the throwaway home without opening it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Provider key variables by suffix (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
#: ``ANTHROPIC_AUTH_TOKEN``, ``AZURE_OPENAI_API_KEY`` …) and by name.
KEY_SUFFIXES = ("_API_KEY", "_AUTH_TOKEN", "_ADMIN_KEY")
KEY_NAMES = frozenset({"AWS_BEARER_TOKEN_BEDROCK"})

#: Variables that point a CLI at the user's own configuration; the throwaway
#: home replaces them, so that the user's settings, plugins and history are
#: neither trial state nor changed by a trial.
HOME_POINTERS = frozenset({
    "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
    "XDG_STATE_HOME", "XDG_CACHE_HOME",
})

#: assay's own secrets and private places: a store's address (with its password), the
#: ledger's signing key, the workbench's token, the folder of hidden cases. An agent
#: under test (or a command grading it) has no business with any of them, and the
#: hidden cases must not be within its reach (SPEC §5).
ASSAY_PRIVATE = frozenset({"ASSAY_DB", "ASSAY_LEDGER_KEY", "ASSAY_SERVE_TOKEN",
                           "ASSAY_HIDDEN_DIR"})

#: Kept of a CLI's stderr (its tail), for the reason of a broken trial.
STDERR_TAIL = 16_384


def is_provider_key(name: str) -> bool:
    """True for an environment variable that holds a provider credential."""
    upper = name.upper()
    return upper in KEY_NAMES or upper.endswith(KEY_SUFFIXES)


def child_environment(parent: Mapping[str, str], home: Path,
                      extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent's environment without provider keys, config pointers or assay's own
    secrets (``ASSAY_PRIVATE``), HOME set."""
    env = {name: value for name, value in parent.items()
           if not is_provider_key(name) and name.upper() not in HOME_POINTERS
           and name.upper() not in ASSAY_PRIVATE}
    env["HOME"] = str(home)
    env.update(extra or {})
    return env


def copy_private(source: Path, destination: Path) -> bool:
    """Copy a credentials file byte for byte (never parsed), readable by its owner only."""
    if not source.is_file():
        return False
    destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out)
    return True


@contextlib.contextmanager
def throwaway_home(prefix: str) -> Iterator[Path]:
    """A fresh, private folder to serve as HOME for one run; removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def stage_workdir(home: Path, fixture: Path | None) -> Path:
    """The CLI's working folder: a copy of the case's fixture folder (or file), else empty.

    A copy, so that an agent that edits files changes neither the suite nor
    another trial running beside it.
    """
    work = home / "work"
    if fixture is not None and fixture.is_dir():
        shutil.copytree(fixture, work, symlinks=True)
        return work
    work.mkdir()
    if fixture is not None and fixture.is_file():
        shutil.copy2(fixture, work / fixture.name)
    return work


@dataclass
class Finished:
    """What a CLI run left: its exit code, stdout lines with arrival times, stderr's tail."""

    exit_code: int
    lines: list[tuple[float, str]] = field(default_factory=list)
    stderr: str = ""
    duration_s: float = 0.0


#: Reads one of a process's output pipes to its end (``Kept.read``, ``_lines``).
Reader = Callable[[asyncio.StreamReader], Awaitable[None]]
#: Writes a process's stdin as it goes, and closes it (a conversation, SPEC §16).
Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


async def run_cli(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                  stdin: bytes = b"", into: Finished | None = None) -> Finished:
    """Run a CLI in its own process group (``run_group``), its stdout read as lines.

    ``into`` receives the lines as they arrive, so that a caller cancelled at
    a timeout still has what the CLI printed until then.
    """
    started = time.perf_counter()
    finished = into if into is not None else Finished(exit_code=-1)
    stderr = Kept(STDERR_TAIL, head=False)
    finished.exit_code = await run_group(
        argv, cwd=cwd, env=env, stdin=stdin,
        stdout=lambda pipe: _lines(pipe, finished.lines, started), stderr=stderr.read)
    finished.stderr = stderr.text()
    finished.duration_s = time.perf_counter() - started
    return finished


async def run_group(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                    stdin: bytes | Writer, stdout: Reader, stderr: Reader) -> int:
    """Run a program in its own process group; its exit code (negative: the signal that
    ended it). On cancellation the whole group is killed, then the cancellation goes on.

    The program's children (MCP servers, shells it started) share its process
    group, so a timeout or an interrupt leaves nothing running behind it. A
    grandchild that keeps stdout open after the program exited does not hold
    the trial: reading stops shortly after the program's own exit. ``stdin``
    is written and closed (or, a ``Writer``, writes it as it goes, and closes
    it); ``stdout`` and ``stderr`` read the pipes as they
    fill, so what they keep is there for a caller cancelled half-way.
    ``OSError`` (and ``ValueError`` for an argument no process can take, one
    with a NUL): the program could not start.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=str(cwd), env=dict(env), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    feed = _feed(proc.stdin, stdin) if isinstance(stdin, bytes) else stdin(proc.stdin)
    helpers = [asyncio.ensure_future(feed),
               asyncio.ensure_future(stdout(proc.stdout)),
               asyncio.ensure_future(stderr(proc.stderr))]
    try:
        code = await _exit_of(proc)
        await asyncio.wait(helpers, timeout=2.0)
    finally:
        await _kill_group(proc)
        # With the group gone the pipes reach their end, and the transport closes.
        await asyncio.wait(helpers, timeout=2.0)
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
    return code


@dataclass
class Kept:
    """What is kept of one output stream: its first (``head``) or last ``limit`` bytes,
    and how many bytes came in all. Reading never stops early: a program blocked on
    a full pipe would hang, so what is past the limit is read and let go."""

    limit: int
    head: bool = True
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    async def read(self, pipe: asyncio.StreamReader) -> None:
        """Read ``pipe`` to its end, keeping what the limit allows."""
        while chunk := await pipe.read(65_536):
            self.total += len(chunk)
            if self.head:
                room = self.limit - len(self.data)
                if room > 0:
                    self.data.extend(chunk[:room])
            else:
                self.data.extend(chunk)
                del self.data[:-self.limit]

    @property
    def cut(self) -> bool:
        """True when more came than was kept."""
        return self.total > len(self.data)

    def text(self) -> str:
        """What was kept, as text (bytes that are not UTF-8 read as U+FFFD)."""
        return self.data.decode("utf-8", "replace")


async def _lines(pipe: asyncio.StreamReader, into: list[tuple[float, str]],
                 started: float) -> None:
    """Split stdout into lines as it arrives (no line-length limit), each with its time."""
    buffer = b""
    while chunk := await pipe.read(65_536):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        now = time.perf_counter() - started
        into.extend((now, line.decode("utf-8", "replace")) for line in complete if line.strip())
    if buffer.strip():
        into.append((time.perf_counter() - started, buffer.decode("utf-8", "replace")))


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            pipe.write(data)
            await pipe.drain()
        pipe.close()


async def _exit_of(proc: asyncio.subprocess.Process) -> int:
    """The exit code, as soon as the process has exited.

    Not ``proc.wait()``: before Python 3.12 it also waits for every pipe to
    close, so a grandchild that kept stdout open would hold the trial.
    """
    while proc.returncode is None:
        await asyncio.sleep(0.02)
    return proc.returncode


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL what is left once the leader is gone (or after
    a grace period, if the leader outlives the TERM).

    A child that ignores SIGTERM would otherwise outlive its trial: the leader
    exiting says nothing about the rest of its group.
    """
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        _signal_group(proc, sig)
        if proc.returncode is not None:
            # The leader is gone: what the TERM did not end, the KILL does.
            _signal_group(proc, signal.SIGKILL)
            return
        try:
            await asyncio.shield(asyncio.wait_for(_exit_of(proc), grace))
        except TimeoutError:
            continue
        except asyncio.CancelledError:
            # Cancelled again while cleaning up: kill outright and give up waiting.
            _signal_group(proc, signal.SIGKILL)
            raise
        _signal_group(proc, signal.SIGKILL)
        return


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z][0-9A-Za-z.-]*))?")


@dataclass(frozen=True)
class Version:
    """A CLI's version: its release triple and a prerelease tag (``beta.1``) if any."""

    release: tuple[int, int, int]
    prerelease: str = ""

    def __str__(self) -> str:
        text = ".".join(map(str, self.release))
        return f"{text}-{self.prerelease}" if self.prerelease else text


def parse_version(text: str) -> Version | None:
    """The first ``X.Y.Z`` (with a ``-prerelease`` tag if one follows) in a ``--version`` line."""
    found = VERSION.search(text)
    if not found:
        return None
    return Version((int(found[1]), int(found[2]), int(found[3])), found[4] or "")

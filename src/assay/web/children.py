"""Runs this workbench started: each one ``assay run`` in a process of its own.

A run is never run inside the server: the engine installs its own Ctrl-C
handler and forks a writer process, and a run must go on (and seal) the same
way whoever started it. So the page starts ``assay run SUITE_FILE --suite ID``
as a child process, exactly as a user would in a terminal — same loading,
the server's store (``ASSAY_DB``), its hidden folder, its working folder — and
adds one hidden option, ``--announce-fd``: the child writes ``{"run_id": …}``
on a pipe of its own as soon as its run is registered, and the page can
send the browser to that run (docs/decisions/0047-runs-from-the-page.md).

- **Its own process group** (a new session): the server's Ctrl-C does not
  reach it directly; ``stop_all`` interrupts each child once, as a user's
  Ctrl-C would, and waits for it to seal (a second Ctrl-C to the server
  interrupts them again: they stop at once, resumable). Whatever the child
  leaves behind in its group (an agent's own subprocess) is ended when it
  exits.
- **Nothing to read from it but the announcement**: no stdin, stdout thrown
  away; stderr is kept (its tail) only to say why a run did not start, and
  only its ``assay:`` and ``harness failure`` lines are ever shown — what an
  agent prints, or a traceback, is not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from .bench import Workbench

#: How much of a child's stderr is kept (its end: where the reason is).
STDERR_TAIL = 16_384
#: How long ``stop_all`` waits for interrupted children to seal before ending them.
STOP_GRACE_S = 60.0


@dataclass(frozen=True)
class StartRequest:
    """What the page asked to run: a discovered suite, and what overrides its file."""

    suite_id: str
    #: The suite's file (the child loads only it: a bad neighbour does not stop it).
    file: Path
    target: str | None = None
    trials: int | None = None


@dataclass
class Child:
    """One ``assay run`` this server started, from its start to its end."""

    request: StartRequest
    process: subprocess.Popen[bytes]
    #: The run it registered, once it said so.
    run_id: str | None = None
    #: Its exit code, once it exited.
    exit_code: int | None = None
    #: Asked to stop (Ctrl-C sent): it is sealing what finished.
    stopping: bool = False
    #: Set once the run id is known or the child exited, whichever comes first.
    settled: threading.Event = field(default_factory=threading.Event)
    #: Set once the child exited and its process group is empty.
    ended: threading.Event = field(default_factory=threading.Event)
    _stderr: bytearray = field(default_factory=bytearray)

    @property
    def state(self) -> str:
        """``starting``, ``running``, ``stopping`` or ``ended``."""
        if self.ended.is_set() or self.exit_code is not None:
            return "ended"
        if self.stopping:
            return "stopping"
        return "running" if self.run_id is not None else "starting"

    def failure(self) -> str:
        """Why the child ended without registering a run, in the words ``assay run`` printed.

        Only lines ``assay run`` writes for a user (``assay: …``, ``harness
        failure …``): they follow the CLI's rules, hidden cases withheld.
        Anything else on stderr (a traceback, an agent's own prints) is not
        shown; the exit code says the rest.
        """
        text = bytes(self._stderr).decode("utf-8", "replace")
        said = [line.strip() for line in text.splitlines()
                if line.startswith(("assay: ", "harness failure"))]
        if said:
            return "\n".join(said)
        return (f"assay run ended (exit {self.exit_code}) before registering a run; run it in "
                "a terminal to see why")


class Children:
    """The children of one workbench, by run id once each is known (``Workbench.live``)."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self._lock = threading.Lock()
        self._all: list[Child] = []
        self._by_run: dict[str, Child] = {}
        #: Set once the server stops: the live progress streams end, nothing more starts.
        self.closing = threading.Event()

    def start(self, request: StartRequest) -> Child:
        """Start ``assay run`` for ``request``; follow it on threads of its own.

        Refused (``RuntimeError``) once the server is stopping.
        """
        if self.closing.is_set():
            raise RuntimeError("the workbench is stopping: no run starts now")
        bench = self.bench
        argv = [sys.executable, "-m", "assay", "run", str(request.file),
                "--suite", request.suite_id]
        if request.target:
            argv += ["--target", request.target]
        if request.trials is not None:
            argv += ["--trials", str(request.trials)]
        if bench.hidden_dir is not None:
            argv += ["--hidden-dir", str(Path(bench.workdir, bench.hidden_dir).resolve())]
        env = {**os.environ, "ASSAY_DB": store_url(bench), "COLUMNS": "1000"}
        env.pop("ASSAY_HIDDEN_DIR", None)  # the server's own, given above when it has one
        readable, writable = os.pipe()
        try:
            argv += ["--announce-fd", str(writable)]
            process = subprocess.Popen(
                argv, cwd=bench.workdir, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(writable,),
                start_new_session=True)
        except OSError:
            os.close(readable)
            raise
        finally:
            os.close(writable)
        child = Child(request, process)
        with self._lock:
            self._all.append(child)
        assert process.stderr is not None
        threading.Thread(target=_keep_tail, args=(process.stderr, child._stderr),
                         name="assay-run-stderr", daemon=True).start()
        threading.Thread(target=self._follow, args=(child, readable),
                         name="assay-run-follow", daemon=True).start()
        return child

    def started(self, run_id: str) -> Child | None:
        """The child that runs ``run_id``, if this server started it."""
        with self._lock:
            return self._by_run.get(run_id)

    def children(self) -> list[Child]:
        """Every child started, newest first."""
        with self._lock:
            return list(reversed(self._all))

    def cancel(self, child: Child) -> None:
        """Interrupt ``child`` once, as Ctrl-C would: it stops its battery and seals the run.

        A second interrupt would make it exit at once, unsealed: never sent.
        """
        with self._lock:
            if child.stopping or child.exit_code is not None:
                return
            child.stopping = True
        with contextlib.suppress(ProcessLookupError):
            child.process.send_signal(signal.SIGINT)

    def close(self) -> None:
        """The server is stopping: end the progress streams, interrupt every child (once)."""
        self.closing.set()
        for child in self.children():
            if not child.ended.is_set():
                self.cancel(child)

    def stop_all(self, grace_s: float = STOP_GRACE_S,
                 hurry: Callable[[], bool] | None = None) -> None:
        """Interrupt every child still running and wait for each to seal (``assay serve`` exit).

        As Ctrl-C does to ``assay run``: the first interrupt stops the battery
        and seals what finished. When ``hurry()`` turns true (a second Ctrl-C
        to the server), each child is interrupted again and exits at once,
        its run left open for ``assay run --resume``; so is a child that has
        not ended after ``grace_s`` seconds, killed with its process group.
        """
        self.close()
        live = [child for child in self.children() if not child.ended.is_set()]
        deadline = time.monotonic() + grace_s
        hurried = False
        while any(not child.ended.is_set() for child in live) and time.monotonic() < deadline:
            if hurry is not None and hurry() and not hurried:
                hurried = True
                deadline = min(deadline, time.monotonic() + 5.0)
                for child in live:
                    with contextlib.suppress(ProcessLookupError):
                        child.process.send_signal(signal.SIGINT)
            time.sleep(0.05)
        for child in live:
            if not child.ended.is_set():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                child.ended.wait(5)

    def _follow(self, child: Child, readable: int) -> None:
        """Read the child's announcement, then wait for its end and empty its group."""
        with os.fdopen(readable, "rb") as pipe:
            line = pipe.readline(4096)  # the announcement, or end-of-file: it exited
        run_id = _announced(line)
        if run_id is not None:
            with self._lock:
                child.run_id = run_id
                self._by_run[run_id] = child
            child.settled.set()
        code = child.process.wait()
        child.exit_code = code
        child.settled.set()
        _sweep(child.process.pid)
        child.ended.set()


def store_url(bench: Workbench) -> str:
    """The server's store as a URL a child in another folder opens the same (``ASSAY_DB``)."""
    url = bench.open().engine.url
    database = url.database
    if url.get_backend_name() == "sqlite" and database and database != ":memory:" \
            and not Path(database).is_absolute():
        url = url.set(database=str(Path(database).resolve()))
    return url.render_as_string(hide_password=False)


def _announced(line: bytes) -> str | None:
    try:
        found = json.loads(line)
    except ValueError:
        return None
    run_id = found.get("run_id") if isinstance(found, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def _keep_tail(pipe: IO[bytes], kept: bytearray) -> None:
    """Read ``pipe`` to its end, keeping its last ``STDERR_TAIL`` bytes (never blocks the child)."""
    with pipe:
        while chunk := pipe.read1(65_536):  # type: ignore[attr-defined]
            kept.extend(chunk)
            del kept[:-STDERR_TAIL]


def _sweep(group: int) -> None:
    """End what is left in a process group once its leader exited (an agent's subprocess)."""
    for number, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        if not group_alive(group):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, number)
        deadline = time.monotonic() + grace
        while group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.05)


def group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs (a zombie, waiting for its reaper, does not)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp …: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
            return True
    return False

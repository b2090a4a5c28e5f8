"""``python -m assay`` for tests, forked from a process that has imported assay already.

Over a thousand commands of the test suite run the real CLI in a process of
its own. Most of such a process's CPU went on imports (about 0.4 s of its
0.55 s on this 2-core machine: SQLAlchemy, pydantic's models, Rich, click),
and the suite is bound by CPU. So each test process keeps one *zygote*: a
process started from this file, which imports assay and those libraries once
and then forks one process per command. That process becomes what
``python -m assay ARGS`` would have been:

- ``sys.argv``, the whole environment (``os.environ``, so its own
  subprocesses get it too), the working folder, and ``sys.path`` as the
  interpreter builds it for ``-m`` (the folder, then ``$PYTHONPATH``, then
  the standard library and site-packages);
- stdin, stdout and stderr the caller's files (fds passed over a Unix
  socket), with Python's own stream objects over them;
- ``assay.__main__`` run by ``runpy`` as ``-m`` runs it, and the interpreter's
  own exit: its exit code, a traceback for an uncaught exception, atexit
  handlers, threads joined, streams flushed.

A command gets fresh modules of its own only for what assay imports after
the fork; what the zygote imported was imported before any command's
environment existed, which is why nothing in ``src/assay`` reads the
environment at import time (tests/test_layering.py does not check this;
the suite would). When no zygote can be started, the command runs as a plain
subprocess, exactly as before.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

#: Imported by the zygote before it forks: what most commands import.
PRELOAD = (
    "assay.cli", "assay.store.database", "assay.reports.progress", "assay.engine.runs",
    "assay.engine.battery", "assay.suites", "assay.judging.panel", "assay.targets.python",
    "assay.store.runs.recorder_process", "assay.commands.proxy", "assay.reports.json_report",
    "sqlalchemy.dialects.sqlite", "rich.console", "rich.table", "yaml", "jsonschema",
)


# --- the zygote's side ------------------------------------------------------------------


def _serve(listener: socket.socket, parent: int) -> dict[str, object]:
    """Accept commands until the test process is gone; returns only in a forked command."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its waiters are reaped by themselves
    listener.settimeout(1.0)
    while True:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:
                os._exit(0)
            continue
        connection.settimeout(None)
        try:
            message, fds, _, _ = socket.recv_fds(connection, 1 << 22, 3)
            request = json.loads(message)
        except (OSError, ValueError):
            connection.close()  # a caller that went away: the zygote carries on
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() != 0:  # the zygote: on to the next command
            connection.close()
            for fd in fds:
                os.close(fd)
            continue
        # The waiter: starts the command, tells its pid, then how it ended.
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        command = os.fork()
        if command == 0:
            connection.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            return request
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            connection.sendall(f"{command}\n".encode())
            _, status = os.waitpid(command, 0)
            code = os.waitstatus_to_exitcode(status)
            connection.sendall(f"{code}\n".encode())
        os._exit(0)


def _become(request: dict[str, object]) -> None:
    """Make this process what ``python -m assay ARGS`` would be, then run it."""
    import runpy

    env = dict(request["env"])  # type: ignore[call-overload]
    cwd = str(request["cwd"])
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [cwd, *extra, *_BASE_PATH]
    sys.argv[:] = ["-m", *request["args"]]  # type: ignore[misc]
    runpy.run_module("assay", run_name="__main__", alter_sys=True)


_BASE_PATH: list[str] = []


def _zygote(path: str) -> None:
    own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    here = str(Path(__file__).resolve().parent)
    _BASE_PATH[:] = [p for p in sys.path[1:] if p not in own and p != here]
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)
    with contextlib.suppress(Exception):  # every command's module, imported lazily by the CLI
        from assay.cli import main

        main.load_all()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    request = _serve(listener, os.getppid())
    _become(request)


# --- the test's side ------------------------------------------------------------------


class _Zygote:
    """This test process's zygote, started at its first command."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[str] | None = None
        self.path: str | None = None
        self.failed = False

    def socket_path(self) -> str | None:
        with self.lock:
            if self.process is not None and self.process.poll() is None:
                return self.path
            if self.failed:
                return None
            folder = tempfile.mkdtemp(prefix="assay-zygote-")
            self.path = os.path.join(folder, "s")
            env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
            self.process = subprocess.Popen(
                [sys.executable, __file__, self.path], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                start_new_session=True)
            assert self.process.stdout is not None
            if self.process.stdout.readline().strip() != "ready":
                self.failed = True
                return None
            return self.path


_ZYGOTE = _Zygote()


def _starts_differently(env: dict[str, str]) -> bool:
    """Whether the interpreter would start otherwise than the zygote did under ``env``: a
    ``PYTHON*`` variable of its own (PYTHONPATH aside: a fork sets ``sys.path``), or a
    ``sitecustomize`` on its PYTHONPATH, which only a fresh interpreter runs."""
    def startup(given: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in given.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}

    if startup(env) != startup(dict(os.environ)):
        return True
    return any((Path(entry) / name).exists()
               for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry
               for name in ("sitecustomize.py", "usercustomize.py"))


def run_assay(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float,
              stdin_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, assay, *args], capture_output, text)``, forked."""
    path = None if _starts_differently(env) else _ZYGOTE.socket_path()
    if path is None:
        return subprocess.run([sys.executable, "-m", "assay", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout,
                              input=stdin_text,
                              stdin=None if stdin_text is not None else subprocess.DEVNULL)
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(tempfile.TemporaryFile())
        if stdin_text is not None:
            source.write(stdin_text.encode())
            source.seek(0)
        else:
            source = stack.enter_context(open(os.devnull, "rb"))
        out = stack.enter_context(tempfile.TemporaryFile())
        err = stack.enter_context(tempfile.TemporaryFile())
        connection = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        connection.connect(path)
        connection.settimeout(timeout)
        request = {"args": list(args), "env": env, "cwd": str(cwd)}
        socket.send_fds(connection, [json.dumps(request).encode()],
                        [source.fileno(), out.fileno(), err.fileno()])
        reader = connection.makefile("r")
        pid = None
        try:
            pid = int(reader.readline())
            line = reader.readline()
        except TimeoutError:
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired([sys.executable, "-m", "assay", *args],
                                            timeout) from None
        code = int(line)
        texts = []
        for file in (out, err):
            file.seek(0)
            texts.append(io.TextIOWrapper(file, newline=None).read())
        return subprocess.CompletedProcess([sys.executable, "-m", "assay", *args], code,
                                           texts[0], texts[1])


if __name__ == "__main__":
    _zygote(sys.argv[1])

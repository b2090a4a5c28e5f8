"""Whole-process measurement shared by bench/throughput.py and bench/peers.py.

A figure here is always the wall time of a fresh process, from fork to exit:
interpreter start, imports, the run itself, writing results and shutting down.
That is what a user waits for when they type the command, and it is measured
the same way for assay and for the peer frameworks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ProcessRun:
    """One finished child process: its exit code, wall time and peak RSS."""

    argv: list[str]
    returncode: int
    wall_s: float
    peak_rss_mib: float
    stdout: str
    stderr: str
    extra: dict[str, object] = field(default_factory=dict)

    def tail(self, lines: int = 20) -> str:
        text = (self.stdout + "\n" + self.stderr).strip().splitlines()
        return "\n".join(text[-lines:])


#: Runs the measured command for ``run_process``: forks it from this small process
#: (so its peak RSS is its own, see there), waits for it with wait4() and writes
#: "peak_rss_kib cpu_s wall_s wait_status" to the file descriptor in argv[1]. A
#: SIGTERM or SIGINT sent to the launcher is passed on to the command (a server such
#: as ``assay worker`` stopped gracefully), so the launcher still reports its figures.
_LAUNCHER = """
import os, signal, sys, time
report, argv = int(sys.argv[1]), sys.argv[2:]
pid = 0
def forward(signum, frame):
    if pid:
        os.kill(pid, signum)
signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(report)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        os.write(2, ("[bench] cannot run %s: %s\\n" % (argv[0], error)).encode())
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
os.write(report, ("%d %r %r %d" % (usage.ru_maxrss, usage.ru_utime + usage.ru_stime, wall,
                                   status)).encode())
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


def run_process(
    argv: list[str],
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 3600.0,
    on_start: Callable[[int], None] | None = None,
) -> ProcessRun:
    """Run argv to completion; return wall time and the child's own peak RSS.

    Peak RSS comes from wait4() on the command's process (ru_maxrss, KiB on
    Linux), so it is not polluted by other children the caller ran before, as
    RUSAGE_CHILDREN's running maximum would be; Linux folds the maxima of the
    command's reaped descendants into it. The command is forked from a small
    launcher, not from this process: on exec, Linux also folds the peak RSS
    of the process that forked into the child's (a bench that holds 400 MiB
    would otherwise report 400 MiB for ``python -c pass``). The launcher
    times the command from its fork to its exit and reports the figures;
    output goes to temporary files; a timer kills the launcher and the
    command (their own process group) if they outlive timeout_s.

    on_start, if given, is called with the launcher's pid once it runs: a
    caller on another thread may send it SIGTERM or SIGINT, which the
    launcher passes on to the command (to stop a server and still measure it).
    """
    import sys

    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _LAUNCHER, str(write_end), *argv],
                cwd=str(cwd) if cwd is not None else None,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=(write_end,),
                start_new_session=True,
            )
        finally:
            os.close(write_end)
        if on_start is not None:
            on_start(proc.pid)
        killer = threading.Timer(timeout_s, lambda: _kill_group(proc.pid))
        killer.daemon = True
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        with os.fdopen(read_end, "rb") as report:
            figures = report.read().split()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if len(figures) == 4:  # the launcher saw the command end
        peak_kib, cpu_s, wall = int(figures[0]), float(figures[1]), float(figures[2])
        returncode = os.waitstatus_to_exitcode(int(figures[3]))
    else:  # the launcher itself was killed: its own figures, the best there are
        peak_kib, cpu_s, wall = usage.ru_maxrss, usage.ru_utime + usage.ru_stime, float("nan")
        returncode = os.waitstatus_to_exitcode(status)
    if returncode == -signal.SIGKILL:
        stderr += f"\n[bench] killed (time limit {timeout_s:.0f} s?)"
    return ProcessRun(
        argv=argv,
        returncode=returncode,
        wall_s=wall,
        peak_rss_mib=peak_kib / 1024,
        stdout=stdout,
        stderr=stderr,
        # CPU (user + system) of the command and its reaped descendants, from the same wait4.
        extra={"cpu_s": cpu_s},
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass

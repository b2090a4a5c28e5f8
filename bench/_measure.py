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
import time
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


def run_process(
    argv: list[str],
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 3600.0,
) -> ProcessRun:
    """Run argv to completion; return wall time and the child's own peak RSS.

    Peak RSS comes from wait4() on this very child (ru_maxrss, KiB on Linux),
    so it is not polluted by other children the caller ran before, as
    RUSAGE_CHILDREN's running maximum would be. Linux folds the maxima of the
    child's reaped descendants into it. Output goes to temporary files (not
    pipes) so that nothing but wait4 reaps the child; a timer kills a child
    that outlives timeout_s.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd) if cwd is not None else None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        killer = threading.Timer(timeout_s, proc.kill)
        killer.daemon = True
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode == -signal.SIGKILL:
        stderr += f"\n[bench] killed (time limit {timeout_s:.0f} s?)"
    return ProcessRun(
        argv=argv,
        returncode=proc.returncode,
        wall_s=wall,
        peak_rss_mib=usage.ru_maxrss / 1024,
        stdout=stdout,
        stderr=stderr,
        # CPU (user + system) of the child and its reaped descendants, from the same wait4.
        extra={"cpu_s": usage.ru_utime + usage.ru_stime},
    )

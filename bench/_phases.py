"""Run the assay command line in this process with a timer around each phase of `assay run`.

    python bench/_phases.py OUT.json run DIR --json F ...

Used by bench/user_run.py for its breakdown: an extra, untimed run whose
phases (loading the suites, registering the run, the battery, sealing,
printing and writing the reports) are timed by wrapping the functions that
do them. A wrapper only reads the clock; what runs is unchanged. A phase
whose function is not found (the code moved) is reported as missing, not
guessed.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import inspect
import json
import sys
import time
from collections.abc import Callable
from typing import Any

STARTED = time.perf_counter()
before = set(sys.modules)

#: phase name -> (module, attribute path) of the function doing it.
PHASES: dict[str, tuple[str, str]] = {
    "suite load": ("assay.suites", "discover"),
    "open the store (writer)": ("assay.store.runs.recorder_process", "start_writer"),
    "wait for the store": ("assay.store.runs.recorder_process", "ProcessSink.ready"),
    "register": ("assay.engine.record", "RunRecorder.register"),
    "battery": ("assay.engine.battery", "Battery.run"),
    "seal": ("assay.engine.record", "RunRecorder.seal"),
    "redact": ("assay.grading", "redact"),
    "terminal report": ("assay.reports.terminal", "print_report"),
    "JSON report": ("assay.reports", "write_json"),
    "stop the writer": ("assay.store.runs.recorder_process", "ProcessSink.stop"),
}

spent: dict[str, float] = {}
#: The same phases in this process's CPU time (all its threads): less moved by other load.
cpu: dict[str, float] = {}
missing: list[str] = []
#: The cyclic collector's passes over the whole run: count and CPU seconds.
collector = {"passes": 0, "cpu": 0.0, "started": 0.0}


def _collecting(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        collector["started"] = time.process_time()
    else:
        collector["passes"] += 1
        collector["cpu"] += time.process_time() - collector["started"]


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            t, c = time.perf_counter(), time.process_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
                cpu[name] = cpu.get(name, 0.0) + time.process_time() - c
        return awrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - c
    return wrapper


def _install() -> None:
    for name, (module_name, path) in PHASES.items():
        try:
            owner: Any = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for part in parents:
                owner = getattr(owner, part)
            setattr(owner, attr, _timed(name, getattr(owner, attr)))
        except (ImportError, AttributeError):
            missing.append(name)


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    t = time.perf_counter()
    from assay.cli import main as cli

    imported = time.perf_counter() - t
    t = time.perf_counter()
    _install()
    installing = time.perf_counter() - t
    gc.callbacks.append(_collecting)

    def report() -> None:
        with open(out, "w") as fh:
            json.dump({"phases": spent, "cpu": cpu, "cpu in script": time.process_time(),
                       "collector passes": collector["passes"],
                       # In import order: what a user's run imports (the bench's own excluded).
                       "modules": [m for m in sys.modules if m not in before],
                       "collector cpu": collector["cpu"],
                       "missing": missing, "import assay.cli": imported,
                       "bench instrumentation": installing,
                       "in script": time.perf_counter() - STARTED}, fh)

    atexit.register(report)
    cli.main(argv, prog_name="assay")


if __name__ == "__main__":
    main()

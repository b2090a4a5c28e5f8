"""`assay run`: load suites, run each against its targets, report, store and seal."""

from __future__ import annotations

import gc
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_HARNESS, EXIT_NOT_PASSED, EXIT_PASSED, fail, load_suites

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from rich.console import Console

    from ..engine import Resume, RunStart
    from ..model import Report
    from ..store.database import Store
    from ..store.recorder import Sink

    class _Sink(Sink, Protocol):
        """A sink the command opens before loading suites and stops at the end."""

        def ready(self) -> None: ...

        def stop(self) -> None: ...
    from ..suites import LoadedSuite


@dataclass(frozen=True)
class RunOptions:
    """What ``assay run`` was asked to do."""

    paths: tuple[Path, ...]
    suite_ids: tuple[str, ...]
    targets: tuple[str, ...]
    trials: int | None
    concurrency: int
    timeout_s: float | None
    seed: int | None
    hidden_dir: Path | None
    json_path: Path | None
    junit_path: Path | None
    markdown_path: Path | None
    base_url: str | None = None
    db: str | None = None
    no_store: bool = False
    resume: str | None = None


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--suite", "suite_ids", multiple=True, metavar="ID", help="Run only this suite.")
@click.option("--target", "targets", multiple=True, metavar="URI",
              help="The agent (SPEC §4); several give one run each, side by side.")
@click.option("--trials", type=click.IntRange(min=1), help="Trials per case (overrides suites).")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="Trials running at once.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Seconds per trial (overrides suites).")
@click.option("--seed", type=int, help="Seed for anything random (recorded in the report).")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR", help="Private hidden cases: DIR/namespace/name@N/.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the JSON report.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write JUnit XML.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown summary.")
@click.option("--base-url", metavar="URL",
              help="The OpenAI-compatible server of openai: targets, e.g. "
                   "http://127.0.0.1:11434/v1 (default: $ASSAY_OPENAI_BASE_URL).")
@DB_OPTION
@click.option("--no-store", is_flag=True,
              help="Do not record or seal this run (a throwaway run: no `assay show`, no receipt).")
@click.option("--resume", metavar="RUN",
              help="Finish a run that stopped part-way (crash, kill): run only its missing "
                   "trials, with the suite and target it registered.")
def run(**kwargs: Any) -> None:
    """Run suites against targets, record and seal each run; exit 0 only if every run passed."""
    options = RunOptions(**kwargs)
    try:
        code = _run(options)
    except AssayError as error:
        fail(error)
        return
    _exit(code)


def _exit(code: int) -> None:
    """Exit; if an agent thread hangs (a timed-out sync agent), do not wait for it."""
    sys.stdout.flush()
    sys.stderr.flush()
    stuck = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if stuck:
        os._exit(code)
    sys.exit(code)


def _run(options: RunOptions) -> int:
    from rich.console import Console

    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    out = Console(file=sys.stdout, highlight=False)
    err = Console(file=sys.stderr, highlight=False)
    # A battery allocates many small, long-lived objects (cases, traces,
    # verdicts) and frees few: the default GC thresholds rescan them all
    # again and again. Collect less often, and never rescan the loaded suites.
    gc.set_threshold(50_000, 20, 100)
    if options.resume:
        return _resume(options, out, err)
    if options.no_store:
        return _batteries(_plans(options), options, out, err, None)
    sink = _open_sink(options.db)
    try:
        plans = _plans(options)  # parsed while the writer opens the store
        # Before any trial runs: a run that cannot be recorded should not start.
        sink.ready()
        return _batteries(plans, options, out, err, _Record(sink))
    finally:
        sink.stop()


def _plans(options: RunOptions) -> list[tuple[LoadedSuite, str]]:
    loaded = load_suites(options.paths, options.hidden_dir, options.suite_ids)
    gc.freeze()
    return [(item, uri) for item in loaded for uri in _targets_for(item, options.targets)]


def _open_sink(db: str | None) -> _Sink:
    """The writer process where the platform can fork; else the store, opened here."""
    from ..store.writer import fork_available, start_writer
    from ..store.writing import LocalSink

    if fork_available():
        return start_writer(db)
    return LocalSink(*_open_record(db), owned=True)


def _targets_for(item: LoadedSuite, given: tuple[str, ...]) -> list[str]:
    from ..errors import UsageError

    if given:
        return list(given)
    if item.suite.target:
        return [item.suite.target]
    raise UsageError(f"{item.path}: suite {item.suite.id} names no target; give --target URI")


@dataclass(frozen=True)
class _Record:
    """Where runs are recorded, and a run to resume."""

    sink: Sink
    resume: Resume | None = None


def _open_record(db: str | None) -> tuple[Store, Ed25519PrivateKey]:
    from ..store.database import open_store
    from ..store.keys import signing_key

    key = signing_key(db)
    return open_store(db), key


def _resume(options: RunOptions, out: Console, err: Console) -> int:
    """``assay run --resume RUN``: the registered suite and target, only the missing trials."""
    from ..engine import Resume
    from ..errors import UsageError

    if options.no_store:
        raise UsageError("--resume records into the store: it cannot go with --no-store")
    from ..store.writing import LocalSink

    run_id = str(options.resume)
    store, key = _open_record(options.db)
    try:
        stored = store.open_run(run_id)
        if stored.status != "open":
            raise UsageError(f"run {run_id} is sealed: there is nothing to resume")
        if options.targets and list(options.targets) != [stored.target_uri]:
            raise UsageError(f"run {run_id} registered the target {stored.target_uri}; "
                             "a resume runs that target only")
        if options.trials or options.seed is not None:
            raise UsageError("--trials and --seed were fixed when the run was registered; "
                             "a resume takes them from the store")
        loaded = load_suites(options.paths, options.hidden_dir, (stored.suite_id,))
        item = loaded[0]
        if item.digest != stored.suite_digest or item.hidden_digest != stored.hidden_set:
            which = "suite" if item.digest != stored.suite_digest else "hidden set"
            raise UsageError(f"run {run_id}: the {which} of {stored.suite_id} changed since the "
                             "run was registered; a resumed run must run what it registered")
        done = store.load_trials(run_id)
        resume = Resume(run_id=run_id, seed=stored.seed or 0, started_at=stored.started_at,
                        done=done)
        settings = dict(stored.options)
        options = _replace(options, trials=settings.get("trials"),
                           timeout_s=options.timeout_s or settings.get("timeout_s"))
        err.print(f"resuming run {run_id}: {len(done)} trial(s) recorded", highlight=False)
        return _batteries([(item, stored.target_uri)], options, out, err,
                          _Record(LocalSink(store, key), resume), stored.target_digest)
    finally:
        store.close()


def _replace(options: RunOptions, **changes: Any) -> RunOptions:
    import dataclasses

    return dataclasses.replace(options, **changes)


def _batteries(plans: list[tuple[LoadedSuite, str]], options: RunOptions, out: Console,
               err: Console, record: _Record | None, target_digest: str | None = None) -> int:
    import asyncio

    from ..errors import HarnessFailure
    from ..grading import redact
    from ..reports.emit import ReportFiles, emit
    from ..reports.safe import shown

    reports: list[Report] = []
    harness_failed = False
    interrupted = False
    for item, uri in plans:
        try:
            outcome: list[tuple[Report, bool]] = []
            asyncio.run(_battery(item, uri, options, err, outcome, record, target_digest))
            full, interrupted = outcome[0]
        except HarnessFailure as failure:
            # The failure's text is not ours (a module's exception, a server's reply).
            err.print(shown("harness failure", "bold magenta")
                      .append(f" ({item.suite.id}): ").append_text(shown(failure)))
            harness_failed = True
            continue
        reports.append(redact(full))
        if interrupted:
            err.print("[yellow]interrupted: the trials that finished are reported[/]")
            break
    # Files first, then the terminal, each reporter on its own (reports/emit.py);
    # a report that could not be written is the harness's failure (exit 3).
    files = ReportFiles(options.json_path, options.junit_path, options.markdown_path)
    if reports and not emit(reports, files, out, err):
        harness_failed = True
    if harness_failed:
        return EXIT_HARNESS
    return EXIT_PASSED if all(r.scores.passed for r in reports) else EXIT_NOT_PASSED


async def _battery(item: LoadedSuite, uri: str, options: RunOptions, err: Console,
                   outcome: list[tuple[Report, bool]], record: _Record | None = None,
                   target_digest: str | None = None) -> None:
    # The result goes out through ``outcome``, not as the coroutine's return
    # value: on Python 3.11 asyncio.run formats its main task's repr (result
    # included) when it checks the SIGINT handler, which costs seconds for a
    # large report.
    import asyncio
    import contextlib
    import signal

    from ..engine import Battery, BatteryOptions
    from ..errors import UsageError
    from ..reports.progress import BatteryProgress
    from ..targets import TargetOptions, make_target

    # Relative names resolve beside the suite file first, then in the working folder.
    target_options = TargetOptions(base_dir=item.path.parent, concurrency=options.concurrency,
                                   base_url=options.base_url)
    target = make_target(uri, target_options)
    if target_digest is not None and target.digest() != target_digest:
        raise UsageError(f"the target {uri} changed since the run was registered; "
                         "a resumed run must run what it registered")
    battery_options = BatteryOptions(concurrency=options.concurrency, trials=options.trials,
                                     timeout_s=options.timeout_s, seed=options.seed)
    battery = Battery(item, target, battery_options,
                      resume=record.resume if record is not None else None)
    recorder = None
    if record is not None:
        from ..store.recorder import RunRecorder

        recorder = writer = RunRecorder(record.sink)
        if record.resume is not None:
            writer.reopen(record.resume.run_id)
        else:
            per_case = options.trials or item.suite.trials
            settings = {"trials": options.trials, "timeout_s": options.timeout_s}

            def register(start: RunStart) -> None:
                # Pre-registration: the run and its ledger entry, before any trial runs.
                writer.register(start, item, target, per_case, settings)

            battery.on_start = register
        battery.on_result = writer.record
    with BatteryProgress(err, f"{item.suite.id}", len(battery.plan())) as progress:
        battery.on_trial = progress.trial_done
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            if battery.interrupted:
                os._exit(130)  # a second Ctrl-C: stop now
            battery.interrupt()

        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            report = await battery.run()
        except BaseException:
            if recorder is not None:
                # Keep what finished before the harness failed: a resume needs it.
                with contextlib.suppress(Exception):
                    recorder.close()
            raise
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    if recorder is not None:
        # Sealed only when the battery ended (an interrupted run with what finished);
        # a harness failure leaves the run open, to be resumed.
        report = recorder.seal(report)
    outcome.append((report, battery.interrupted))

"""`assay run`: parse, hand the runs to the engine (``engine.runs``), report, pick the exit code."""

from __future__ import annotations

import gc
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..engine.windows import SIZES
from ..errors import AssayError, UsageError
from ..review.queue import DEFAULT_POLICY, POLICIES
from .common import (
    DB_OPTION,
    EXIT_HARNESS,
    EXIT_NOT_PASSED,
    EXIT_PASSED,
    fail,
    load_suites,
    outlive,
)

if TYPE_CHECKING:

    from rich.console import Console

    from ..engine.runs import RunResult, RunSettings
    from ..engine.windows import Window
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
    upstream_openai: str | None = None
    upstream_anthropic: str | None = None
    upstream_gemini: str | None = None
    otel: bool = False
    db: str | None = None
    no_store: bool = False
    resume: str | None = None
    window: str | None = None
    window_at: str | None = None
    judge: str | None = None
    judge_base_url: str | None = None
    judge_cache: bool = True
    user_model: str | None = None
    agent_cache: bool = False
    adaptive: bool = False
    max_trials: int | None = None
    keep_workspaces: Path | None = None
    review: str = DEFAULT_POLICY
    announce_fd: int | None = None
    executor: str = "local"
    detach: bool = False
    chunk: int | None = None
    target_limit: int | None = None
    case_patterns: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--suite", "suite_ids", multiple=True, metavar="ID",
              help="Run only the suite with this id (namespace/name@major); repeat for several.")
@click.option("--case", "case_patterns", multiple=True, metavar="PATTERN",
              help="Run only the public cases whose id matches this glob (refund-*); repeat for "
                   "several. A part of a suite is not recorded and runs no hidden case; its "
                   "report carries the flag part-of-suite.")
@click.option("--tag", "tags", multiple=True, metavar="TAG",
              help="Run only the public cases with this tag (any of them, if repeated); with "
                   "--case, a case needs both. Not recorded, as with --case.")
@click.option("--target", "targets", multiple=True, metavar="URI",
              help="Run against this agent instead of the suite's target: python:MODULE:FUNCTION, "
                   "exec:COMMAND ARGS, mcp+stdio:COMMAND, mcp+http://HOST:PORT/PATH, "
                   "openai:MODEL, claude, codex, http(s)://URL, scripted:FILE.jsonl or "
                   "otel:FILE. Repeat it to run each agent as its own run, shown side by side.")
@click.option("--trials", type=click.IntRange(min=1),
              help="Run each case N times (instead of the suite's or the case's trials).")
@click.option("--adaptive", is_flag=True,
              help="Give each case with a quality check (judge, rubric, similar) more trials, "
                   "one at a time, while a check's 95% interval straddles its threshold, and "
                   "stop as soon as none does: from the case's trials (--trials N, at least 3) "
                   "up to --max-trials. Cases with binary checks only run their trials as "
                   "usual.")
@click.option("--max-trials", type=click.IntRange(min=1), metavar="N",
              help="With --adaptive: the most trials a case runs (default: 30). A case that "
                   "still straddles there is reported so.")
@click.option("--keep-workspaces", type=click.Path(path_type=Path, file_okay=False),
              metavar="DIR",
              help="Keep each public trial's final workspace (SPEC §14) under DIR/RUN/CASE/TRIAL "
                   "for a person to open, instead of removing it. A hidden case's never is.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="Run at most N trials at once.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Stop a trial after this many seconds (instead of the suite's or the case's "
                   "timeout_s).")
@click.option("--seed", type=int,
              help="Seed for anything assay draws at random, recorded with the run (default: "
                   "a fresh seed, recorded too). Run ids stay unique whatever the seed.")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR",
              help="A private folder of hidden cases, DIR/namespace/name@N/, that replaces each "
                   "suite's sample hidden cases (default: $ASSAY_HIDDEN_DIR). A suite with no "
                   "folder there keeps its samples, and assay says so.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the JSON report to FILE: one line per run, each line that run's "
                   "report (schema assay.report/1).")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a JUnit XML report to FILE (a testcase per case), for CI.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown summary to FILE, for a CI page.")
@click.option("--base-url", metavar="URL",
              help="The OpenAI-compatible server of openai: targets, e.g. "
                   "http://127.0.0.1:11434/v1 (default: $ASSAY_OPENAI_BASE_URL).")
@click.option("--upstream-openai", metavar="URL",
              help="Where an exec: agent's OpenAI calls go, through assay's recording proxy "
                   "(default: the OPENAI_BASE_URL it had, else https://api.openai.com/v1).")
@click.option("--upstream-anthropic", metavar="URL",
              help="Where an exec: agent's Anthropic calls go (default: ANTHROPIC_BASE_URL, "
                   "else https://api.anthropic.com).")
@click.option("--upstream-gemini", metavar="URL",
              help="Where an exec: agent's Gemini calls go (default: GOOGLE_GEMINI_BASE_URL, "
                   "else https://generativelanguage.googleapis.com).")
@click.option("--otel/--no-otel", default=False,
              help="Collect the OpenTelemetry spans a python: agent's framework emits in "
                   "process (pydantic-ai's Agent.instrument_all(), LangSmith's "
                   "LANGSMITH_TRACING_MODE=otel), per trial, in memory: a tool the agent ran "
                   "with no model asking is seen. Off: nothing of OpenTelemetry is set up. A "
                   "resume goes on as the run was registered.")
@click.option("--judge", metavar="URI",
              help="The judge of quality checks (judge, rubric): openai:MODEL, claude:MODEL "
                   "or python:module:function (imported beside the suite file), instead of "
                   "the suite's judge: (default: $ASSAY_JUDGE). A check's own "
                   "model: still wins. Refused when no suite run has a judged check.")
@click.option("--judge-base-url", metavar="URL",
              help="The OpenAI-compatible server of openai: judges, e.g. "
                   "http://127.0.0.1:8000/v1 (default: $ASSAY_JUDGE_BASE_URL).")
@click.option("--judge-cache/--no-judge-cache", default=True, show_default=True,
              help="Serve a judge's answer from the judge cache when the same question (suite, "
                   "case, trial, judge, prompt) was asked before; --no-judge-cache asks again.")
@click.option("--user-model", metavar="openai:MODEL", envvar="ASSAY_USER_MODEL",
              help="The model that plays a simulated user (a case's user:) whose case names "
                   "none, instead of the suite's user_model: (default: $ASSAY_USER_MODEL). "
                   "Served where openai: judges are (--judge-base-url), through the same "
                   "cache (--no-judge-cache asks again).")
@click.option("--agent-cache", is_flag=True,
              help="Keep each model call of openai: targets in .assay/cache/agent (or "
                   "$ASSAY_CACHE_DIR/agent) and serve it again when the same case, trial, "
                   "model and request come back, instead of calling the server. Off by "
                   "default: a served answer is not what the model does now. The run is "
                   "marked (facet agent_cache, flag agent-cache) and is not compared with "
                   "runs made without it; refused when no target of the run is openai:.")
@click.option("--review", type=click.Choice(list(POLICIES)), default=DEFAULT_POLICY,
              show_default=True,
              help="Which trials the sealed run queues for a person's review (assay review): "
                   "failing ones, inconclusive ones, both, or none. Broken trials are not "
                   "queued: their reason says what broke.")
@DB_OPTION
@click.option("--no-store", is_flag=True,
              help="Run without recording: nothing is stored or sealed, so this run has no "
                   "`assay show`, replay or receipt.")
@click.option("--resume", metavar="RUN",
              help="Finish a run that stopped part-way (crash, kill): run only its missing "
                   "trials, with the suite and target it registered.")
@click.option("--window", type=click.Choice(SIZES),
              help="Run each suite and target as the battery of this window (UTC: the hour, the "
                   "day, the week from Monday): if the window has its battery already, print "
                   "that run's id and exit 0 without running, however many commands race.")
@click.option("--window-at", metavar="TIME",
              help="With --window: the moment whose window is meant, ISO 8601 with its zone "
                   "(e.g. 2025-01-06T10:30Z; default: now), for a schedule that runs late.")
@click.option("--executor", type=click.Choice(["local", "queue"]), default="local",
              show_default=True,
              help="local: run the battery in this process. queue: enqueue its trials on the "
                   "store's PostgreSQL (--db postgresql+psycopg://…) for `assay worker` "
                   "processes on any machine, and follow the run until a worker seals it.")
@click.option("--detach", is_flag=True,
              help="With --executor queue: print the run id once the battery is enqueued and "
                   "exit 0, without following it (assay show RUN --follow follows it).")
@click.option("--chunk", type=click.IntRange(min=1), metavar="N",
              help="With --executor queue: trials per job (default 50). Larger chunks cost the "
                   "queue less per trial; smaller ones spread a short battery over more "
                   "workers.")
@click.option("--target-limit", type=click.IntRange(min=1), metavar="N",
              help="With --executor queue: at most N trials in flight against the target across "
                   "all workers (a rate-limited model), held in the database.")
@click.option("--announce-fd", type=click.IntRange(min=3), metavar="FD", hidden=True,
              help="Write one JSON line, {\"run_id\": …}, to file descriptor FD as soon as "
                   "each run is registered (how the workbench learns which run it started).")
def run(**kwargs: Any) -> None:
    """Run suites against agents; store and seal each run.

    Runs every suite found under PATHS (default: evals/) against its target,
    or against each --target, several trials per case; shows progress, the
    result table and the scores; records each run in the store and seals it
    in the ledger, unless --no-store. Exit 0 only if every run passed; 1 if
    one did not (a case failed, was inconclusive or broken, or the run was
    interrupted); 2 bad usage or a bad suite file; 3 a target could not start.
    """
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
    # Everything is written. Python's shutdown would still run one full
    # collection over every object the run made (a tenth of a second per
    # thousands of cases) to find cycles that no longer matter: not here.
    gc.freeze()
    stuck = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if stuck:
        os._exit(code)
    sys.exit(code)


def _settings(options: RunOptions, window: Window | None) -> RunSettings:
    from ..engine.runs import RunSettings
    from ..grading.adaptive import DEFAULT_MAX_TRIALS
    from ..judging.options import JudgeOptions

    judges = JudgeOptions(judge=options.judge, base_url=options.judge_base_url,
                          concurrency=options.concurrency, cache=options.judge_cache)
    return RunSettings(trials=options.trials, concurrency=options.concurrency,
                       timeout_s=options.timeout_s, seed=options.seed,
                       base_url=options.base_url, window=window, judges=judges,
                       upstreams=tuple((api, url) for api, url in (
                           ("openai", options.upstream_openai),
                           ("anthropic", options.upstream_anthropic),
                           ("gemini", options.upstream_gemini)) if url),
                       otel=options.otel,
                       agent_cache=options.agent_cache, adaptive=options.adaptive,
                       max_trials=options.max_trials or DEFAULT_MAX_TRIALS,
                       review=options.review, hidden_dir=options.hidden_dir,
                       user_model=options.user_model,
                       keep_workspaces=options.keep_workspaces.resolve()
                       if options.keep_workspaces is not None else None)


def _check_adaptive(options: RunOptions) -> None:
    """Refuse what ``--adaptive`` and ``--max-trials`` cannot go with (exit 2).

    ``--max-trials`` only with ``--adaptive``; neither with ``--resume`` (the
    run's options say how it goes on). With ``--adaptive``, ``--trials N`` is
    where each adaptive case starts (at least 3: fewer is smoke evidence), so
    it cannot be above the cap, where the case must stop
    (docs/decisions/0036-adaptive-runs.md).
    """
    from ..grading.adaptive import DEFAULT_MAX_TRIALS

    if options.resume and (options.adaptive or options.max_trials is not None):
        raise UsageError("--adaptive and --max-trials were fixed when the run was registered; "
                         "a resume takes them from the store")
    if not options.adaptive:
        if options.max_trials is not None:
            raise UsageError("--max-trials caps the trials of an --adaptive run: "
                             "give --adaptive too")
        return
    cap = options.max_trials or DEFAULT_MAX_TRIALS
    if options.trials is not None and options.trials > cap:
        raise UsageError(f"--trials {options.trials} is more than the {cap} trials an "
                         "--adaptive case may run (--max-trials): raise --max-trials, or "
                         "start lower")


def _window(options: RunOptions) -> Window | None:
    """The window ``--window`` names, taken once for the whole command (``chosen_window``)."""
    from ..engine.clock import SystemClock
    from ..engine.windows import chosen_window

    if options.window is None:
        if options.window_at is not None:
            raise UsageError("--window-at names the moment of a --window: give --window too")
        return None
    if options.resume:
        raise UsageError("--window names a new battery; --resume finishes a run registered "
                         "already: they cannot go together")
    if options.no_store:
        raise UsageError("--window names a stored battery: it cannot go with --no-store")
    return chosen_window(options.window, options.window_at, SystemClock())


def _check_executor(options: RunOptions) -> None:
    """``--detach`` and ``--chunk`` belong to the queue; refused on the local executor (exit 2)."""
    if options.executor == "queue" or options.resume:
        return
    for flag, given in (("--detach", options.detach), ("--chunk", options.chunk is not None),
                        ("--target-limit", options.target_limit is not None)):
        if given:
            raise UsageError(f"{flag} goes with --executor queue (the local executor runs the "
                             "battery in this process)")


def _check_part(options: RunOptions) -> bool:
    """Whether only some cases run (``--case``, ``--tag``); refuse what a part cannot be."""
    if not (options.case_patterns or options.tags):
        return False
    given = "--case" if options.case_patterns else "--tag"
    for flag, clash in (("--resume", options.resume), ("--window", options.window),
                        ("--executor queue", options.executor == "queue")):
        if clash:
            raise UsageError(f"{given} runs a part of a suite, which is never recorded; "
                             f"{flag} is about a recorded battery: they cannot go together")
    return True


def _parts(loaded: list[LoadedSuite], options: RunOptions) -> list[LoadedSuite]:
    """The suites' chosen public cases, each suite's part noted on stderr (never a case)."""
    from ..suites.select import select_cases

    parts = select_cases(loaded, options.case_patterns, options.tags)
    if not parts:
        asked = [f"--case {p}" for p in options.case_patterns] + \
            [f"--tag {t}" for t in options.tags]
        raise UsageError(f"no public case matches {' '.join(asked)} in "
                         f"{len(loaded)} suite(s)")
    for part in parts:
        click.echo(f"assay: note: a part of {part.loaded.suite.id}: {part.chosen} of "
                   f"{part.public} public case(s), no hidden case; not recorded", err=True)
    return [part.loaded for part in parts]


def _run(options: RunOptions) -> int:
    from ..engine.runs import open_sink

    part = _check_part(options)
    window = _window(options)
    _check_adaptive(options)
    _check_executor(options)
    queued = options.executor == "queue" and not options.resume

    # The store's writer forks first, before this process imports what a run
    # needs: it imports its database libraries on the other core meanwhile,
    # and is ready when the suites are (at a thousand cases it would
    # otherwise be the wait). run_suites stops it; should this process end
    # before, the writer reads end-of-file and ends too.
    sink = None if options.no_store or options.resume or queued or part \
        else open_sink(options.db)

    from rich.console import Console

    from ..engine.runs import resume_run, run_suites
    from ..errors import UsageError
    from ..reports.progress import AnnouncingWatcher, TerminalWatcher

    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    out = Console(file=sys.stdout, highlight=False)
    err = Console(file=sys.stderr, highlight=False)
    watcher = TerminalWatcher(err) if options.announce_fd is None \
        else AnnouncingWatcher(err, options.announce_fd)
    if options.resume:
        if options.no_store:
            raise UsageError("--resume records into the store: it cannot go with --no-store")
        from ..queue.follow import follow_queued

        followed = follow_queued(options.resume, options.db, watcher)
        if followed is not None:  # a queued run: its workers finish it; this follows
            return _report(outlive([followed]), options, out, err)
        result = resume_run(
            options.resume,
            lambda suite_id: load_suites(options.paths, options.hidden_dir, (suite_id,)),
            options.targets, _settings(options, None), db=options.db, watcher=watcher)
        return _report(outlive([result]), options, out, err)

    def load() -> list[LoadedSuite]:
        loaded = load_suites(options.paths, options.hidden_dir, options.suite_ids)
        return _parts(loaded, options) if part else loaded

    executor = None
    if queued:
        from ..queue.submit import QueueExecutor

        executor = QueueExecutor(detach=options.detach, chunk=options.chunk,
                                 target_limit=options.target_limit)
    results = run_suites(load, options.targets, _settings(options, window), db=options.db,
                         store=not (options.no_store or part), watcher=watcher, sink=sink,
                         executor=executor)
    return _report(outlive(results), options, out, err, window)


def _report(results: list[RunResult], options: RunOptions, out: Console, err: Console,
            window: Window | None = None) -> int:
    from ..grading import redact
    from ..reports import run_notes
    from ..reports.emit import ReportFiles, emit

    reports = []
    harness_failed = False
    for result in results:
        if result.harness_failure is not None:
            run_notes.harness_failure(err, result.suite_id, result.harness_failure)
            harness_failed = True
            continue
        if result.existing is not None:
            assert window is not None
            run_id, status = result.existing
            asked = [flag for flag, path in (("--json", options.json_path),
                                             ("--junit", options.junit_path),
                                             ("--markdown", options.markdown_path))
                     if path is not None]
            run_notes.existing_battery(out, err, run_id=run_id, status=status,
                                       window=window.label, suite_id=result.suite_id,
                                       target_uri=result.target_uri, asked=asked)
            continue
        if result.detached:
            assert result.run_id is not None
            run_notes.queued(out, result.run_id)
            continue
        assert result.report is not None
        reports.append(redact(result.report))
        if result.interrupted:
            err.print("[yellow]interrupted: the trials that finished are reported[/]")
    # Files first, then the terminal, each reporter on its own (reports/emit.py);
    # a report that could not be written is the harness's failure (exit 3).
    files = ReportFiles(options.json_path, options.junit_path, options.markdown_path)
    if reports and not emit(reports, files, out, err):
        harness_failed = True
    if harness_failed:
        return EXIT_HARNESS
    return EXIT_PASSED if all(r.scores.passed for r in reports) else EXIT_NOT_PASSED

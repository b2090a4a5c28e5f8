"""`assay rejudge RUN`: judge a stored run's outputs again, into a new sealed run (SPEC §9)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import AssayError
from .common import DB_OPTION, fail, outlive


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--judge", metavar="URI",
              help="The judge to ask this time: openai:MODEL, claude:MODEL or "
                   "python:module:function (default: "
                   "$ASSAY_JUDGE, else the suite's judge:). A check's own model: still wins.")
@click.option("--judge-base-url", metavar="URL",
              help="The OpenAI-compatible server of openai: judges (default: "
                   "$ASSAY_JUDGE_BASE_URL).")
@click.option("--threshold", type=click.FloatRange(0, 1), metavar="X",
              help="Set every quality check's pass-rate bar to X for this run.")
@click.option("--judge-cache/--no-judge-cache", default=True, show_default=True,
              help="Serve answers already asked (same case, trial, judge and prompt) from the "
                   "judge cache; --no-judge-cache asks again.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="At most N trials judged at once.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the new run's JSON report (schema assay.report/1) to FILE.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a JUnit XML report to FILE.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown summary to FILE.")
@DB_OPTION
def rejudge(run_id: str, judge: str | None, judge_base_url: str | None,
            threshold: float | None, judge_cache: bool, concurrency: int,
            json_path: Path | None, junit_path: Path | None, markdown_path: Path | None,
            db: str | None) -> None:
    """Judge the recorded outputs of RUN again, into a new sealed run.

    The agent is not called: each trial's stored output is graded again (the
    deterministic checks give what they gave) and its quality checks are asked
    of the judge again, through the judge cache. The new run names RUN as
    `rejudge_of` and is stored, sealed and reported like any run. Exit codes
    as for `assay run`: 0 it passed, 1 it did not, 2 bad usage, 3 the harness
    could not run.
    """
    from rich.console import Console

    from ..engine.rejudge import rejudge_run
    from ..engine.runs import RunSettings
    from ..judging.options import JudgeOptions
    from ..reports.progress import TerminalWatcher
    from .run import RunOptions, _exit, _report

    options = RunOptions(paths=(), suite_ids=(), targets=(), trials=None,
                         concurrency=concurrency, timeout_s=None, seed=None, hidden_dir=None,
                         json_path=json_path, junit_path=junit_path,
                         markdown_path=markdown_path, db=db, judge=judge,
                         judge_base_url=judge_base_url, judge_cache=judge_cache)
    settings = RunSettings(concurrency=concurrency, judges=JudgeOptions(
        judge=judge, base_url=judge_base_url, concurrency=concurrency, cache=judge_cache))
    out = Console(file=sys.stdout, highlight=False)
    err = Console(file=sys.stderr, highlight=False)
    try:
        result = rejudge_run(run_id, settings, db=db, threshold=threshold,
                             watcher=TerminalWatcher(err))
        code = _report(outlive([result]), options, out, err)
    except AssayError as error:
        fail(error)
        return
    _exit(code)

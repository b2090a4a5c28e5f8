"""`assay runs` and `assay show RUN`: stored runs, redacted as every report is."""

from __future__ import annotations

import sys

import click

from ..errors import AssayError
from .common import DB_OPTION, fail


@click.command()
@DB_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print the runs as one JSON list, for scripts.")
def runs(db: str | None, as_json: bool) -> None:
    """List the stored runs, oldest first.

    One line per run: its id, suite, target, start time, scores and whether it
    passed; a run that stopped part-way is `open`, with the command that
    finishes it.
    """
    import dataclasses

    from ..reports.common import pct
    from ..reports.safe import inert, json_text
    from ..store.database import open_store

    try:
        store = open_store(db)
        summaries = store.runs()
        store.close()
    except AssayError as error:
        fail(error)
        return
    if as_json:
        click.echo(json_text([dataclasses.asdict(s) for s in summaries]))
        return
    # What the store holds is shown inert: a target URI is the user's text.
    for s in summaries:
        if s.status == "open":
            click.echo(inert(f"{s.run_id}  {s.suite_id}  {s.target_uri}  {s.started_at}  "
                             "open: stopped part-way or still running "
                             f"(assay run --resume {s.run_id})", one_line=True))
            continue
        verdict = "passed" if s.passed else "NOT PASSED"
        if s.interrupted:
            verdict += " (interrupted)"
        click.echo(inert(f"{s.run_id}  {s.suite_id}  {s.target_uri}  {s.started_at}  "
                         f"public {pct(s.public)} · hidden {pct(s.hidden)} · "
                         f"overall {pct(s.overall)}  {verdict}", one_line=True))


@click.command()
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print the run's JSON report (schema assay.report/1) instead of the table.")
@click.option("--follow", is_flag=True,
              help="For a run on the job queue that is still open: show its progress until a "
                   "worker seals it, then show it. Ctrl-C stops following, not the run.")
def show(run_id: str, db: str | None, as_json: bool, follow: bool) -> None:
    """Show one stored run's result table and scores.

    As `assay run` printed them; hidden cases appear as holdout-N only.
    """
    if follow:
        _follow(run_id, db)

    from rich.console import Console

    from ..grading import redact
    from ..reports.json_report import as_json as report_json
    from ..reports.safe import json_text
    from ..reports.terminal import print_report
    from ..store.database import open_store

    try:
        store = open_store(db)
        report = redact(store.load_report(run_id))
        store.close()
    except AssayError as error:
        fail(error)
        return
    if as_json:
        click.echo(json_text(report_json(report)))
        return
    print_report(Console(file=sys.stdout, highlight=False), report)



def _follow(run_id: str, db: str | None) -> None:
    """Follow a queued run until it is sealed (or say why there is nothing to follow)."""
    from rich.console import Console

    from ..queue.follow import follow_queued
    from ..reports.progress import TerminalWatcher

    try:
        result = follow_queued(run_id, db, TerminalWatcher(Console(file=sys.stderr,
                                                                   highlight=False)))
    except AssayError as error:
        fail(error)
        return
    if result is not None and result.detached:
        sys.exit(130)  # Ctrl-C: the follower stopped, the run goes on
    if result is not None and result.harness_failure is not None:
        from ..errors import HarnessFailure

        fail(HarnessFailure(result.harness_failure))

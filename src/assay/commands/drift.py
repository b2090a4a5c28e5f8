"""`assay drift SUITE`: did the newest battery of an unchanged agent flip cases, or did it change?

The decision is ``analysis.drift`` (pure); this command picks the two
batteries from the store, prints or writes the ``assay.drift/1`` JSON, and
POSTs it to ``--notify`` (docs/decisions/0028-drift.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import AssayError, UsageError
from .common import (
    DB_OPTION,
    EXIT_HARNESS,
    EXIT_NOT_PASSED,
    STDOUT,
    fail,
    hold_collector,
    outlive,
    write_output,
)

if TYPE_CHECKING:
    from ..analysis.run_facts import RunFacts



@click.command()
@click.argument("suite", metavar="SUITE")
@click.option("--target", "target_uri", metavar="URI",
              help="The agent whose batteries to compare, as its runs name it (the newest "
                   "sealed battery of SUITE against URI gives its version); default: the "
                   "agent of SUITE's newest sealed battery. The agent is not started.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              metavar="F", help="Write the result as JSON (schema assay.drift/1); - for "
                                "standard output.")
@click.option("--notify", metavar="URL",
              help="POST the assay.drift/1 JSON to this http(s) URL, whatever the status; a "
                   "webhook that fails is reported and does not change the exit code.")
@DB_OPTION
def drift(suite: str, target_uri: str | None, json_path: Path | None, notify: str | None,
          db: str | None) -> None:
    """Compare the newest two batteries of one agent version on SUITE.

    SUITE is a suite id with its version (ns/name@N); only sealed, whole
    batteries count, and the agent is not started. The status is `changed`
    when the model or host version that answered moved between them (a
    silent upgrade behind a model alias reads so), or the suite's content
    did; else `drift` when a case flipped between pass and not pass (the
    world moved under an unchanged agent); else `stable`. Exit 0 stable, 1
    drift or changed, 2 fewer than two batteries to compare.
    """
    hold_collector()
    from ..analysis.drift import drift as decide

    try:
        if notify is not None:
            from ..webhooks import check_url

            check_url(notify)
        base, cand = outlive(_newest_two(suite, target_uri, db))
        result = decide(base, cand)
    except AssayError as error:
        fail(error)
        return
    from ..reports.safe import json_text

    written = True
    if json_path is not None:
        written = write_output(json_path, json_text(result.to_json()))
    if json_path != STDOUT:
        from ..reports.drift import drift_summary
        from ..reports.safe import is_a_terminal

        click.echo(drift_summary(result, on_terminal=is_a_terminal(sys.stdout)))
    if notify is not None:
        _notify(notify, result.to_json())
    if not written:
        sys.exit(EXIT_HARNESS)
    if result.status != "stable":
        sys.exit(EXIT_NOT_PASSED)


def _newest_two(suite: str, target_uri: str | None, db: str | None) -> tuple[RunFacts, RunFacts]:
    """The older and newer of the newest two sealed batteries of one suite and agent version."""
    from ..analysis.run_facts import load_stored
    from ..model import SUITE_ID
    from ..store.database import open_store

    if not SUITE_ID.match(suite):
        raise UsageError(f"{suite!r} is not a suite id (namespace/name@N, e.g. "
                         "demo/support.agent@1)")
    store = open_store(db)
    try:
        newest = store.batteries(suite, target_uri=target_uri, limit=1)
        if not newest:
            against = "" if target_uri is None else f" against {target_uri}"
            raise UsageError(f"no sealed battery of suite {suite}{against} in the store: "
                             "nothing to compare")
        digest = newest[0].target_digest
        two = store.batteries(suite, digest, limit=2)
        if len(two) < 2:
            raise UsageError(f"only one sealed battery of suite {suite} against this agent "
                             f"version ({newest[0].target_uri}, {digest}): drift compares "
                             "two; run another battery first")
        cand, base = (load_stored(store, run.run_id) for run in two)
    finally:
        store.close()
    return base, cand


def _notify(url: str, document: dict[str, Any]) -> None:
    """POST the JSON to ``url``; a failure is one warning line, never an exit code.

    The warning names the scheme, host and port only (``webhooks.where``):
    stderr lands in CI logs.
    """
    from ..reports.safe import inert
    from ..webhooks import post_json, where

    why = post_json(url, document)
    if why is not None:
        click.echo(inert(f"assay: warning: could not notify {where(url)}/…: {why}",
                         one_line=True), err=True)

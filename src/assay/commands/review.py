"""`assay review`: work the annotation queue (SPEC §10).

Without arguments, the review screen (a Textual app, ``review.screen``);
``--list`` and ``--export F`` print the queue; ``ITEM --verdict V --note N
--reviewer R`` takes one decision without the screen. Hidden cases' items
are ``holdout-N`` with no content, unless ``--hidden-dir`` holds the very
hidden set the item's run ran (its digest is checked against the run's).
"""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import AssayError, UsageError
from ..review.queue import VERDICTS
from .common import DB_OPTION, fail

if TYPE_CHECKING:
    from ..store.database import Store
    from ..store.reviews.items import StoredItem

#: Who decides, when ``--reviewer`` is not given: this variable, else the login name.
ENV_REVIEWER = "ASSAY_REVIEWER"


@click.command()
@click.argument("item", required=False, type=int)
@click.option("--verdict", type=click.Choice(VERDICTS),
              help="With ITEM: the decision, taken without the screen.")
@click.option("--note", default="", help="With ITEM: why (kept with the decision).")
@click.option("--reviewer", metavar="NAME",
              help=f"Who decides (default: ${ENV_REVIEWER}, else your login name).")
@click.option("--list", "list_", is_flag=True, help="Print the open items, oldest first.")
@click.option("--all", "all_", is_flag=True, help="With --list or --export: decided items too.")
@click.option("--export", "export", type=click.Path(path_type=Path, dir_okay=False),
              metavar="FILE", help="Write the items as JSON lines to FILE ('-': stdout).")
@click.option("--add", "add_run", metavar="RUN",
              help="Queue trials of a stored run by hand: with --case ID (or holdout-N) and "
                   "optionally --trial N (default: every trial of the case).")
@click.option("--case", "case_name", metavar="ID", help="With --add: the case.")
@click.option("--trial", type=click.IntRange(min=1), help="With --add: one trial only.")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR",
              help="The private hidden cases: items of runs that ran exactly these show "
                   "their content.")
@DB_OPTION
def review(item: int | None, verdict: str | None, note: str, reviewer: str | None,
           list_: bool, all_: bool, export: Path | None, add_run: str | None,
           case_name: str | None, trial: int | None, hidden_dir: Path | None,
           db: str | None) -> None:
    """Work the queue of trials waiting for a person's decision.

    A decision is approved, rejected or needs-fix, with a note and the
    reviewer's name, sealed as a `review` ledger entry. Exit 2 for an item
    that does not exist or was decided already.
    """
    from ..review.reveal import revealed
    from ..store.database import open_store

    try:
        _check(item, verdict, list_, export, all_)
        _check_add(item, list_, export, add_run, case_name, trial)
        store = open_store(db)
        try:
            if add_run is not None:
                assert case_name is not None
                _add(store, add_run, case_name, trial)
            elif item is not None:
                assert verdict is not None
                _decide(store, item, verdict, note, reviewer or default_reviewer(), hidden_dir)
            elif list_ or export is not None:
                rows = _rows(store, all_)
                reveal = revealed(store, rows, hidden_dir)
                if list_:
                    _print_list(rows, reveal)
                if export is not None:
                    _export(rows, reveal, export)
            else:
                _screen(store, reviewer or default_reviewer(), hidden_dir)
        finally:
            store.close()
    except AssayError as error:
        fail(error)


def default_reviewer() -> str:
    """``$ASSAY_REVIEWER``, else the login name, else ``unknown``."""
    given = os.environ.get(ENV_REVIEWER)
    if given:
        return given
    try:
        return getpass.getuser()
    except Exception:  # no login name in this environment (a container's numeric user)
        return "unknown"


def _check(item: int | None, verdict: str | None, list_: bool, export: Path | None,
           all_: bool) -> None:
    if item is not None:
        if verdict is None:
            raise UsageError(f"review of item {item}: give --verdict approved|rejected|needs-fix "
                             "(or leave ITEM out to work the queue on the screen)")
        if list_ or export is not None:
            raise UsageError("ITEM --verdict takes one decision: it does not go with --list "
                             "or --export")
    elif verdict is not None:
        raise UsageError("--verdict needs the ITEM it decides: assay review ITEM --verdict V")
    if all_ and not (list_ or export is not None):
        raise UsageError("--all goes with --list or --export")


def _check_add(item: int | None, list_: bool, export: Path | None, add_run: str | None,
               case_name: str | None, trial: int | None) -> None:
    if add_run is None:
        if case_name is not None or trial is not None:
            raise UsageError("--case and --trial go with --add RUN")
        return
    if case_name is None:
        raise UsageError("--add RUN needs --case ID (or holdout-N): which case to queue")
    if item is not None or list_ or export is not None:
        raise UsageError("--add queues items: it does not go with ITEM, --list or --export")


def _add(store: Store, run_id: str, case_name: str, trial: int | None) -> None:
    from ..reports.safe import inert
    from ..review.queue import chosen_items
    from ..store.ledger.entries import utc_stamp
    from ..store.reviews.items import queue_run_items

    report = store.load_report(run_id)
    try:
        items = chosen_items(report, case_name, trial, utc_stamp())
    except ValueError as exc:
        raise UsageError(f"review: {exc}") from None
    added = queue_run_items(store, items)
    label = items[0]["label"]
    click.echo(inert(f"review: queued {added} trial(s) of {label} in run {run_id}"
                     + (f" ({len(items) - added} queued already)" if added < len(items)
                        else "")))


def _rows(store: Store, all_: bool) -> list[StoredItem]:
    from ..store.reviews.items import list_items

    return list_items(store, decided=None if all_ else False)


def _print_list(rows: list[StoredItem], reveal: set[str]) -> None:
    from ..reports.safe import inert
    from ..review.queue import shown

    if not rows:
        click.echo("review: the queue is empty")
        return
    for row in rows:
        item = shown(row, reveal=row.run_id in reveal)
        where = f"{item.run_id} " if item.run_id else ""
        trial = f" trial {item.trial}" if item.trial is not None else ""
        state = f"{item.verdict} by {item.reviewer}" if item.verdict else "open"
        reason = f" — {item.reason}" if item.reason else ""
        click.echo(inert(f"{item.item:>5}  {item.added_at}  {item.source:<6} {where}"
                         f"{item.case}{trial}  {item.outcome or '-'}  [{state}]{reason}"))


def _export(rows: list[StoredItem], reveal: set[str], path: Path) -> None:
    from ..review.queue import export_lines

    lines = export_lines(rows, reveal=reveal)
    if str(path) == "-":
        for line in lines:
            sys.stdout.write(line)
        return
    try:
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as out:
            out.writelines(lines)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    click.echo(f"review: wrote {len(rows)} item(s) to {path}", err=True)


def _decide(store: Store, item: int, verdict: str, note: str, reviewer: str,
            hidden_dir: Path | None) -> None:
    from ..reports.safe import inert
    from ..review.queue import shown
    from ..store.reviews.items import AlreadyDecided, NoSuchItem, decide

    try:
        row = decide(store, item, verdict, note, reviewer)
    except NoSuchItem:
        raise UsageError(f"review: there is no item {item} in the queue "
                         "(assay review --list shows the open ones)") from None
    except AlreadyDecided as taken:
        before = taken.row
        raise UsageError(f"review: item {item} was decided already: {before.verdict} by "
                         f"{before.reviewer} at {before.decided_at}") from None
    from ..review.reveal import revealed

    done = shown(row, reveal=row.run_id in revealed(store, [row], hidden_dir))
    click.echo(inert(f"review: item {done.item} ({done.case}) {done.verdict} by "
                     f"{done.reviewer}; ledger entry {row.entry}"))


def _screen(store: Store, reviewer: str, hidden_dir: Path | None) -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("review: the review screen needs a terminal; use --list, --export F "
                         "or ITEM --verdict V --note N")
    from ..errors import HarnessFailure
    from ..review.screen import run_screen

    if run_screen(store, reviewer, hidden_dir) != 0:
        raise HarnessFailure("review: the review screen stopped on an error (above)")

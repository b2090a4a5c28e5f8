"""`assay schedule add|list|remove`: batteries the job queue starts by itself (SPEC §12)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..engine.windows import SIZES
from ..errors import AssayError, UsageError
from .common import DB_OPTION, fail

if TYPE_CHECKING:
    from ..suites import LoadedSuite


@click.group()
def schedule() -> None:
    """Batteries the workers start once per window, with drift readings.

    A schedule runs a suite against a target as the battery of every window
    (the hour, the day, the week, in UTC): the `assay worker` processes look
    every minute and start the window's battery when it has none, one
    battery however many workers look. Needs the store on PostgreSQL (--db postgresql+psycopg://…).
    """


@schedule.command("add")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("--target", "target_uri", required=True, metavar="URI",
              help="The agent to run the suite against.")
@click.option("--every", required=True, type=click.Choice(SIZES),
              help="The window: one battery per hour, day or week (UTC).")
@click.option("--suite", "suite_id", metavar="ID",
              help="The suite's id, when PATH holds several.")
@click.option("--drift", is_flag=True,
              help="After each battery, read drift against the one before it (assay drift).")
@click.option("--notify", metavar="URL",
              help="POST each drift reading (assay.drift/1 JSON) to this http(s) URL.")
@click.option("--trials", type=click.IntRange(min=1), help="Trials per case.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Seconds before a trial is stopped.")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="The private folder of hidden cases the workers load (same path on each).")
@click.option("--base-url", metavar="URL", help="The server of openai: targets.")
@click.option("--user-model", metavar="openai:MODEL", envvar="ASSAY_USER_MODEL",
              help="The model that plays a simulated user (a case's user:) whose case names "
                   "none, instead of the suite's user_model:, in every window's battery "
                   "(default: $ASSAY_USER_MODEL, kept with the schedule). Served where the "
                   "workers serve openai: judges ($ASSAY_JUDGE_BASE_URL).")
@click.option("--chunk", type=click.IntRange(min=1), metavar="N", help="Trials per job.")
@click.option("--target-limit", type=click.IntRange(min=1), metavar="N",
              help="At most N trials in flight against the target across all workers.")
@DB_OPTION
def add(path: Path, target_uri: str, every: str, suite_id: str | None, drift: bool,
        notify: str | None, trials: int | None, timeout_s: float | None,
        hidden_dir: Path | None, base_url: str | None, user_model: str | None,
        chunk: int | None, target_limit: int | None, db: str | None) -> None:
    """Keep a schedule: the suite at PATH against a target, every window.

    One battery of the suite against --target per --every window, started by
    the workers.
    """
    from ..engine.clock import SystemClock, stamp
    from ..queue.app import needs_postgres
    from ..queue.schedules import add as keep
    from ..reports.safe import inert
    from ..store.database import open_store
    from ..suites import discover
    from ..webhooks import check_url

    try:
        url = needs_postgres(db, "assay schedule")
        if notify is not None:
            check_url(notify)
            if not drift:
                raise UsageError("--notify posts drift readings: give --drift too")
        found = discover([path], hidden_dir)
        if suite_id is not None:
            found = [item for item in found if item.suite.id == suite_id]
        if len(found) != 1:
            named = ", ".join(item.suite.id for item in found) or "none"
            raise UsageError(f"{path}: give one suite to schedule with --suite ID "
                             f"(found: {named})")
        item = found[0]
        if item.simulated_case is not None:
            _check_users(item, user_model)
        options = {"trials": trials, "timeout_s": timeout_s, "base_url": base_url,
                   "user_model": user_model, "chunk": chunk, "target_limit": target_limit}
        store = open_store(url)
        try:
            made = keep(store, {
                "suite_id": item.suite.id, "target_uri": target_uri, "every": every,
                "paths": [str(item.path.resolve())],
                "hidden_dir": str(hidden_dir.resolve()) if hidden_dir else None,
                "cwd": str(Path.cwd()), "options": options, "drift": drift, "notify": notify,
                "added_at": stamp(SystemClock().now())})
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    click.echo(inert(f"schedule {made}: {item.suite.id} against {target_uri}, one battery "
                     f"every {every}" + (" with a drift reading" if drift else ""),
                     one_line=True))


def _check_users(item: LoadedSuite, user_model: str | None) -> None:
    """A suite with simulated users: ``--user-model`` names a model, and a model plays each.

    Checked now as ``assay run`` checks them, rather than in every window's
    battery. A ``--user-model`` no case needs is not refused (nor checked):
    the settings file and ``$ASSAY_USER_MODEL`` make it every command's default.
    """
    from ..errors import SuiteError
    from ..model.conversation import check_user_model

    if user_model is not None:
        try:
            check_user_model(user_model)
        except ValueError as exc:
            raise UsageError(f"--user-model: {exc}") from None
        return
    case = item.unmodelled_user_case
    if case is not None and item.suite.user_model is None:
        hidden = case.split == "hidden"
        what = "a hidden case" if hidden else f"case {case.id!r}"
        raise SuiteError(case.file or str(item.path), None if hidden else case.line,
                         f"{what} has a simulated user and no model to play it: give it "
                         "model: openai:MODEL, or the suite user_model: openai:MODEL, or "
                         "pass --user-model openai:MODEL")


@schedule.command("list")
@DB_OPTION
def list_schedules(db: str | None) -> None:
    """The schedules, with each one's newest battery."""
    from ..queue.app import needs_postgres
    from ..queue.schedules import last_battery, listed
    from ..reports.safe import inert
    from ..store.database import open_store
    from ..webhooks import where

    try:
        store = open_store(needs_postgres(db, "assay schedule"))
        try:
            lines = []
            for kept in listed(store):
                newest = last_battery(store, kept)
                last = "no battery yet" if newest is None else \
                    f"newest {newest[0]} ({newest[1]}, {newest[2]})"
                said = " drift" if kept.drift else ""
                if kept.notify:
                    said += f" → {where(kept.notify)}/…"  # a webhook's path may hold a secret
                lines.append(inert(f"{kept.id}  {kept.suite_id}  {kept.target_uri}  every "
                                   f"{kept.every}{said}  {last}", one_line=True))
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    click.echo("\n".join(lines) if lines else "no schedules")


@schedule.command("remove")
@click.argument("schedule_id", metavar="ID", type=int)
@DB_OPTION
def remove(schedule_id: int, db: str | None) -> None:
    """Forget schedule ID; its batteries stay in the store."""
    from ..queue.app import needs_postgres
    from ..queue.schedules import remove as forget
    from ..store.database import open_store

    try:
        store = open_store(needs_postgres(db, "assay schedule"))
        try:
            forget(store, schedule_id)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    click.echo(f"schedule {schedule_id} removed; its batteries stay in the store")

"""What ``assay run`` says of a run that gave no report to render: a target that could
not start, a window whose battery exists already, a battery left to the queue's workers.

Every value shown here is someone else's text (a module's exception, a suite id, a
URI): each goes through ``safe.shown``, never as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from .safe import shown

if TYPE_CHECKING:
    from rich.console import Console


def harness_failure(err: Console, suite_id: str, reason: str) -> None:
    """The run never started: the harness's reason, on stderr."""
    err.print(shown("harness failure", "bold magenta")
              .append(f" ({suite_id}): ").append_text(shown(reason)))


def queued(out: Console, run_id: str) -> None:
    """A detached queued run (``--detach``): its id first, and how to follow it."""
    out.print(Text.assemble(shown(run_id), " is queued; follow it with "
                            f"`assay show {run_id} --follow`"), soft_wrap=True)


def existing_battery(out: Console, err: Console, *, run_id: str, status: str, window: str,
                     suite_id: str, target_uri: str, asked: list[str]) -> None:
    """Say, on one line of stdout and id first, which run is this window's battery.

    Nothing ran, so no report file gets a line for it: a report is what a
    command ran (docs/decisions/0026-windows.md); ``assay show RUN`` has the
    battery's own. ``asked``: the report flags given (``--json`` …), each told
    on stderr that nothing was written.
    """
    state = "sealed" if status == "sealed" else \
        f"still open: running elsewhere, or stopped part-way (assay run --resume {run_id})"
    out.print(Text.assemble(
        shown(run_id), f" is the existing battery of window {window} for ",
        shown(suite_id), " against ", shown(target_uri, one_line=True),
        f" ({state}); nothing was run"), soft_wrap=True)
    if asked:
        err.print(Text(f"{', '.join(asked)}: nothing written for {run_id}: this command ran "
                       f"nothing (assay show {run_id} --json has its report)"), soft_wrap=True)

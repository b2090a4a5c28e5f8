"""Every reporter of one command, each on its own: the files first, the terminal last.

A report file is what CI keeps; the terminal is what a person glances at.
So the files asked for are written before anything is printed, and no
reporter's failure stops another: each one's exception is caught, said on
standard error (inert), and counted, so the command can exit 3 (the harness
could not do everything it was asked) instead of losing the other reports.
The run itself is stored and sealed before any reporter runs
(docs/decisions/0021-hostile-output.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import Report
from .safe import shown

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class ReportFiles:
    """The report files a command was asked to write (``--json``, ``--junit``, ``--markdown``)."""

    json: Path | None = None
    junit: Path | None = None
    markdown: Path | None = None


def _write_junit(reports: list[Report], path: Path) -> None:
    from .junit import write_junit  # its XML libraries only for the runs that ask for it

    write_junit(reports, path)


def emit(reports: list[Report], files: ReportFiles, out: Console, err: Console) -> bool:
    """Write each file asked for, then print each run and, for several, the side-by-side table.

    ``reports`` are already redacted. Returns False when any reporter failed.
    """
    from . import write_json, write_markdown
    from .terminal import print_report, print_side_by_side

    jobs: list[tuple[str, Callable[[], None]]] = []
    if files.json is not None:
        jobs.append((f"--json {files.json}", partial(write_json, reports, files.json)))
    for flag, path, write in (("--junit", files.junit, _write_junit),
                              ("--markdown", files.markdown, write_markdown)):
        if path is not None:
            jobs.append((f"{flag} {path}", partial(write, reports, path)))
    for report in reports:
        jobs.append((f"the terminal report of run {report.run_id}",
                     partial(_print, out, report, print_report)))
    if len(reports) > 1:
        jobs.append(("the table of runs", partial(print_side_by_side, out, reports)))
    failed = 0
    for what, job in jobs:
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - one reporter never stops the others
            failed += 1
            _say(err, what, exc)
    return failed == 0


def _print(out: Console, report: Report, print_report: Callable[[Console, Report], None]) -> None:
    print_report(out, report)
    out.print()


def _say(err: Console, what: str, exc: Exception) -> None:
    from rich.text import Text

    line = Text.assemble(("report failure", "bold magenta"), ": ",
                         shown(f"{what}: {type(exc).__name__}: {exc}", one_line=True, limit=2000))
    try:
        err.print(line)
    except Exception:  # noqa: BLE001, S110 - nowhere left to say it; the exit code still does
        pass

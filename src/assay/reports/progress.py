"""A live progress bar for a battery: done, failed, broken, rate and ETA.

It is fed outcomes only (pass, fail, inconclusive, broken), never a case id
or content, so it cannot show anything of a hidden case.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .safe import inert

if TYPE_CHECKING:
    from rich.console import Console


class BatteryProgress:
    """Counts outcomes and shows them on a Rich progress bar (when the terminal is live)."""

    def __init__(self, console: Console, label: str, total: int | None) -> None:
        self.counts: Counter[str] = Counter()
        self._progress: Any = None
        self._task: Any = None
        if console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                # The label is a suite id, not ours: shown as plain text, never as markup.
                TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failed]} failed[/] "
                           "[magenta]{task.fields[broken]} broken[/]"),
                TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                console=console, transient=True, redirect_stdout=False, redirect_stderr=False,
            )
            self._task = self._progress.add_task(inert(label, one_line=True), total=total,
                                                 failed=0, broken=0, rate="")

    def __enter__(self) -> BatteryProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def trial_done(self, outcome: str) -> None:
        """Count one finished trial."""
        self.counts[outcome] += 1
        if self._progress is not None:
            task = self._progress.tasks[0]
            speed = task.speed
            self._progress.update(
                self._task, advance=1, failed=self.counts["fail"], broken=self.counts["broken"],
                rate=f"{speed:.1f} trials/s" if speed else "",
            )


class TerminalWatcher:
    """What a run shows on the terminal while it goes (``engine.runs.Watcher``)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @contextmanager
    def battery(self, label: str, total: int | None) -> Iterator[Callable[[str], None]]:
        """A progress bar for one battery; yields its per-trial callback.

        With no ``total`` (an adaptive battery), the bar counts the trials done
        and shows no time remaining: how many there will be is not known yet.
        """
        with BatteryProgress(self.console, label, total) as progress:
            yield progress.trial_done

    def notice(self, text: str) -> None:
        """A line on the terminal, printed as text (never as markup)."""
        self.console.print(text, markup=False, highlight=False)

    def registered(self, run_id: str) -> None:
        """Nothing: the run's id is printed with its report."""


class AnnouncingWatcher:
    """The terminal's watcher that also names each registered run on a file descriptor.

    ``assay run --announce-fd`` is for a process that starts ``assay run`` and
    must follow the run it started (the workbench): the run id is known only
    once the target started and the run was registered, and a line on a pipe
    of its own is read without parsing the terminal's output. Only the run id
    goes there, never a case.
    """

    def __init__(self, console: Console, fd: int) -> None:
        self.terminal = TerminalWatcher(console)
        self.fd = fd

    def battery(self, label: str,
                total: int | None) -> AbstractContextManager[Callable[[str], None]]:
        """The terminal's progress bar."""
        return self.terminal.battery(label, total)

    def notice(self, text: str) -> None:
        """A line on the terminal."""
        self.terminal.notice(text)

    def registered(self, run_id: str) -> None:
        """Write ``{"run_id": …}`` and a newline to the descriptor; a closed one is ignored."""
        import json
        import os

        line = (json.dumps({"run_id": run_id}) + "\n").encode()
        try:
            os.write(self.fd, line)
        except OSError:
            pass  # whoever asked is gone: the run goes on, recorded as ever

"""What every command shares: exit codes, the --db option, failing cleanly, loading suites."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import AssayError

if TYPE_CHECKING:
    from rich.console import Console

    from ..suites import LoadedSuite

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3

T = TypeVar("T")


def outlive(value: T) -> T:
    """Keep ``value`` until the process ends, and never free it object by object.

    A command's largest product (a run's every case, trial and trace; the
    facts of two 10,000-case reports) would otherwise be freed object by
    object as the command returns or as the interpreter shuts down: a tenth
    to a fifth of a second, just before exiting. Held by a list that holds
    itself, it outlives the command; with the collector frozen, that cycle is
    neither collected nor torn down at shutdown, and the operating system
    takes the memory back at once.
    """
    import gc

    keeper: list[object] = [value]
    keeper.append(keeper)
    gc.freeze()  # from here, no pass of the collector looks at it (or frees it) again
    return value


def fail(error: AssayError) -> None:
    """Print an assay error (no traceback) and exit with its code.

    The message may quote a file, a suite author's text or an agent's
    exception: it is shown inert (reports/safe.py).
    """
    from ..reports.safe import inert

    click.echo(f"assay: error: {inert(error)}", err=True)
    sys.exit(error.exit_code)


def load_suites(paths: tuple[Path, ...], hidden_dir: Path | None, suite_ids: tuple[str, ...]
                ) -> list[LoadedSuite]:
    """Discover the suites under ``paths`` (default ``evals/``), only ``suite_ids`` if given."""
    from ..errors import UsageError
    from ..suites import discover
    from ..suites.loader import hidden_fallback

    roots = list(paths) or [Path("evals")]
    loaded = discover(roots, hidden_dir)
    if suite_ids:
        wanted = set(suite_ids)
        loaded = [item for item in loaded if item.suite.id in wanted]
        missing = wanted - {item.suite.id for item in loaded}
        if missing:
            raise UsageError(f"no suite {', '.join(sorted(missing))} under "
                             f"{', '.join(str(p) for p in roots)}")
    if not loaded:
        raise UsageError(f"no suites (*.suite.yaml, *_eval.py) under "
                         f"{', '.join(str(p) for p in roots)}")
    for item in loaded:
        if item.hidden_missing is not None:
            click.echo(f"assay: note: {hidden_fallback(item)}", err=True)
    return loaded


DB_OPTION = click.option(
    "--db", metavar="URL", envvar="ASSAY_DB",
    help="The store of runs and the ledger: a SQLAlchemy URL such as sqlite:///path/to.db "
         "or postgresql+psycopg://host/db (default: $ASSAY_DB, else .assay/assay.db in this "
         "folder).")


#: ``--json -`` / ``--markdown -``: write to standard output instead of a file.
STDOUT = Path("-")


def show_result(json_path: Path | None, data: dict[str, Any],
                show: Callable[[Console], None]) -> None:
    """A command's result: as JSON to ``json_path`` when given (``-``: stdout), and on the
    terminal through ``show`` unless the JSON went to stdout; exit 3 if the file failed."""
    from rich.console import Console as Terminal

    from ..reports.safe import json_text

    written = write_output(json_path, json_text(data)) if json_path is not None else True
    if json_path != STDOUT:
        show(Terminal(file=sys.stdout, highlight=False))
    if not written:
        sys.exit(EXIT_HARNESS)


def write_output(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` (whole or not at all), or to stdout for ``-``; say a failure.

    Returns False when the file could not be written: the command then exits 3
    after printing what it could, as ``assay run`` does for its report files.
    """
    from ..reports.common import write_file
    from ..reports.safe import inert

    if path == STDOUT:
        click.echo(text, nl=not text.endswith("\n"))
        return True
    try:
        write_file(path, text)  # a device or a pipe is written in place, not renamed over
    except OSError as error:
        click.echo(inert(f"assay: error: cannot write {path}: "
                         f"{error.strerror or type(error).__name__}", one_line=True), err=True)
        return False
    return True


def hold_collector() -> None:
    """No cyclic collection for the rest of a command that reads runs and exits.

    Two 10,000-case reports are a few hundred thousand live containers made
    at once, no cycles among them: collecting over them took a third of
    ``assay compare``. The process ends with the command; nothing piles up.
    """
    import gc

    gc.disable()

"""What every command shares: exit codes, the --db option, failing cleanly, loading suites."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import AssayError

if TYPE_CHECKING:
    from ..suites import LoadedSuite

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3


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
    return loaded




DB_OPTION = click.option(
    "--db", metavar="URL", envvar="ASSAY_DB",
    help="The store: a SQLAlchemy URL, e.g. sqlite:///.assay/assay.db or "
         "postgresql+psycopg://host/db (default: $ASSAY_DB; `runs` and `show` fall back "
         "to sqlite:///.assay/assay.db; `run` stores only when a store is named).")


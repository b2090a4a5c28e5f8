"""`assay list`: the suites found and their public cases."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import AssayError
from .common import fail, load_suites


@click.command(name="list")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR",
              help="Count the private hidden cases in DIR/namespace/name@N/ instead of each "
                   "suite's samples (default: $ASSAY_HIDDEN_DIR).")
def list_(paths: tuple[Path, ...], hidden_dir: Path | None) -> None:
    """List the suites found and their public cases; runs nothing.

    Looks below PATHS (default: evals/) and shows each suite's file, target,
    trials and pass mark, and its public cases; hidden cases only as a count.
    """
    from rich.console import Console

    from ..reports.safe import shown

    try:
        loaded = load_suites(paths, hidden_dir, ())
    except AssayError as error:
        fail(error)
        return
    out = Console(file=sys.stdout, highlight=False)
    # Titles, paths, targets, case ids and tags are the suite author's text:
    # shown inert (reports/safe.py), never parsed as markup.
    for item in loaded:
        suite = item.suite
        hidden = len(suite.hidden_cases())
        source = f", {item.hidden_source}" if item.hidden_source else ""
        out.print(shown(suite.id, "bold").append("  ").append_text(
            shown(suite.title or "", one_line=True)))
        out.print(shown(f"  file {item.path} · target {suite.target or '(none: give --target)'} · "
                        f"{suite.trials} trial(s) · pass mark {suite.pass_mark:g}", one_line=True))
        out.print(f"  {len(suite.public_cases())} public case(s), {hidden} hidden{source}",
                  markup=False)
        for case in suite.public_cases():
            line = shown(f"    {case.id}  ({len(case.expect)} assertion(s))", one_line=True)
            if case.tags:
                line.append("  ").append_text(shown(" ".join(case.tags), "dim", one_line=True))
            out.print(line)


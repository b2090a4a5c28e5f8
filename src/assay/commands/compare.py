"""`assay compare BASE CAND`: did the candidate get worse than the baseline, or only dearer?"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import AssayError
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


@click.command()
@click.argument("base", metavar="BASE")
@click.argument("cand", metavar="CAND")
@click.option("--cost-tolerance", type=float, default=0.25, show_default=True,
              help="The same outcomes for more than this fraction more cost or tokens is "
                   "'worse'.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              metavar="F", help="Write the comparison as JSON (schema assay.compare/1); - for "
                                "standard output.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path, dir_okay=False),
              metavar="F", help="Write the comparison as Markdown, for a CI page; - for "
                                "standard output.")
@DB_OPTION
def compare(base: str, cand: str, cost_tolerance: float, json_path: Path | None,
            markdown_path: Path | None, db: str | None) -> None:
    """Compare two runs of one suite, case by case; exit 1 if CAND is worse.

    BASE and CAND are stored run ids or report files (`assay run --json F`).
    Cases are aligned by id (hidden ones by identity, shown as holdout-N): a
    row is aligned when every facet both runs recorded matches (the case, its
    fixture, assertions and graders, harness, host version, invocation,
    model), unverified when a run did not record one, non-comparable when one
    differs. Only aligned rows decide: CAND is worse when one regressed, or
    when the same outcomes cost more than --cost-tolerance more.
    """
    hold_collector()
    from ..analysis.compare import compare as run_compare
    from ..analysis.run_facts import load_runs
    from ..reports.comparison import comparison_markdown, print_comparison
    from ..reports.safe import json_text

    try:
        base_run, cand_run = load_runs([base, cand], db)
        result = outlive(run_compare(base_run, cand_run, cost_tolerance))
    except AssayError as error:
        fail(error)
        return
    written = True
    if json_path is not None:
        # A file is compact (the C encoder: indenting 10,000 rows took most of a second).
        written &= write_output(json_path, json_text(result.to_json(),
                                                     indent=2 if json_path == STDOUT else None))
    if markdown_path is not None:
        written &= write_output(markdown_path, comparison_markdown(result))
    if STDOUT not in (json_path, markdown_path):
        print_comparison(result)
    if not written:
        sys.exit(EXIT_HARNESS)
    if result.verdict == "worse":
        sys.exit(EXIT_NOT_PASSED)

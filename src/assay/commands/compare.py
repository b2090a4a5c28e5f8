"""`assay compare BASE CAND`: did the candidate get worse than the baseline, or only dearer?"""

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
    from ..analysis.compare import Comparison


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
@click.option("--agent", "agent_name", metavar="NAME",
              help="BASE and CAND are two versions of the agent published under NAME "
                   "(a digest, a unique prefix, current or previous): each side is the "
                   "version's newest sealed battery.")
@click.option("--suite", "suite_id", metavar="ID",
              help="With --agent: the suite whose batteries to compare, when the versions "
                   "ran several.")
@DB_OPTION
def compare(base: str, cand: str, cost_tolerance: float, json_path: Path | None,
            markdown_path: Path | None, agent_name: str | None, suite_id: str | None,
            db: str | None) -> None:
    """Compare two runs of one suite, case by case; exit 1 if CAND is worse.

    BASE and CAND are stored run ids or report files (`assay run --json F`);
    with --agent NAME, two versions of that agent (`assay agent publish URI
    --name NAME`), each side its newest sealed battery — nothing is stored.
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

    document: Any = None
    try:
        if agent_name is not None:
            result, document = _versions(agent_name, base, cand, suite_id, cost_tolerance, db)
        elif suite_id is not None:
            raise UsageError("--suite picks the batteries of --agent NAME's versions; "
                             "two runs name their suite themselves")
        else:
            base_run, cand_run = load_runs([base, cand], db)
            result = outlive(run_compare(base_run, cand_run, cost_tolerance))
    except AssayError as error:
        fail(error)
        return
    written = True
    if json_path is not None:
        # A file is compact (the C encoder: indenting 10,000 rows took most of a second).
        data = document if document is not None else result.to_json()
        written &= write_output(json_path, json_text(data,
                                                     indent=2 if json_path == STDOUT else None))
    if markdown_path is not None:
        written &= write_output(markdown_path, comparison_markdown(result))
    if STDOUT not in (json_path, markdown_path):
        if document is not None:
            _say_versions(document["agent"])
        print_comparison(result)
    if not written:
        sys.exit(EXIT_HARNESS)
    if result.verdict == "worse":
        sys.exit(EXIT_NOT_PASSED)


def _versions(name: str, base: str, cand: str, suite: str | None, cost_tolerance: float,
              db: str | None) -> tuple[Comparison, dict[str, Any]]:
    """Two versions of a named agent compared, and the JSON that says which they were."""
    from ..analysis.agents import compare_versions
    from ..store.database import open_store

    store = open_store(db)
    try:
        found = compare_versions(store, name, base, cand, suite, cost_tolerance)
    finally:
        store.close()
    return outlive(found.comparison), found.to_json()


def _say_versions(agent: dict[str, Any]) -> None:
    from ..reports.safe import inert

    base, cand = agent["base"], agent["cand"]
    click.echo(inert(f"agent {agent['name']}: {base['version'][:19]}… ({base['asked']}) → "
                     f"{cand['version'][:19]}… ({cand['asked']})", one_line=True))

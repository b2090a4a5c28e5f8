"""`assay gate RUN`: may this version ship? A decision with its reasons, sealed in the ledger."""

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
@click.argument("run_id", metavar="RUN")
@click.option("--baseline", metavar="RUN",
              help="Blocked when RUN's overall, plus the tolerance, is under this run's, both "
                   "over the cases aligned between them.")
@click.option("--tolerance", type=float, metavar="X",
              help="How far under the baseline's overall RUN may be (default 0.05).")
@click.option("--min-score", type=float, metavar="X", help="Blocked when the overall is under X.")
@click.option("--min-cases", type=int, metavar="N", help="Blocked with fewer than N cases.")
@click.option("--critical", multiple=True, metavar="ID",
              help="Blocked unless this case passed (repeat it for several).")
@click.option("--confident", is_flag=True,
              help="Blocked when a quality check's interval straddles its threshold.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              metavar="F", help="Write the decision as JSON (schema assay.gate/1); - for "
                                "standard output.")
@DB_OPTION
def gate(run_id: str, baseline: str | None, tolerance: float | None, min_score: float | None,
         min_cases: int | None, critical: tuple[str, ...], confident: bool,
         json_path: Path | None, db: str | None) -> None:
    """Take a release decision on a stored run: exit 0 allowed, 1 blocked.

    Always blocked by a structural breach (one is enough) or an interrupted
    run; the other policies apply when given, and combine. The decision and
    every reason are appended to the ledger as a `gate` entry. Hidden cases
    are named holdout-N only.
    """
    hold_collector()
    from ..analysis.gate import Policies
    from ..analysis.gate import gate as decide_gate
    from ..reports.safe import inert, json_text
    from ..store.database import open_store

    policies = Policies(baseline=baseline, tolerance=tolerance, min_score=min_score,
                        min_cases=min_cases, critical=critical, confident=confident)
    try:
        policies.check()
        store = open_store(db)
        try:
            result = outlive(decide_gate(store, run_id, policies))
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    written = True
    if json_path is not None:
        written = write_output(json_path, json_text(result.to_json()))
    if json_path != STDOUT:
        seal = result.seal or {}
        click.echo(inert(f"gate {result.decision.upper()}: run {run_id} "
                         f"(ledger entry {seal.get('entry')})", one_line=True))
        for reason in result.reasons:
            click.echo(inert(f"  - {reason}", one_line=True))
    if not written:
        sys.exit(EXIT_HARNESS)
    if not result.allowed:
        sys.exit(EXIT_NOT_PASSED)

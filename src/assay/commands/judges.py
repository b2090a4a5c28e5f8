"""`assay judges`: how far each judge agrees with the people who reviewed the same trials."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_HARNESS, STDOUT, fail, show_result, write_output


@click.command()
@click.option("--judge", "judge", metavar="MODEL",
              help="Only this judge: the model its opinions name (as the table shows it).")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              metavar="F", help="Write the calibration as JSON (schema assay.judges/1); - for "
                                "standard output.")
@DB_OPTION
def judges(judge: str | None, json_path: Path | None, db: str | None) -> None:
    """Show, per judge and criterion, its agreement with human reviews.

    Every decided review of a trial of a stored run (assay review) is paired
    with the opinions the run's judges gave on that trial. A person's
    approved is a pass, rejected and needs-fix a fail; a judge check's
    answer is its pass or fail; a rubric criterion passes when its own score
    reaches the rubric's pass_at. An opinion that errored or answered out
    of form is no label: it is counted as excluded. Prints observed
    agreement, the agreement chance would give, Cohen's kappa with its
    Landis & Koch reading, then each disagreement. Hidden cases are
    holdout-N and their criteria are not shown. Exit 0 whatever the
    agreement: it informs; exit 2 for a --judge that gave no opinion.
    """
    from ..analysis.calibration import Calibration, NoSuchJudge, calibrate
    from ..errors import UsageError
    from ..store.database import open_store
    from ..store.reviews.calibration import reviewed_trials

    try:
        if judge is not None and not judge.strip():
            raise UsageError("--judge names a judge's model; it cannot be empty")
        store = open_store(db)
        try:
            reviews = reviewed_trials(store)
        finally:
            store.close()
        if not reviews.trials and not reviews.elsewhere:
            click.echo("judges: no reviews yet: decide queued items with `assay review ITEM "
                       "--verdict V` (or add trials with `assay review --add RUN --case ID`) "
                       "and run this again", err=json_path == STDOUT)
            if json_path is not None:
                _write(json_path, Calibration(0, 0, 0, [], [], judge=judge).to_json())
            return
        try:
            result = calibrate(reviews.trials, elsewhere=reviews.elsewhere, judge=judge)
        except NoSuchJudge as error:
            raise UsageError(f"--judge: {error}") from None
    except AssayError as error:
        fail(error)
        return
    from ..reports.calibration import print_calibration

    show_result(json_path, result.to_json(), lambda console: print_calibration(console, result))


def _write(path: Path, data: dict[str, object]) -> None:
    from ..reports.safe import json_text

    if not write_output(path, json_text(data)):
        sys.exit(EXIT_HARNESS)

"""`assay pairwise RUN_A RUN_B --criteria TEXT`: which run's outputs does a judge prefer?"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..errors import AssayError
from .common import DB_OPTION, fail, show_result


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--criteria", metavar="TEXT",
              help="What makes one output better than the other, as the judge is told "
                   "(required).")
@click.option("--judge", "judge_uri", metavar="URI",
              help="The judge, openai:MODEL, claude:MODEL or python:module:function "
                   "(imported from the working folder) (default: $ASSAY_JUDGE).")
@click.option("--judge-base-url", metavar="URL",
              help="The judge's OpenAI-compatible server, such as http://127.0.0.1:8000/v1 "
                   "(default: $ASSAY_JUDGE_BASE_URL).")
@click.option("--seed", type=int, metavar="N",
              help="Seed for the order the two outputs are shown in, per comparison "
                   "(default: a fresh seed, printed and recorded).")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="How many judge calls may be in flight at once.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              metavar="F", help="Write the comparison as JSON (schema assay.pairwise/1); - for "
                                "standard output.")
@DB_OPTION
def pairwise(run_a: str, run_b: str, criteria: str | None, judge_uri: str | None,
             judge_base_url: str | None, seed: int | None, concurrency: int,
             json_path: Path | None, db: str | None) -> None:
    """Ask a judge which of two runs' outputs is better.

    RUN_A and RUN_B are stored runs of one suite, compared trial by trial. Cases are paired by id
    (hidden ones by identity, shown as holdout-N) and trials by index; for
    each pair the judge sees both outputs, in an order drawn from the seed,
    and answers A, B or tie. Prints the rate at which B is preferred over A
    among decisive comparisons, with its 95% Wilson interval; ties and
    unanswered comparisons are counted apart. Every opinion is sealed in the
    ledger as a judge-opinion entry; the judge's cost is reported apart.
    Exit 0 whatever the judge preferred: it informs, it does not decide.
    """
    from ..analysis.pairwise import PairwiseOptions
    from ..analysis.pairwise import pairwise as compare_pairwise
    from ..errors import UsageError
    from ..judging.judges import ENV_BASE_URL, ENV_JUDGE, parse_judge

    try:
        if criteria is None:
            raise UsageError("--criteria is required: say what makes one output better, "
                             "as the judge should read it")
        named = judge_uri or os.environ.get(ENV_JUDGE)
        if not named:
            raise UsageError(f"no judge: give --judge openai:MODEL or set {ENV_JUDGE}")
        try:
            judge = parse_judge(named)
        except ValueError as error:
            where = "--judge" if judge_uri else ENV_JUDGE
            raise UsageError(f"{where}: {error}") from None
        options = PairwiseOptions(
            run_a=run_a, run_b=run_b, criteria=criteria, judge=judge,
            base_url=judge_base_url or os.environ.get(ENV_BASE_URL) or None, seed=seed,
            concurrency=concurrency)
        options.check()  # before the store is opened: a mistake is told at once
        from ..store.database import open_store

        store = open_store(db)
        try:
            result = compare_pairwise(store, options)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    from ..reports.pairwise import print_pairwise

    show_result(json_path, result.to_json(), lambda console: print_pairwise(console, result))


"""`assay replay RUN`: re-grade a stored run and name every verdict it does not reproduce."""

from __future__ import annotations

import sys

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_NOT_PASSED, fail


@click.command()
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="The differences as JSON, for scripts.")
def replay(run_id: str, db: str | None, as_json: bool) -> None:
    """Re-grade a stored run's traces with its stored suite; exit 1 if any verdict differs.

    Hidden cases are named holdout-N and their assertions by position only.
    """
    import dataclasses
    import json

    from ..analysis.replay import replay as regrade
    from ..store.database import open_store

    try:
        store = open_store(db)
        try:
            stored = store.load_replay(run_id)
        finally:
            store.close()
        result = regrade(stored)
    except AssayError as error:
        fail(error)
        return
    if as_json:
        click.echo(json.dumps({
            "run_id": result.run_id, "trials": result.trials, "verdicts": result.verdicts,
            "ok": result.ok,
            "differences": [dataclasses.asdict(d) for d in result.differences],
            "not_replayable": [dataclasses.asdict(u) for u in result.unreplayable],
        }, indent=2, ensure_ascii=False))
    else:
        for d in result.differences:
            where = f"case {d.case} trial {d.trial}"
            if d.position is not None:
                where += f" assertion {d.position}" + (f" ({d.assertion})" if d.assertion else "")
            click.echo(f"{where}: {d.field} stored {d.stored}, recomputed {d.recomputed}")
        for u in result.unreplayable:
            click.echo(f"case {u.case} trial {u.trial}: not replayable ({u.reason})")
        summary = f"replay: {result.verdicts} verdicts re-graded"
        if result.ok:
            click.echo(f"{summary}, all match")
        else:
            parts = [f"{len(result.differences)} difference(s)"] if result.differences else []
            if result.unreplayable:
                parts.append(f"{len(result.unreplayable)} trial(s) not replayable")
            click.echo(f"{summary}, {', '.join(parts)}")
    if not result.ok:
        sys.exit(EXIT_NOT_PASSED)


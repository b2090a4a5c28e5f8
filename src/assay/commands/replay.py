"""`assay replay RUN`: re-grade a stored run and name every verdict it does not reproduce."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ..analysis.replay import Difference
    from ..store.database import Store

from ..errors import AssayError
from .common import DB_OPTION, EXIT_NOT_PASSED, fail


@click.command()
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON, for scripts.")
def replay(run_id: str, db: str | None, as_json: bool) -> None:
    """Re-grade a stored run; exit 1 if any verdict differs.

    Verdicts, trial and case outcomes and scores are recomputed from the
    stored traces and suite, and compared with the stored rows, the stored
    report and the run's ledger entries; each gate decision taken on the run
    is decided again from the stored runs, and each registry start that rests
    on it is checked against the batteries sealed before it. The agent is not run again. Hidden
    cases are named holdout-N
    and their assertions by position only.
    """
    from ..analysis.gate import recheck
    from ..analysis.replay import replay as regrade
    from ..analysis.run_facts import load_stored
    from ..reports.safe import inert, json_text
    from ..store.database import open_store
    from ..store.ledger.replaying import load_run_ledger

    try:
        store = open_store(db)
        try:
            stored = store.load_replay(run_id)
            ledger = load_run_ledger(store, run_id)
            result = regrade(stored, ledger)
            # The gate decisions taken on this run, decided again from what is stored.
            gates, differences = recheck(list(ledger.entries.values()),
                                         lambda ref: load_stored(store, ref))
            starts, findings = _starts_on(store, run_id)
        finally:
            store.close()
        result.entries += gates + starts
        result.differences.extend(differences)
        result.differences.extend(findings)
    except AssayError as error:
        fail(error)
        return
    if as_json:
        click.echo(json_text({
            "run_id": result.run_id, "trials": result.trials, "verdicts": result.verdicts,
            "cases": result.cases, "ledger_entries": result.entries, "ok": result.ok,
            "differences": [d.to_json() for d in result.differences],
            "not_replayable": [u.to_json() for u in result.unreplayable],
        }))
    else:
        # A difference quotes stored ids and notes: not ours, shown inert.
        for d in result.differences:
            click.echo(inert(d.line))
        for u in result.unreplayable:
            click.echo(inert(u.line))
        summary = (f"replay: {result.verdicts} verdicts re-graded, {result.cases} cases "
                   f"recomputed, {result.entries} ledger entries compared")
        if result.ok:
            click.echo(f"{summary}, all match")
        else:
            parts = [f"{len(result.differences)} difference(s)"] if result.differences else []
            if result.unreplayable:
                parts.append(f"{len(result.unreplayable)} not replayable")
            click.echo(f"{summary}, {', '.join(parts)}")
    if not result.ok:
        sys.exit(EXIT_NOT_PASSED)


def _starts_on(store: Store, run_id: str) -> tuple[int, list[Difference]]:
    """The registry's start entries resting on ``run_id``, audited (analysis.registry.audit)."""
    from ..analysis.registry import audit
    from ..analysis.replay import Difference
    from ..store.registry import load

    entries, runs = load(store)
    mine = {e.index for e in entries if e.action == "start"
            and ((e.content or {}).get("run") or {}).get("run_id") == run_id}
    found = [Difference(None, None, None, None, f"agent entry {f.entry}: {f.reason}")
             for f in audit(entries, runs) if f.entry in mine]
    return len(mine), found

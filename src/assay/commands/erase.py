"""`assay erase --subject ID`: remove a data subject's content, record the erasure in the ledger."""

from __future__ import annotations

import click

from ..errors import AssayError
from .common import DB_OPTION, fail


@click.command()
@click.option("--subject", required=True, metavar="ID",
              help="A case id (all its trials in every stored run, or in --run) "
                   "or a content digest sha256:<64 hex> (that one blob).")
@click.option("--run", "run_id", metavar="RUN",
              help="Erase the case from this run only (default: from every stored run).")
@DB_OPTION
def erase(subject: str, run_id: str | None, db: str | None) -> None:
    """Erase a data subject's content; the ledger still verifies.

    Removes the subject's inputs, traces and notes. Ids, outcomes and every
    hash stay, and one `erasure` entry records what went, naming the subject
    by digest only. Exit 2 when nothing matches.
    """
    from ..reports.safe import inert
    from ..store.database import open_store
    from ..store.erasure import erase as erase_subject
    from ..store.ledger.keys import signing_key

    try:
        key = signing_key(db)
        store = open_store(db)
        try:
            done = erase_subject(store, subject, run_id, key=key)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    if done.entry is None:
        # Erasing is idempotent: what was asked for already holds, so exit 0.
        click.echo(inert(f"erase: nothing left to erase of subject {subject} (already erased); "
                         "no ledger entry recorded"))
        return
    click.echo(inert(f"erased: {len(done.digests)} content(s) of subject {subject} in "
                     f"{len(done.runs)} run(s); ledger entry {done.entry.index}"))
    if not done.scrubbed:
        click.echo("assay: warning: the database could not be compacted after the erasure; "
                   "erased content may linger in its free space until reused "
                   "(decisions/0018-erasure.md)", err=True)

"""`assay ledger verify`: check the ledger's chain, contents and heads."""

from __future__ import annotations

import sys

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_NOT_PASSED, fail


@click.group()
def ledger() -> None:
    """The tamper-evident ledger of stored runs."""


@ledger.command(name="verify")
@DB_OPTION
def ledger_verify(db: str | None) -> None:
    """Check every entry's chain and hash, and each content still stored; exit 1 if one fails."""
    from ..store.database import open_store

    try:
        store = open_store(db)
        result, count = store.ledger.verify()
        store.close()
    except AssayError as error:
        fail(error)
        return
    if not result.ok:
        click.echo(f"ledger: {result.reason}")
        sys.exit(EXIT_NOT_PASSED)
    erased = f" ({len(result.absent)} with content erased)" if result.absent else ""
    click.echo(f"ledger: {count} entries verify{erased}")


"""`assay ledger verify` checks the ledger's chain, contents and heads; `ledger head` signs one."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_NOT_PASSED, fail


@click.group()
def ledger() -> None:
    """Check or publish the tamper-evident ledger of stored runs."""


@ledger.command(name="verify")
@DB_OPTION
@click.option("--head", "head_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also check a head published earlier (`assay ledger head`): catches a "
                   "rewrite that replaced the stored heads too.")
def ledger_verify(db: str | None, head_file: Path | None) -> None:
    """Check the whole ledger; exit 1 naming the first entry that fails.

    Every entry's chain link, hash and stored content, and every signed head.

    The heads must be signed by the store's key when its key file exists (it
    is not created just to verify).
    """
    import json

    from ..errors import UsageError
    from ..store.database import open_store
    from ..store.ledger.heads import read_published
    from ..store.ledger.keys import ledger_key_path, signing_key

    try:
        published = None
        if head_file is not None:
            try:
                published = read_published(json.loads(head_file.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                raise UsageError(f"--head: {head_file} is not a readable assay.head/1 "
                                 "JSON file") from None
        public_key = signing_key(db).public_key() if ledger_key_path(db).exists() else None
        store = open_store(db)
        try:
            result, count = store.ledger.verify(public_key, published)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    if not result.ok:
        from ..reports.safe import inert

        click.echo(inert(f"ledger: {result.reason}"))  # may quote a stored (edited) row
        sys.exit(EXIT_NOT_PASSED)
    erased = f" ({len(result.absent)} with content erased)" if result.absent else ""
    heads = f", {result.heads} head{'s' if result.heads != 1 else ''}"
    checked = ", and the published head" if published is not None else ""
    click.echo(f"ledger: {count} entries verify{erased}{heads}{checked}")


@ledger.command(name="head")
@DB_OPTION
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the head here (default: standard output).")
def ledger_head(db: str | None, out: Path | None) -> None:
    """Sign the ledger's current head and print it, to publish elsewhere.

    The head (JSON) is also stored; `assay ledger verify --head FILE` later
    checks that the ledger still extends it.
    """
    import json

    from ..store.database import open_store
    from ..store.ledger.heads import published
    from ..store.ledger.keys import signing_key

    try:
        key = signing_key(db)
        store = open_store(db)
        try:
            head, raw_key = store.ledger.record_head(key)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    text = json.dumps(published(head, raw_key), indent=2) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"head: {out} ({head.size} entries)")

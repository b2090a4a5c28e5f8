"""`assay receipt RUN` writes a stored run's receipt; `assay receipt verify FILE` checks it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_NOT_PASSED, fail


class _ReceiptGroup(click.Group):
    """``assay receipt RUN`` builds; ``assay receipt verify FILE`` checks."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["create", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ReceiptGroup)
def receipt() -> None:
    """Write or check a run's signed receipt.

    `assay receipt RUN [--out FILE] [--db URL]` writes a stored run's signed,
    self-contained receipt (no hidden content) to FILE or standard output;
    `assay receipt verify FILE [--key KEY]` checks one offline, with no store.
    """


@receipt.command(name="create", hidden=True)
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the receipt here (default: standard output).")
def receipt_create(run_id: str, db: str | None, out: Path | None) -> None:
    """Write a stored run's signed receipt, to check offline.

    It holds the run's summary (no hidden content), its run-sealed ledger
    entry, the entry's inclusion proof and a signed tree head.
    """
    from ..reports.safe import inert, json_text
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key
    from ..store.ledger.run_receipts import ReceiptDoesNotHold, issue

    try:
        key = signing_key(db)
        store = open_store(db)
        try:
            built = issue(store, run_id, key)
        finally:
            store.close()
    except ReceiptDoesNotHold as broken:
        # Built from stored rows and checked as a verifier will: a tampered
        # ledger yields no receipt rather than one that does not verify.
        click.echo(inert(f"receipt: the stored ledger does not hold ({broken.reason}); "
                         "run `assay ledger verify`"))
        sys.exit(EXIT_NOT_PASSED)
    except AssayError as error:
        fail(error)
        return
    text = json_text(built) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(inert(f"receipt: {out} (run {run_id}, entry {built['entry']['index']}, "
                         f"signed by key {built['key']['fingerprint']})"))


@receipt.command(name="verify")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", "pin", metavar="KEY",
              help="The signer to require: its raw public key (base64) or SHA-256 fingerprint.")
def receipt_verify(file: Path, pin: str | None) -> None:
    """Check a receipt offline; exit 1 naming the first check that fails.

    Needs no store: the receipt carries the run's summary, its sealing entry,
    the inclusion proof and a signed tree head.
    """
    import json

    from ..store.ledger import receipts

    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        click.echo("receipt: not readable JSON")
        sys.exit(EXIT_NOT_PASSED)
    result = receipts.verify(data, pin)
    if not result.ok:
        from ..reports.safe import inert

        click.echo(inert(f"receipt: {result.reason}"))  # may quote the file's own text
        sys.exit(EXIT_NOT_PASSED)
    pinned = "pinned" if result.pinned else "not pinned"
    click.echo(f"receipt verifies: signed by key {result.fingerprint} ({pinned})")


"""A stored run's receipt, issued from the store: what ``assay receipt RUN`` writes.

One place for the command line and the workbench's download: the run's
summary from its REDACTED report (no hidden content, ``documents.summary``),
its ``run-sealed`` entry and that entry's stored content, a tree head over
the whole ledger signed with the store's key (stored, or the stored one of
that size reused: ``Ledger.record_head``), and the inclusion proof
(``receipts.build``). The receipt is checked as a verifier will check it
before it is handed out, so a tampered ledger yields no receipt rather than
one that does not verify.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...errors import AssayError, UsageError
from .. import schema
from .chain import Entry
from .entries import entry_hashes

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..database import Store


class NoReceipt(UsageError):
    """The run can have no receipt: unknown, not sealed, sealed before the ledger, erased."""


class ReceiptDoesNotHold(AssayError):
    """The receipt built from the stored rows does not verify (``reason``: the failing check).

    The reason names a check, but may quote what the stored (edited) rows
    hold: print it inert.
    """

    exit_code = 1

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def issue(store: Store, run_id: str, key: Ed25519PrivateKey, *,
          tree: list[list[bytes]] | None = None) -> dict[str, Any]:
    """The receipt of the stored, sealed run ``run_id`` (an ``assay.receipt/1`` value).

    ``UsageError`` for a run the store does not hold (``no run … in the
    store``), ``NoReceipt`` for one that cannot have a receipt,
    ``ReceiptDoesNotHold`` when the stored ledger does not hold.

    Reads the sealing entry and the hashes of the head's entries, not every
    entry as an object. ``tree``: the Merkle levels of the ledger's first
    entries as a caller verified and keeps them (the workbench's
    ``store.ledger.verified``); when they cover the head, the proof is read off
    them instead of hashing the ledger again, and should that receipt not
    verify, it is built from the stored hashes as if none had been given.
    """
    from ...grading import redact
    from ...model import Report
    from ..runs.documents import summary
    from . import merkle, receipts

    _status, body, seal = store.report_document(run_id)
    if body is None:
        raise NoReceipt(f"run {run_id} is not sealed: no receipt until it is")
    index = (seal or {}).get("entry")
    no_seal = NoReceipt(f"run {run_id} has no run-sealed ledger entry "
                        "(stored before the ledger?): no receipt")
    if not isinstance(index, int):
        raise no_seal
    head, raw_key = store.ledger.record_head(key)
    sealed = _entry(store, index) if 0 <= index < head.size else None
    if sealed is None or sealed.kind != "run-sealed":
        raise no_seal
    stored = store.ledger.content(sealed.content_digest)
    if stored is None:
        raise NoReceipt(f"run {run_id}: its run-sealed content was erased: no receipt")
    try:
        content = json.loads(stored)
    except ValueError:  # edited into something that is not JSON: verify names it
        content = None
    said = summary(redact(Report.model_validate_json(body)))
    if tree and len(tree[0]) >= head.size:
        held = receipts.receipt_of(said, sealed, merkle.audit_path(tree, index, head.size),
                                   content, head, raw_key)
        if receipts.verify(held).ok:
            return held
    with store.engine.connect() as connection:
        hashes = entry_hashes(connection)[:head.size]
    try:
        if len(hashes) < head.size:
            raise ValueError("fewer entries than the head covers")
        path = merkle.inclusion_proof([bytes.fromhex(h.removeprefix("sha256:")) for h in hashes],
                                      index)
    except ValueError:
        raise ReceiptDoesNotHold(f"entry hashes: the first {head.size} entries are not "
                                 "all there, or not all hashes") from None
    built = receipts.receipt_of(said, sealed, path, content, head, raw_key)
    check = receipts.verify(built)
    if not check.ok:
        raise ReceiptDoesNotHold(check.reason)
    return built


def _entry(store: Store, index: int) -> Entry | None:
    """The ledger entry at ``index``, if there is one."""
    c = schema.ledger.c
    with store.engine.connect() as connection:
        row = connection.execute(sa.select(c.index, c.kind, c.content_digest, c.prev_hash,
                                           c.hash).where(c.index == index)).first()
    return None if row is None else Entry(int(row[0]), str(row[1]), str(row[2]), str(row[3]),
                                          str(row[4]))

"""Judge opinions in the ledger: one ``judge-opinion`` entry each, the raw answers as blobs.

An entry records what an opinion was — who asked what of which model, what
it chose, what it cost — and names the raw answer by its digest; the answer's
text is a blob of its own (its canonical JSON string), as a trace is. Erasing
a raw answer (``assay erase sha256:…``) then blanks one blob and leaves the
entry and every hash verifiable: an answer may quote a hidden case or a
person, the decision that rests on it is neither (DESIGN "The ledger").

Blobs and entries are written in ONE transaction: never an entry whose raw
answer was not kept, nor a kept answer with no entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from ...canonical import canonical, digest_bytes
from ..blobs import put_blobs
from ..database import Store
from .chain import Entry
from .entries import LedgerError, append_bodies


def raw_blob(raw: str) -> tuple[str, bytes]:
    """The digest and bytes a raw answer is kept under: its canonical JSON string."""
    body = canonical(raw)
    return digest_bytes(body), body


def seal_opinions(store: Store, contents: Sequence[Mapping[str, Any]],
                  raws: Mapping[str, bytes]) -> list[Entry]:
    """Append one ``judge-opinion`` entry per content, in order, with the raw answers' blobs.

    ``raws`` maps each digest an entry names to its bytes (``raw_blob``).
    A database error is a ``LedgerError`` (exit 3) that quotes nothing.
    """
    if not contents:
        return []
    bodies = [("judge-opinion", canonical(dict(content))) for content in contents]
    try:
        with store.engine.begin() as connection:
            put_blobs(connection, dict(raws))
            return append_bodies(connection, bodies)
    except sa.exc.SQLAlchemyError as error:
        raise LedgerError(f"cannot append the judge's opinions to the ledger "
                          f"({type(error).__name__})") from None

"""The record: the ledger's pure core (a hash chain, an RFC 6962 Merkle tree, signed heads).

No I/O in what this package exports. The database store lives in
``assay.store.database`` (with ``schema`` and ``migrations``) and is imported
from there, so that importing the ledger core never loads SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ledger import merkle
    from .ledger.chain import (
        GENESIS,
        KINDS,
        Entry,
        Kind,
        TreeHead,
        VerifyResult,
        append,
        entry_hash,
        head_message,
        leaves,
        sign_head,
        verify,
        verify_head,
    )

__all__ = [
    "GENESIS",
    "KINDS",
    "Entry",
    "Kind",
    "TreeHead",
    "VerifyResult",
    "append",
    "entry_hash",
    "head_message",
    "leaves",
    "merkle",
    "sign_head",
    "verify",
    "verify_head",
]


def __getattr__(name: str) -> Any:
    # Loaded on first use (PEP 562): ``assay run`` imports ``store.runs.recorder_process``
    # and ``store.runs.trials`` before it forks the writer, and needs neither the
    # chain nor the cryptography library it signs with.
    if name == "merkle":
        return importlib.import_module(".ledger.merkle", __name__)
    if name in __all__:
        return getattr(importlib.import_module(".ledger.chain", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The record: the ledger's pure core (a hash chain, an RFC 6962 Merkle tree, signed heads).

No I/O in what this package exports. The database store lives in
``assay.store.database`` (with ``schema`` and ``migrations``) and is imported
from there, so that importing the ledger core never loads SQLAlchemy.
"""

from . import merkle
from .chain import (
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

"""The record: the ledger's pure core (a hash chain, an RFC 6962 Merkle tree, signed heads).

No I/O here: the store (schema, migrations) comes later and builds on these.
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

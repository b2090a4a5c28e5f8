"""Receipts: one stored run's proof of record, checkable offline (docs/decisions/0016-receipts.md).

A receipt is plain JSON: the run's summary (from the REDACTED report), its
``run-sealed`` entry and that entry's content, the entry's Merkle inclusion
proof, a signed tree head and the Ed25519 public key that signed it.
:func:`verify` needs nothing else: no store, no SQLAlchemy.

The signing key lives beside the store (:mod:`assay.store.ledger.keys`); it is
never written into a receipt or printed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ...canonical import digest
from . import merkle
from .chain import Entry, TreeHead, entry_hash, leaves, verify_head

SCHEMA: Final = "assay.receipt/1"


@dataclass(frozen=True, slots=True)
class ReceiptCheck:
    """What :func:`verify` found: ``ok``, the first failing check, the key's fingerprint."""

    ok: bool
    reason: str = ""
    fingerprint: str = ""
    pinned: bool = False


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(raw_public_key: bytes) -> str:
    """``"sha256:"`` and the hex SHA-256 of the raw 32-byte public key."""
    return "sha256:" + hashlib.sha256(raw_public_key).hexdigest()


def build(summary: dict[str, Any], entries: list[Entry], sealed_index: int,
          content: Any, head: TreeHead,
          public_key: Ed25519PublicKey | Ed25519PrivateKey | bytes) -> dict[str, Any]:
    """The receipt of the run-sealed entry at ``sealed_index`` under a signed ``head``.

    ``head`` is a stored head (``heads.record_head``) covering the entry, so
    the receipt proves inclusion in a tree the store keeps, not one signed
    only for this receipt; ``entries`` holds at least its first ``head.size``
    entries; ``public_key`` is the key the head is stored under (raw bytes or
    a key). Raises ``ValueError`` when the head does not cover the entry.
    """
    if not 0 <= sealed_index < head.size <= len(entries):
        raise ValueError(f"entry {sealed_index} is not under a head of {head.size} entries")
    path = merkle.inclusion_proof(leaves(entries[:head.size]), sealed_index)
    return receipt_of(summary, entries[sealed_index], path, content, head, public_key)


def receipt_of(summary: dict[str, Any], entry: Entry, path: list[bytes], content: Any,
               head: TreeHead, public_key: Ed25519PublicKey | Ed25519PrivateKey | bytes
               ) -> dict[str, Any]:
    """The receipt of ``entry`` whose audit path under ``head`` is ``path`` (see :func:`build`).

    For a caller that holds the tree already (``merkle.audit_path``) and
    need not hand over every entry; :func:`verify` checks the result.
    """
    if isinstance(public_key, Ed25519PrivateKey):
        public_key = public_key.public_key()
    raw = public_key if isinstance(public_key, bytes) else _raw(public_key)
    return {
        "schema": SCHEMA,
        "run": summary,
        "entry": {"index": entry.index, "kind": entry.kind,
                  "content_digest": entry.content_digest, "prev_hash": entry.prev_hash,
                  "hash": entry.hash},
        "content": content,
        "proof": {"audit_path": [node.hex() for node in path]},
        "head": {"size": head.size, "root": head.root.hex(),
                 "signature": base64.b64encode(head.signature).decode("ascii")},
        "key": {"algorithm": "ed25519", "public_key": base64.b64encode(raw).decode("ascii"),
                "fingerprint": fingerprint(raw)},
    }


def hex32(value: Any, prefix: str = "") -> bytes:
    """A lowercase hex 32-byte hash (after ``prefix``), strictly; else ValueError."""
    if not isinstance(value, str) or not value.startswith(prefix):
        raise ValueError("not a hash")
    raw = bytes.fromhex(value.removeprefix(prefix))
    if len(raw) != merkle.HASH_SIZE or raw.hex() != value.removeprefix(prefix):
        raise ValueError("not a lowercase 32-byte hash")
    return raw


def b64(value: Any) -> bytes:
    """Canonical base64, strictly; else ValueError (or binascii.Error)."""
    if not isinstance(value, str):
        raise ValueError("not base64")
    raw = base64.b64decode(value, validate=True)
    if base64.b64encode(raw).decode("ascii") != value:
        raise ValueError("not canonical base64")
    return raw


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an integer")
    return value


def verify(receipt: Any, pin: str | None = None) -> ReceiptCheck:
    """Check a receipt offline; name the first check that fails. Never raises on bad input."""
    step = "schema"
    try:
        if not isinstance(receipt, dict) or receipt.get("schema") != SCHEMA:
            return ReceiptCheck(False, f"schema: not an {SCHEMA} receipt")
        step = "key"
        key = receipt["key"]
        if key["algorithm"] != "ed25519":
            return ReceiptCheck(False, "key: not an ed25519 key")
        raw_key = b64(key["public_key"])
        public_key = Ed25519PublicKey.from_public_bytes(raw_key)
        found = fingerprint(raw_key)
        if key["fingerprint"] != found:
            return ReceiptCheck(False, "key: the fingerprint is not the public key's", found)
        step = "entry"
        entry, content, run = receipt["entry"], receipt["content"], receipt["run"]
        index = _int(entry["index"])
        leaf = hex32(entry["hash"], "sha256:")
        hex32(entry["content_digest"], "sha256:")
        hex32(entry["prev_hash"], "sha256:")
        if entry["kind"] != "run-sealed":
            return ReceiptCheck(False, "entry: not a run-sealed entry", found)
        if entry_hash(index, entry["kind"], entry["content_digest"],
                      entry["prev_hash"]) != entry["hash"]:
            return ReceiptCheck(False, "entry: its hash does not match its fields", found)
        step = "content"
        if digest(content) != entry["content_digest"]:
            return ReceiptCheck(False, "content: does not match the entry's content digest",
                                found)
        if not isinstance(content, dict) or not isinstance(run, dict) \
                or content.get("run_id") != run.get("run_id"):
            return ReceiptCheck(False, "content: names another run than the summary", found)
        # A sealed content that commits to the summary (``summary``: its digest)
        # makes every summary field tamper-evident; older contents do not.
        if "summary" in content and content["summary"] != digest(run):
            return ReceiptCheck(False, "content: the summary is not the one sealed", found)
        step = "proof"
        head = receipt["head"]
        size, root = _int(head["size"]), hex32(head["root"])
        path = [hex32(node) for node in receipt["proof"]["audit_path"]]
        if not merkle.verify_inclusion(merkle.leaf_hash(leaf), index, size, path, root):
            return ReceiptCheck(False, "proof: the entry is not in the tree head's root", found)
        step = "signature"
        if not verify_head(TreeHead(size, root, b64(head["signature"])), public_key):
            return ReceiptCheck(False, "signature: the tree head is not signed by the key", found)
    except (KeyError, TypeError, ValueError, binascii.Error):
        return ReceiptCheck(False, f"{step}: malformed")
    if pin is not None:
        wanted = pin.strip()
        if wanted not in (key["public_key"], found, found.removeprefix("sha256:")):
            return ReceiptCheck(False, f"key: signed by key {found}, not the pinned key", found)
        return ReceiptCheck(True, fingerprint=found, pinned=True)
    return ReceiptCheck(True, fingerprint=found)

"""The store's Ed25519 signing key: where it lives, and loading (or creating) it.

The key signs ledger tree heads (receipts carry them). It never goes into the
store: whoever can edit the database could otherwise re-sign a rewritten
ledger. Where it lives, in order: ``$ASSAY_LEDGER_KEY``; beside a SQLite
store's file (``.assay/ledger.key`` for the default store); for any other
store (PostgreSQL, in-memory SQLite), ``.assay/ledger.key`` in the working
folder. It is never printed or written into a receipt.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ...errors import UsageError


def ledger_key_path(url: str | None) -> Path:
    """Where the signing key of the store at ``url`` (None: the default store) lives."""
    named = os.environ.get("ASSAY_LEDGER_KEY")
    if named:
        return Path(named)
    if url:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database \
                and parsed.database != ":memory:":
            return Path(parsed.database).parent / "ledger.key"
    return Path(".assay") / "ledger.key"


def signing_key(url: str | None) -> Ed25519PrivateKey:
    """The store's key, created on first use; a key file that cannot be used is exit 2."""
    path = ledger_key_path(url)
    try:
        return load_or_create_key(path)
    except (OSError, ValueError, TypeError) as error:
        raise UsageError(f"cannot use the ledger signing key {path} "
                         f"({type(error).__name__})") from None


def load_or_create_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 key in ``path`` (PKCS#8 PEM); created with mode 0600 if it does not exist.

    A new key is written whole to a file of this process's own, then linked
    to ``path``, which fails if another process linked its key first: the
    file appears complete or not at all. (Creating ``path`` itself and then
    writing it let a racing process read it empty: three ``assay run
    --window`` starting on a fresh store did.)
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
        mine = Path(name)  # mode 0600, a name no other process or thread has
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
            os.link(mine, path)
        except FileExistsError:
            pass  # another process made it first: read theirs, which is whole
        except OSError:  # a file system without hard links: create it in place
            _create_in_place(path, pem)
        finally:
            mine.unlink(missing_ok=True)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} does not hold an Ed25519 private key")
    return key


def _create_in_place(path: Path, pem: bytes) -> None:
    """Create ``path`` holding ``pem`` unless it exists (where links cannot be made)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)

"""Canonical JSON (RFC 8785) and the digests built on it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


def canonical(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of a JSON value."""
    import rfc8785

    return rfc8785.dumps(value)


def digest(value: Any) -> str:
    """``sha256:…`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


def file_digest(path: Path) -> str:
    """``sha256:…`` of a file's bytes, or of a folder's files (names and bytes, sorted)."""
    h = hashlib.sha256()
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(child.relative_to(path).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(child.read_bytes()).digest())
    elif path.is_file():
        h.update(path.read_bytes())
    return "sha256:" + h.hexdigest()

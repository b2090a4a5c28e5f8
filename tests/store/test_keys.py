"""The store's signing key: made once, whole, however many processes ask for it first."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from assay.store.ledger.keys import load_or_create_key


def raw(key: object) -> bytes:
    return key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_racers_on_a_new_key_file_all_read_one_whole_key(tmp_path: Path) -> None:
    # Three `assay run --window` on a fresh store asked for the key at once; one read
    # the file another had created but not yet written (ValueError). Threads released
    # together race the same way, many rounds over.
    for round_ in range(60):
        path = tmp_path / f"round-{round_}" / "ledger.key"
        barrier = threading.Barrier(4)
        keys: list[bytes] = []
        errors: list[str] = []

        def ask(path: Path = path, barrier: threading.Barrier = barrier,
                keys: list[bytes] = keys, errors: list[str] = errors) -> None:
            barrier.wait()
            try:
                keys.append(raw(load_or_create_key(path)))
            except Exception as error:  # noqa: BLE001 - what the racer saw is the finding
                errors.append(type(error).__name__)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], (round_, errors)
        assert len(set(keys)) == 1 and len(keys) == 4
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.key"]  # no leftovers


def test_an_existing_key_is_read_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "ledger.key"
    first = raw(load_or_create_key(path))
    assert raw(load_or_create_key(path)) == first

"""Receipts: build from a stored run through the CLI, verify offline; any flipped bit fails."""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.store.ledger import receipts

from .test_ledger_runs import CANARY, assay, project


def _run_id(root: Path, name: str) -> str:
    run_id: str = json.loads((root / name).read_text())["run_id"]
    return run_id


def _stored(root: Path, url: str, name: str = "r.json") -> str:
    done = assay(root, "run", "evals", "--json", name, "--db", url)
    assert done.returncode == 1, done.stderr  # one hidden case fails
    return _run_id(root, name)


#: The store of the sealed run, relative to its project folder (its key beside it).
STORE = "sqlite:///store/assay.db"


@pytest.fixture(scope="module")
def _sealed_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One sealed run made by the real CLI, once for the module; each test takes a copy."""
    root = project(tmp_path_factory.mktemp("receipts"))
    return root, _stored(root, STORE)


@pytest.fixture
def sealed(_sealed_template: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """This test's copy of the project and its store (key included): the folder, the run id."""
    template, run_id = _sealed_template
    shutil.copytree(template, tmp_path, dirs_exist_ok=True)
    return tmp_path, run_id


def test_a_receipt_verifies_offline_and_stays_valid(sealed: tuple[Path, str]) -> None:
    root, run_id = sealed
    url = STORE
    made = assay(root, "receipt", run_id, "--db", url, "--out", "rec.json")
    assert made.returncode == 0, made.stderr
    key_file = root / "store" / "ledger.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    checked = assay(root, "receipt", "verify", "rec.json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    data = json.loads((root / "rec.json").read_text())
    fp = data["key"]["fingerprint"]
    assert "receipt verifies" in checked.stdout
    assert f"signed by key {fp} (not pinned)" in checked.stdout
    assert data["run"]["run_id"] == run_id == data["content"]["run_id"]
    assert data["entry"]["kind"] == "run-sealed"

    # More runs later: the receipt still verifies against its own head.
    _stored(root, url, "r2.json")
    _stored(root, url, "r3.json")
    assert assay(root, "receipt", "verify", "rec.json").returncode == 0
    again = assay(root, "receipt", run_id, "--db", url)
    assert again.returncode == 0, again.stderr
    later = json.loads(again.stdout)
    assert later["head"]["size"] > data["head"]["size"]
    assert later["key"] == data["key"]  # the same key, reused
    assert receipts.verify(later).ok

    # Pinning: the right key (either form) passes, a wrong one fails.
    for pin in (fp, data["key"]["public_key"]):
        pinned = assay(root, "receipt", "verify", "rec.json", "--key", pin)
        assert pinned.returncode == 0 and "(pinned)" in pinned.stdout
    other = receipts.fingerprint(b"\x01" * 32)
    wrong = assay(root, "receipt", "verify", "rec.json", "--key", other)
    assert wrong.returncode == 1 and "pinned" in wrong.stdout

    # No hidden content, no private key anywhere.
    text = (root / "rec.json").read_text()
    private = key_file.read_text()
    body = "".join(private.strip().splitlines()[1:-1])
    assert CANARY not in text and CANARY not in again.stdout
    for out in (made, checked, again, wrong):
        assert body not in out.stdout + out.stderr
    assert body not in text


def test_a_real_receipt_seals_its_summary(sealed: tuple[Path, str]) -> None:
    root, run_id = sealed
    assert assay(root, "receipt", run_id, "--db", STORE, "--out", "rec.json").returncode == 0
    data = json.loads((root / "rec.json").read_text())
    assert "summary" in data["content"] and receipts.verify(data).ok
    for field, value in (("passed", not data["run"]["passed"]), ("started_at", "2020-01-01")):
        forged = json.loads(json.dumps(data))
        forged["run"][field] = value
        (root / "forged.json").write_text(json.dumps(forged))
        checked = assay(root, "receipt", "verify", "forged.json")
        assert checked.returncode == 1
        assert checked.stdout == "receipt: content: the summary is not the one sealed\n"


def test_verify_does_not_load_sqlalchemy(sealed: tuple[Path, str]) -> None:
    root, run_id = sealed
    assert assay(root, "receipt", run_id, "--db", STORE, "--out", "rec.json").returncode == 0
    code = ("import sys\nfrom assay.cli import main\n"
            "try:\n    main(['receipt', 'verify', 'rec.json'])\n"
            "except SystemExit as e:\n    print('exit', e.code)\n"
            "print('sqlalchemy' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, timeout=60)
    assert "receipt verifies" in done.stdout and done.stdout.strip().endswith("False")


def test_no_receipt_without_a_sealed_entry(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert assay(root, "receipt", "no-such-run", "--db", "sqlite:///s/a.db").returncode == 2


def test_the_key_of_a_non_file_store_lives_in_dot_assay(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.store.ledger.keys import ledger_key_path

    monkeypatch.delenv("ASSAY_LEDGER_KEY", raising=False)
    assert ledger_key_path("postgresql+psycopg://h/db") == Path(".assay") / "ledger.key"
    assert ledger_key_path("sqlite:///s/a.db") == Path("s") / "ledger.key"
    assert ledger_key_path(None) == Path(".assay") / "ledger.key"
    monkeypatch.setenv("ASSAY_LEDGER_KEY", str(tmp_path / "k"))
    assert ledger_key_path("sqlite:///s/a.db") == tmp_path / "k"


@pytest.mark.real
def test_a_receipt_from_postgresql(postgres_url: str, tmp_path: Path) -> None:
    root = project(tmp_path)
    run_id = _stored(root, postgres_url)
    env = {**os.environ, "ASSAY_LEDGER_KEY": str(tmp_path / "keys" / "ledger.key")}
    made = subprocess.run([sys.executable, "-m", "assay", "receipt", run_id, "--db", postgres_url,
                           "--out", "rec.json"], capture_output=True, text=True, cwd=root,
                          env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    assert assay(root, "receipt", "verify", "rec.json").returncode == 0


# Property: any single flipped bit in any hash, proof node, root, signature or key fails.

_RECEIPT: dict[str, Any] = {}


_SUMMARY: dict[str, Any] = {
    "run_id": "run-1", "suite": {"id": "demo", "digest": "sha256:" + "b" * 64},
    "hidden_set": None, "target": {"uri": "cmd:./agent", "digest": "sha256:" + "c" * 64},
    "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z",
    "scores": {"public": 0.75, "hidden": 0.5, "overall": 0.625, "pass_mark": 0.6},
    "passed": True,
}


def _receipt() -> dict[str, Any]:
    """A receipt whose sealed content also commits to the summary (``summary``: its digest)."""
    if not _RECEIPT:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from assay.canonical import digest
        from assay.store.ledger.chain import append, sign_head

        sealed = {"run_id": "run-1", "report_digest": "sha256:" + "a" * 64,
                  "summary": digest(_SUMMARY)}
        entries = []
        for i in range(6):
            kind = "run-sealed" if i == 3 else "trial-verdict"
            entries.append(append(entries, kind, sealed if i == 3 else {"n": i}))  # type: ignore[arg-type]
        key = Ed25519PrivateKey.generate()
        head = sign_head(entries[:5], key)  # a head that does not cover the whole ledger
        _RECEIPT.update(receipts.build(copy.deepcopy(_SUMMARY), entries, 3, sealed, head,
                                       key.public_key()))
    return copy.deepcopy(_RECEIPT)


def _fields(r: dict[str, Any]) -> list[tuple[str, ...]]:
    found = [("entry", "hash"), ("entry", "content_digest"), ("entry", "prev_hash"),
             ("head", "root"), ("head", "signature"), ("key", "public_key"),
             ("key", "fingerprint")]
    found += [("proof", "audit_path", str(i)) for i in range(len(r["proof"]["audit_path"]))]
    return found


def _get(r: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        r = r[int(part)] if isinstance(r, list) else r[part]
    return r


def _set(r: Any, path: tuple[str, ...], value: Any) -> None:
    *head, last = path
    parent = _get(r, tuple(head))
    if isinstance(parent, list):
        parent[int(last)] = value
    else:
        parent[last] = value


def _flip(value: str, bit: int) -> str:
    b64 = not all(c in "0123456789abcdef" for c in value.removeprefix("sha256:"))
    if b64:
        raw = bytearray(base64.b64decode(value))
        raw[(bit // 8) % len(raw)] ^= 1 << (bit % 8)
        return base64.b64encode(bytes(raw)).decode("ascii")
    prefix = "sha256:" if value.startswith("sha256:") else ""
    raw = bytearray(bytes.fromhex(value.removeprefix(prefix)))
    raw[(bit // 8) % len(raw)] ^= 1 << (bit % 8)
    return prefix + raw.hex()


def test_the_sample_receipt_verifies() -> None:
    assert receipts.verify(_receipt()).ok


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_flipped_bit_fails(data: st.DataObject) -> None:
    r = _receipt()
    path = data.draw(st.sampled_from(_fields(r)))
    bit = data.draw(st.integers(min_value=0, max_value=511))
    _set(r, path, _flip(_get(r, path), bit))
    assert not receipts.verify(r).ok


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([("entry", "index"), ("head", "size")]),
       st.integers(min_value=-3, max_value=40))
def test_a_changed_index_or_size_fails(path: tuple[str, str], value: int) -> None:
    r = _receipt()
    if _get(r, path) == value:
        value += 1
    _set(r, path, value)
    assert not receipts.verify(r).ok


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["run_id", "report_digest"]), st.text(max_size=20))
def test_changed_content_fails(field: str, value: str) -> None:
    r = _receipt()
    if r["content"][field] == value:
        return
    r["content"][field] = value
    assert not receipts.verify(r).ok


def test_malformed_receipts_fail_without_raising() -> None:
    for bad in (None, [], {}, {"schema": "assay.receipt/1"}, {**_receipt(), "proof": None}):
        assert not receipts.verify(bad).ok
    assert not receipts.verify(_receipt(), pin="nope").ok


def _leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every scalar value in a receipt (lists by index)."""
    if isinstance(value, dict):
        return [p for key in value for p in _leaves(value[key], (*path, key))]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _leaves(item, (*path, str(i)))]
    return [path]


def _flip_value(value: Any, bit: int) -> Any:
    """``value`` with one bit of its representation flipped (a char's code point, an int,
    a float's IEEE bits, a bool); None for a value with no bits (null)."""
    import struct

    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value ^ (1 << (bit % 64))
    if isinstance(value, float):
        (bits,) = struct.unpack("<Q", struct.pack("<d", value))
        return struct.unpack("<d", struct.pack("<Q", bits ^ (1 << (bit % 64))))[0]
    if isinstance(value, str) and value:
        at = bit % len(value)
        code = ord(value[at]) ^ (1 << ((bit // len(value)) % 21))
        return value[:at] + chr(min(code, 0x10FFFF)) + value[at + 1:]
    return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_flipping_any_bit_of_any_value_fails_and_never_raises(data: st.DataObject) -> None:
    import math

    from hypothesis import assume

    r = _receipt()
    path = data.draw(st.sampled_from(_leaves(r)))
    old = _get(r, path)
    new = _flip_value(old, data.draw(st.integers(0, 1023)))
    assume(new is not None and new != old)
    assume(not isinstance(new, float) or math.isfinite(new))
    assume(not isinstance(new, str) or not any(0xD800 <= ord(c) <= 0xDFFF for c in new))
    _set(r, path, new)
    result = receipts.verify(r)
    assert not result.ok, path
    assert result.reason.split(":")[0] in {"schema", "key", "entry", "content", "proof",
                                           "signature"}


def test_build_refuses_a_head_that_does_not_cover_the_entry() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from assay.store.ledger.chain import append, sign_head

    entries = [append([], "run-sealed", {"run_id": "r"})]
    key = Ed25519PrivateKey.generate()
    with pytest.raises(ValueError):
        receipts.build({"run_id": "r"}, entries, 0, {"run_id": "r"}, sign_head([], key), key)


def test_a_receipt_is_proved_against_a_stored_head_from_the_stored_content(
        sealed: tuple[Path, str]) -> None:
    import sqlalchemy as sa

    from assay.store import schema
    from assay.store.database import open_store

    root, run_id = sealed
    url = f"sqlite:///{root / 'store' / 'assay.db'}"  # STORE, for this process's open_store
    made = assay(root, "receipt", run_id, "--db", url)
    assert made.returncode == 0, made.stderr
    data = json.loads(made.stdout)
    store = open_store(url)
    b, h = schema.blobs.c, schema.ledger_heads.c
    try:
        with store.engine.connect() as connection:
            head = connection.execute(sa.select(h.root, h.signature)
                                      .where(h.size == data["head"]["size"])).one()
            body = connection.scalar(sa.select(b.content)
                                     .where(b.digest == data["entry"]["content_digest"]))
        assert (head.root, head.signature) == (data["head"]["root"], data["head"]["signature"])
        assert json.loads(body) == data["content"]

        # The stored content edited: no receipt (exit 1), and nothing of it quoted.
        edited = body.replace(run_id.encode(), b"someone-else")
        with store.engine.begin() as connection:
            connection.execute(schema.blobs.update()
                               .where(b.digest == data["entry"]["content_digest"])
                               .values(content=edited))
        bad = assay(root, "receipt", run_id, "--db", url)
        assert bad.returncode == 1 and bad.stdout.startswith(
            "receipt: the stored ledger does not hold (content:"), bad.stdout + bad.stderr
        assert "someone-else" not in bad.stdout + bad.stderr

        # Erased: no receipt (exit 2).
        with store.engine.begin() as connection:
            connection.execute(schema.blobs.update()
                               .where(b.digest == data["entry"]["content_digest"])
                               .values(content=None))
        assert assay(root, "receipt", run_id, "--db", url).returncode == 2
    finally:
        store.close()

"""The registry in the store, on SQLite and a real PostgreSQL: a decision and its entry
share one locked transaction, so racing publishes of one version make one entry, and
every append is covered by a signed head."""

from __future__ import annotations

import threading

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assay.analysis import agents
from assay.store import registry
from assay.store.database import open_store

VERSION = "sha256:" + "c" * 64
IDENTITY = {"uri": "python:a:agent", "file a.py": "sha256:" + "d" * 64}
KEY = Ed25519PrivateKey.generate()


def test_racing_publishes_of_one_version_make_one_entry(db_url: str) -> None:
    open_store(db_url).close()  # created once, so the racers only append
    recorded: list[int | None] = []
    failures: list[BaseException] = []
    gate = threading.Barrier(4)

    def publish() -> None:
        store = open_store(db_url)
        try:
            gate.wait()
            entry = agents.publish(store, "python:a:agent", IDENTITY, VERSION, "t", KEY)
            recorded.append(None if entry is None else entry.index)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)
        finally:
            store.close()

    racers = [threading.Thread(target=publish) for _ in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert failures == []
    assert sorted(recorded, key=lambda i: -1 if i is None else i) == [None, None, None, 0]

    store = open_store(db_url)
    try:
        entries, runs = registry.load(store)
        assert [(e.index, e.action, e.version) for e in entries] == [(0, "publish", VERSION)]
        assert runs == []
        result, count = store.ledger.verify(KEY.public_key())
        assert result.ok and count == 1 and result.heads == 1  # the publish is under a head
    finally:
        store.close()


def test_a_start_with_no_battery_appends_nothing_and_a_stop_always_does(db_url: str) -> None:
    store = open_store(db_url)
    try:
        agents.publish(store, "python:a:agent", IDENTITY, VERSION, "t0", KEY)
        entry, decision = agents.start(store, VERSION, "t1", KEY)
        assert entry is None and not decision.allowed
        assert decision.reasons == (f"no sealed battery ran against {VERSION}",)
        stopped = agents.stop(store, VERSION, "t2", KEY)
        assert stopped.index == 1
        entries, _ = registry.load(store)
        assert [e.action for e in entries] == ["publish", "stop"]
        assert all(e.intact for e in entries)
    finally:
        store.close()

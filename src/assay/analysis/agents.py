"""Publish, start and stop an agent version: the registry's rule decided, and its
``agent`` entry appended, in one store transaction (SPEC §8).

The rules are ``analysis/registry.py``'s (pure); ``store/registry.py``'s
``record`` holds the ledger's write lock from the first read to the append, so
no battery is sealed between what a start read and what it recorded
(docs/decisions/0027-registry.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model.agents import AgentEntry
from ..store.registry import read_runs, record
from .registry import (
    StartDecision,
    decide_start,
    publish_content,
    published_before,
    start_content,
    stop_content,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from sqlalchemy.engine import Connection

    from ..store.database import Store
    from ..store.ledger.chain import Entry


def publish(store: Store, uri: str, identity: dict[str, str], version: str, at: str,
            key: Ed25519PrivateKey | None = None) -> Entry | None:
    """Record a publish of ``version``; None when it was published already (nothing appended).

    A version is its content, so publishing it again says nothing new
    (docs/decisions/0027-registry.md).
    """
    def decide(entries: list[AgentEntry], _: Connection) -> tuple[dict[str, Any] | None, None]:
        if published_before(entries, version):
            return None, None
        return publish_content(version, uri, identity, at), None

    return record(store, decide, key)[0]


def start(store: Store, version: str, at: str, key: Ed25519PrivateKey | None = None
          ) -> tuple[Entry | None, StartDecision]:
    """Decide whether ``version`` may start; when it may, record the start (else nothing)."""
    def decide(entries: list[AgentEntry], connection: Connection
               ) -> tuple[dict[str, Any] | None, StartDecision]:
        decision = decide_start(version, read_runs(connection, {version}),
                                published=published_before(entries, version))
        if not decision.allowed or decision.run is None:
            return None, decision
        return start_content(version, decision.run, at), decision

    return record(store, decide, key)


def stop(store: Store, version: str, at: str, key: Ed25519PrivateKey | None = None) -> Entry:
    """Record a stop of ``version``: never refused."""
    def decide(entries: list[AgentEntry], _: Connection) -> tuple[dict[str, Any], None]:
        return stop_content(version, at), None

    entry = record(store, decide, key)[0]
    assert entry is not None  # a stop always appends
    return entry

"""Publish, start and stop an agent version: the registry's rule decided, and its
``agent`` entry appended, in one store transaction (SPEC §8); and two versions of a
named agent compared, each by its newest battery (``assay compare --agent``).

The rules are ``analysis/registry.py``'s (pure); ``store/registry.py``'s
``record`` holds the ledger's write lock from the first read to the append, so
no battery is sealed between what a start read and what it recorded
(docs/decisions/0027-registry.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model.agents import AgentEntry, BatteryFacts
from ..store.registry import load, read_runs, record
from .compare import DEFAULT_COST_TOLERANCE, Comparison, compare
from .registry import (
    StartDecision,
    decide_start,
    named,
    publish_content,
    published_as,
    published_before,
    resolve,
    sides,
    start_content,
    stop_content,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from sqlalchemy.engine import Connection

    from ..store.database import Store
    from ..store.ledger.chain import Entry


def publish(store: Store, uri: str, identity: dict[str, str], version: str, at: str,
            key: Ed25519PrivateKey | None = None, name: str | None = None) -> Entry | None:
    """Record a publish of ``version`` (filed under ``name``, when given); None when it was
    published already that way (nothing appended).

    A version is its content, so publishing it again says nothing new
    (docs/decisions/0027-registry.md) — unless it is filed under a name it
    did not have: that is news, the name's newest version (0065).
    """
    def decide(entries: list[AgentEntry], _: Connection) -> tuple[dict[str, Any] | None, None]:
        if published_as(entries, version, name):
            return None, None
        return publish_content(version, uri, identity, at, name), None

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


@dataclass(frozen=True)
class VersionComparison:
    """Two versions of a named agent, compared by their newest batteries of one suite."""

    name: str
    #: What was asked for (``current``, a prefix…) and the versions it named.
    refs: tuple[str, str]
    versions: tuple[str, str]
    comparison: Comparison

    def to_json(self) -> dict[str, Any]:
        """``assay.compare/1``, with the agent and the versions each side stands for."""
        data = self.comparison.to_json()
        data["agent"] = {"name": self.name,
                         "base": {"asked": self.refs[0], "version": self.versions[0]},
                         "cand": {"asked": self.refs[1], "version": self.versions[1]}}
        return data


def compare_versions(store: Store, name: str, base: str, cand: str, suite: str | None = None,
                     cost_tolerance: float = DEFAULT_COST_TOLERANCE,
                     registry: tuple[list[AgentEntry], list[BatteryFacts]] | None = None
                     ) -> VersionComparison:
    """Compare two versions of agent ``name``: each side is its newest sealed, whole battery
    of the suite, and the comparison is ``assay compare``'s of those two runs. Nothing is
    stored; a name, version or battery that is not there is a usage error naming it.

    ``registry`` is the store's entries and run facts when the caller read them already
    (``store.registry.load``): a page comparing several suites reads them once.
    """
    from .run_facts import load_stored

    entries, runs = registry if registry is not None else load(store)
    agent = named(entries, name)
    versions = (resolve(agent, base), resolve(agent, cand))
    first, second = sides(agent, *versions, runs, suite)
    comparison = compare(load_stored(store, first.run_id), load_stored(store, second.run_id),
                         cost_tolerance)
    return VersionComparison(name, (base, cand), versions, comparison)

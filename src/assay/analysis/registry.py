"""The registry's rules, pure: what the ``agent`` entries say, and when a version may start.

An agent version is the digest of a target's identity (targets/identity.py,
docs/decisions/0019-agent-version.md). The registry keeps no table of its
own: ``assay agent publish|start|stop`` append ``agent`` ledger entries, and
everything shown — a version's URI, state and the battery a start rested on —
is folded from those entries (docs/decisions/0027-registry.md).

The start rule (SPEC §8): a version may start only when the newest sealed
battery that ran against that exact digest passed its pass mark, was not
interrupted and has no structural breach. "Newest" is by ledger order (the
index of the battery's ``run-sealed`` entry), so the rule can be re-checked
later against exactly the batteries that were sealed before a start entry:
:func:`audit` names every start that should not have been allowed.

Names (SPEC §8, docs/decisions/0065-agent-names.md): ``assay agent publish
URI --name NAME`` files the version under NAME; the versions of a name, in
the order they were first published under it, are its line of succession —
``current`` is the newest, ``previous`` the one before. :func:`resolve`
turns what a user types (a digest, a unique prefix, ``current``,
``previous``) into a version of the name, and :func:`sides` picks the
newest sealed battery of each of two versions, for ``assay compare --agent``.

Nothing here reads a clock, a file or the store; the caller hands in the
entries and the facts of the runs (``store/registry.py`` reads them).
Hidden cases appear only as ``holdout-N`` (:func:`outward_names`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..model.agents import VERSION, AgentEntry, BatteryFacts, State


def check_version(text: str) -> str:
    """``text`` when it is a version (``sha256:`` and 64 lowercase hex digits), else exit 2."""
    if VERSION.fullmatch(text) is None:
        raise UsageError("VERSION must be an agent version as `assay agent publish` prints it: "
                         "sha256: followed by 64 lowercase hex digits")
    return text


#: An agent's name: a word a URL path and a shell take as it is.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: The version references that are not digests.
RELATIVE = ("current", "previous")


def check_name(text: str) -> str:
    """``text`` when it is an agent name, else exit 2 saying what one is."""
    if NAME.fullmatch(text) is None:
        raise UsageError(f"{text!r} is not an agent name: use 1 to 100 letters, digits, '.', "
                         "'_' or '-', starting with a letter or digit")
    return text


# --- entry contents ----------------------------------------------------------------------

def publish_content(version: str, uri: str, identity: Mapping[str, str], at: str,
                    name: str | None = None) -> dict[str, Any]:
    """A ``publish`` entry: the version, its URI and identity (file names and digests only),
    and the name it is filed under, when it has one."""
    content: dict[str, Any] = {"action": "publish", "version": version, "uri": uri,
                               "identity": dict(identity), "at": at}
    if name is not None:
        content["name"] = name
    return content


def entry_name(entry: AgentEntry) -> str | None:
    """The name a usable publish entry files its version under (None: no name, or not one)."""
    value = (entry.content or {}).get("name")
    return value if isinstance(value, str) and NAME.fullmatch(value) else None


def start_content(version: str, run: BatteryFacts, at: str) -> dict[str, Any]:
    """A ``start`` entry: the version and the battery it rests on (run id and its seal)."""
    return {"action": "start", "version": version, "at": at,
            "run": {"run_id": run.run_id, "suite": run.suite_id,
                    "seal": {"entry": run.seal_entry, "hash": run.seal_hash}}}


def stop_content(version: str, at: str) -> dict[str, Any]:
    """A ``stop`` entry."""
    return {"action": "stop", "version": version, "at": at}


# --- states ------------------------------------------------------------------------------

@dataclass
class AgentState:
    """One version as the registry's entries leave it (``assay agent list``)."""

    version: str
    state: State = "published"
    uri: str | None = None
    published_at: str | None = None
    #: The run the newest start rested on, while started (and after a stop, the last one).
    run_id: str | None = None
    changed_at: str | None = None
    #: Entries of this version, in ledger order.
    entries: list[int] = field(default_factory=list)
    #: The names it was published under, in ledger order.
    names: list[str] = field(default_factory=list)

    @property
    def published(self) -> bool:
        """Whether a publish entry names this version."""
        return self.published_at is not None or self.uri is not None

    def to_json(self) -> dict[str, Any]:
        """As ``assay agent list --json`` prints it."""
        return {"version": self.version, "state": self.state, "uri": self.uri,
                "published_at": self.published_at, "run_id": self.run_id,
                "changed_at": self.changed_at, "entries": list(self.entries),
                "names": list(self.names)}


def fold(entries: Iterable[AgentEntry]) -> dict[str, AgentState]:
    """Every version's state from its entries, in ledger order (first seen first).

    A version stopped or started without a publish still appears (``uri``
    None): a stop is never refused, and a version's state is whatever its
    newest entry made it. Entries that do not hold (``usable`` False) are
    left out; ``assay ledger verify`` names them.
    """
    states: dict[str, AgentState] = {}
    for entry in sorted(entries, key=lambda e: e.index):
        if not entry.usable:
            continue
        version, content = str(entry.version), entry.content or {}
        at = content.get("at") if isinstance(content.get("at"), str) else None
        state = states.setdefault(version, AgentState(version))
        state.entries.append(entry.index)
        if entry.action == "publish":
            name = entry_name(entry)
            if name is not None and name not in state.names:
                state.names.append(name)
            if not state.published:
                uri = content.get("uri")
                state.uri = uri if isinstance(uri, str) else None
                state.published_at = at or ""
                state.changed_at = at
            continue
        state.changed_at = at
        if entry.action == "start":
            state.state = "started"
            run = content.get("run")
            run_id = run.get("run_id") if isinstance(run, dict) else None
            state.run_id = run_id if isinstance(run_id, str) else None
        else:
            state.state = "stopped"
    return states


def published_before(entries: Iterable[AgentEntry], version: str, before: int | None = None
                     ) -> bool:
    """Whether a usable publish entry names ``version`` (before entry ``before``, if given)."""
    return any(e.usable and e.action == "publish" and e.version == version
               and (before is None or e.index < before) for e in entries)


def published_as(entries: Iterable[AgentEntry], version: str, name: str | None) -> bool:
    """Whether ``version`` was published already under ``name`` (any publish, for no name).

    Publishing it again that way says nothing new; filing it under a name it
    does not have yet does.
    """
    if name is None:
        return published_before(entries, version)
    return any(e.usable and e.action == "publish" and e.version == version
               and entry_name(e) == name for e in entries)


# --- names -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Named:
    """One agent name and its versions, oldest first (the order first published under it)."""

    name: str
    versions: tuple[str, ...]
    #: When each version was first published under the name.
    published_at: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def current(self) -> str:
        """The newest version of the name."""
        return self.versions[-1]

    @property
    def previous(self) -> str | None:
        """The version the current one succeeded (None: there is one version)."""
        return self.versions[-2] if len(self.versions) > 1 else None


def names(entries: Iterable[AgentEntry]) -> dict[str, Named]:
    """Every agent name with its versions, names in the order first used."""
    found: dict[str, list[str]] = {}
    when: dict[str, dict[str, str | None]] = {}
    for entry in sorted(entries, key=lambda e: e.index):
        name = entry_name(entry) if entry.usable and entry.action == "publish" else None
        if name is None:
            continue
        version = str(entry.version)
        if version not in found.setdefault(name, []):
            found[name].append(version)
            at = (entry.content or {}).get("at")
            when.setdefault(name, {})[version] = at if isinstance(at, str) else None
    return {name: Named(name, tuple(versions), when.get(name, {}))
            for name, versions in found.items()}


def named(entries: Iterable[AgentEntry], name: str) -> Named:
    """The versions published under ``name``; exit 2 when there are none."""
    check_name(name)
    found = names(entries).get(name)
    if found is None:
        raise UsageError(f"no agent is published under the name {name!r} "
                         "(assay agent publish URI --name NAME)")
    return found


def resolve(agent: Named, ref: str) -> str:
    """The version of ``agent`` that ``ref`` names: ``current``, ``previous``, a digest or a
    unique prefix of one (``sha256:`` optional); exit 2 naming what did not fit."""
    text = ref.strip()
    if text == "current":
        return agent.current
    if text == "previous":
        if agent.previous is None:
            raise UsageError(f"agent {agent.name} has one version, so no previous one")
        return agent.previous
    if not text:
        raise UsageError(f"a version of agent {agent.name} is a digest, a unique prefix of "
                         "one, current or previous")
    prefix = text if text.startswith("sha256:") else f"sha256:{text}"
    if re.fullmatch(r"sha256:[0-9a-f]{1,64}", prefix) is None:
        raise UsageError(f"{ref!r} is not a version of agent {agent.name}: give a digest "
                         "(sha256:…), a unique prefix of one, current or previous")
    hits = [v for v in agent.versions if v.startswith(prefix)]
    if not hits:
        raise UsageError(f"no version of agent {agent.name} starts with {prefix} "
                         f"(it has {len(agent.versions)}: assay agent list)")
    if len(hits) > 1:
        shown = ", ".join(v[:19] + "…" for v in hits[:5])
        raise UsageError(f"{ref!r} is ambiguous: {len(hits)} versions of agent {agent.name} "
                         f"start with it ({shown}); give more of the digest")
    return hits[0]


def newest_batteries(version: str, runs: Iterable[BatteryFacts]) -> dict[str, BatteryFacts]:
    """The newest whole battery of ``version`` per suite: sealed in the ledger, not
    interrupted; newest by ledger order (the seal's entry)."""
    newest: dict[str, BatteryFacts] = {}
    for run in runs:
        if run.target_digest != version or not run.sealed or run.interrupted:
            continue
        held = newest.get(run.suite_id)
        if held is None or (run.seal_entry or 0) > (held.seal_entry or 0):
            newest[run.suite_id] = run
    return newest


def sides(agent: Named, base: str, cand: str, runs: Sequence[BatteryFacts],
          suite: str | None = None) -> tuple[BatteryFacts, BatteryFacts]:
    """The newest battery of each of two versions of ``agent``, of one suite.

    ``suite`` picks the suite; without it, the one suite both versions have
    batteries of. Exit 2 naming the side with no battery, or the suites to
    choose from.
    """
    chosen = {}
    for side, version in (("A", base), ("B", cand)):
        batteries = newest_batteries(version, runs)
        if suite is not None:
            batteries = {suite: batteries[suite]} if suite in batteries else {}
        if not batteries:
            of = f" of suite {suite}" if suite is not None else ""
            raise UsageError(f"version {side} of agent {agent.name} ({version}) has no sealed, "
                             f"whole battery{of}: run the suite against it first")
        chosen[side] = batteries
    common = sorted(set(chosen["A"]) & set(chosen["B"]))
    if not common:
        raise UsageError(f"the two versions of agent {agent.name} have no suite in common: "
                         f"A ran {', '.join(sorted(chosen['A']))}; "
                         f"B ran {', '.join(sorted(chosen['B']))}")
    if len(common) > 1:
        raise UsageError(f"both versions of agent {agent.name} ran several suites "
                         f"({', '.join(common)}): name one with --suite ID")
    return chosen["A"][common[0]], chosen["B"][common[0]]


# --- the start rule ----------------------------------------------------------------------

@dataclass(frozen=True)
class StartDecision:
    """Whether a version may start, why not, and the battery the answer rests on."""

    version: str
    allowed: bool
    reasons: tuple[str, ...] = ()
    #: The newest sealed battery of the version (None: there is none).
    run: BatteryFacts | None = None


def newest_battery(version: str, runs: Iterable[BatteryFacts], before: int | None = None
                   ) -> BatteryFacts | None:
    """The newest run sealed in the ledger against ``version`` (sealed before entry ``before``)."""
    sealed = [r for r in runs if r.target_digest == version and r.sealed
              and (before is None or (r.seal_entry is not None and r.seal_entry < before))]
    return max(sealed, key=lambda r: r.seal_entry or 0, default=None)


def decide_start(version: str, runs: Iterable[BatteryFacts], *, published: bool,
                 before: int | None = None) -> StartDecision:
    """May ``version`` start? Every reason it may not, named (hidden cases as holdout-N).

    The newest sealed battery of exactly this digest counts, whatever its
    suite: it must have passed its pass mark, not been interrupted, and have
    no structural breach. A version never published is refused too: the
    registry cannot say what it starts.
    """
    reasons: list[str] = []
    if not published:
        reasons.append(f"{version} is not published (assay agent publish URI)")
    run = newest_battery(version, runs, before)
    if run is None:
        reasons.append(f"no sealed battery ran against {version}")
    else:
        which = f"the newest battery of this version (run {run.run_id}, suite {run.suite_id})"
        if run.interrupted:
            reasons.append(f"{which} was interrupted")
        if not run.passed:
            reasons.append(f"{which} did not pass its pass mark")
        if run.breaches:
            shown = _named(run.breaches)
            reasons.append(f"{which} has a structural breach in {shown}")
    return StartDecision(version, not reasons, tuple(reasons), run)


def _named(breaches: Sequence[str], most: int = 5) -> str:
    cases = sorted(breaches, key=lambda name: (name.startswith("holdout-"), _order(name)))
    word = "case" if len(cases) == 1 else f"{len(cases)} cases:"
    listed = ", ".join(cases[:most]) + (f" and {len(cases) - most} more" if len(cases) > most
                                        else "")
    return f"{word} {listed}"


def _order(name: str) -> tuple[int, str]:
    number = name.removeprefix("holdout-")
    return (int(number), "") if name.startswith("holdout-") and number.isdigit() else (0, name)


# --- audit -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """A registry entry that does not hold: its ledger index and why."""

    entry: int
    version: str | None
    reason: str

    @property
    def line(self) -> str:
        """One line of text."""
        return f"entry {self.entry}: {self.reason}"


def audit(entries: Sequence[AgentEntry], runs: Sequence[BatteryFacts]) -> list[Finding]:
    """Re-check every start entry against the batteries sealed before it.

    A start holds when, with only the publish entries and batteries sealed
    before it, :func:`decide_start` allows it, and the battery it names is
    that newest battery, with the seal the ledger gave it. Anything else —
    a rule that did not hold, a newer failing battery it ignored, a run it
    names that is gone or differs — is a finding. An entry that does not
    hold or cannot be read is one too: nothing turns into a pass by default.
    """
    findings: list[Finding] = []
    for entry in sorted(entries, key=lambda e: e.index):
        if not entry.intact:
            findings.append(Finding(entry.index, None, "content missing or edited "
                                                       "(assay ledger verify)"))
            continue
        if not entry.usable:
            findings.append(Finding(entry.index, None, "not a readable registry entry"))
            continue
        if entry.action != "start":
            continue
        version = str(entry.version)
        decision = decide_start(version, runs, before=entry.index,
                                published=published_before(entries, version, entry.index))
        for reason in decision.reasons:
            findings.append(Finding(entry.index, version, f"start should have been refused: "
                                                          f"{reason}"))
        if decision.run is None:
            continue
        given = (entry.content or {}).get("run")
        named: dict[str, Any] = given if isinstance(given, dict) else {}
        seal = named.get("seal")
        if not isinstance(seal, dict):
            seal = {}
        if named.get("run_id") != decision.run.run_id:
            findings.append(Finding(entry.index, version,
                                    "start does not rest on the newest battery of its version "
                                    f"(run {decision.run.run_id})"))
        elif (seal.get("entry"), seal.get("hash")) != (decision.run.seal_entry,
                                                        decision.run.seal_hash):
            findings.append(Finding(entry.index, version,
                                    f"the seal of run {decision.run.run_id} differs from the one "
                                    "the start recorded"))
    return findings

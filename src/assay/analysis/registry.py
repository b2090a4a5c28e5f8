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

Nothing here reads a clock, a file or the store; the caller hands in the
entries and the facts of the runs (``store/registry.py`` reads them).
Hidden cases appear only as ``holdout-N`` (:func:`outward_names`).
"""

from __future__ import annotations

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


# --- entry contents ----------------------------------------------------------------------

def publish_content(version: str, uri: str, identity: Mapping[str, str], at: str
                    ) -> dict[str, Any]:
    """A ``publish`` entry: the version, its URI and identity (file names and digests only)."""
    return {"action": "publish", "version": version, "uri": uri,
            "identity": dict(identity), "at": at}


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

    @property
    def published(self) -> bool:
        """Whether a publish entry names this version."""
        return self.published_at is not None or self.uri is not None

    def to_json(self) -> dict[str, Any]:
        """As ``assay agent list --json`` prints it."""
        return {"version": self.version, "state": self.state, "uri": self.uri,
                "published_at": self.published_at, "run_id": self.run_id,
                "changed_at": self.changed_at, "entries": list(self.entries)}


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

"""What replay reads of the ledger for one run: its trial-verdict and run-sealed entries.

Replay (docs/decisions/0015-replay.md) checks a stored run's rows against the
ledger as well as against re-grading: rows and report live in ordinary,
editable tables, while the ledger is chained, so a forger has to break the
chain (which ``assay ledger verify`` and signed heads catch) to keep the two
in agreement.

A trial's entry is found by ``trials.entry`` when the recorder filled it, and
otherwise by its content. Every trial-verdict entry is read either way: an
entry whose trial row was deleted is only found by its content. Nothing here
judges what it reads; each entry says whether its bytes still match its
digest and hash, and :mod:`assay.analysis.replay` decides what differs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from .. import schema
from ..database import Store
from .chain import entry_hash


@dataclass(frozen=True)
class LedgerEntry:
    """One ledger entry as replay needs it.

    ``content`` is the parsed content (None once erased, or when its bytes
    are not a JSON object); ``intact`` is False when the content's bytes no
    longer hash to ``content_digest`` or the entry's own hash does not cover
    its fields: a content edited in place.
    """

    index: int
    kind: str
    hash: str
    content: dict[str, Any] | None
    erased: bool
    intact: bool


@dataclass(frozen=True)
class RunLedger:
    """A run's ledger record, as found: by reference and by content.

    ``trial_entries`` maps (case id, trial n) to ``trials.entry`` where it is
    set; ``entries`` holds those referenced entries, whatever their content,
    every trial-verdict, run-sealed or gate entry whose content names the run, and
    every erasure entry that rewrote its report (``reports`` names the run,
    with the report's digest before and after: docs/decisions/0018-erasure.md).
    ``erased`` counts trial-verdict entries whose content is erased and that
    no trial row references: they might have been this run's, so a trial
    without an entry cannot be called a difference while they exist.
    ``status`` is ``runs.status`` (``open`` until sealed); ``seal`` is the
    runs row's ``(seal_entry, seal_hash)``, None when not set (runs stored
    before revision 0004 keep their seal inside the report instead).
    """

    status: str | None
    seal: tuple[int, str | None] | None = None
    trial_entries: dict[tuple[str, int], int] = field(default_factory=dict)
    entries: dict[int, LedgerEntry] = field(default_factory=dict)
    erased: int = 0


def _parse(content: bytes | None) -> dict[str, Any] | None:
    if content is None:
        return None
    try:
        value = json.loads(bytes(content))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def load_run_ledger(store: Store, run_id: str) -> RunLedger:
    """The ledger entries that bear on ``run_id``: referenced by its trials, or naming it.

    Reads every trial-verdict, run-sealed and erasure entry's content (one query): the
    cost grows with the ledger, which is acceptable for an audit command.
    """
    r, t, lg, b = schema.runs.c, schema.trials.c, schema.ledger.c, schema.blobs.c
    with store.engine.connect() as connection:
        run = connection.execute(sa.select(r.status, r.seal_entry, r.seal_hash)
                                 .where(r.run_id == run_id)).first()
        status = None if run is None else run.status
        seal = None if run is None or run.seal_entry is None else (
            int(run.seal_entry), run.seal_hash)
        references = {(row.case_id, int(row.n)): int(row.entry) for row in connection.execute(
            sa.select(t.case_id, t.n, t.entry).where(t.run_id == run_id, t.entry.is_not(None)))}
        wanted = set(references.values())
        rows = connection.execute(
            sa.select(lg.index, lg.kind, lg.content_digest, lg.prev_hash, lg.hash, b.content)
            .outerjoin(schema.blobs, b.digest == lg.content_digest)
            .where(sa.or_(lg.kind.in_(("trial-verdict", "run-sealed", "erasure", "gate")),
                          lg.index.in_(sorted(wanted))))
            .order_by(lg.index))
        entries: dict[int, LedgerEntry] = {}
        erased = 0
        for row in rows:
            index = int(row[0])
            raw = None if row.content is None else bytes(row.content)
            content = _parse(raw)
            mine = content is not None and (
                content.get("run_id") == run_id if row.kind != "erasure"
                else isinstance(content.get("reports"), dict) and run_id in content["reports"])
            if index not in wanted and not mine:
                if raw is None and row.kind == "trial-verdict":
                    erased += 1
                continue
            intact = entry_hash(index, row.kind, row.content_digest, row.prev_hash) == row.hash
            if raw is not None:
                intact = intact and (
                    "sha256:" + hashlib.sha256(raw).hexdigest() == row.content_digest)
            entries[index] = LedgerEntry(index, row.kind, row.hash, content, raw is None, intact)
    return RunLedger(status, seal, references, entries, erased)

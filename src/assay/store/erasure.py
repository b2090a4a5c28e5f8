"""Erasure: remove a data subject's content from the store, record that it was removed.

The ledger proves what was decided without holding what was said (DESIGN,
"The ledger"): every entry and every trial keeps only digests, so blanking
content leaves each hash verifiable (PRINCIPLES 9). A subject is either a
case id — the unit that carries a person's data: its input, the agent's
output in its traces, notes that quote them — or one content digest
(docs/decisions/0018-erasure.md).

For a case, in each run that holds it: its trace blobs' content is set to
NULL (rows and digests stay, a claim check); in the stored suite its
``input`` and each assertion's ``arg`` and ``path`` become null and the case
id is listed under the document's top-level ``"erased"`` (``Case`` forbids
extra keys); its verdicts' notes become ``""`` and their labels the check's
name (a path can quote data), in the ``verdicts`` rows and in the stored
report; its trials' and the case's ``reason`` become ``""`` (a reason quotes a
note). Ids, outcomes and evidence stay: they are what was decided.

One ``erasure`` ledger entry is appended in the SAME transaction, so there is
never an erasure without its record nor a record without the erasure. Its
content names the subject by digest only (a case id may name a person) and
lists runs and erased digests; it is never erasable here, or erasure could
erase its own trace.

Rows are not enough: a database file keeps old pages. SQLite runs the
update with ``secure_delete`` on, then ``VACUUM`` and, in WAL mode, a
``wal_checkpoint(TRUNCATE)``; PostgreSQL gets a ``VACUUM`` of the touched
tables. That last step is best effort (a busy reader can hold a WAL frame,
PostgreSQL's WAL and backups are out of reach) and is reported, not fatal.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..canonical import canonical
from ..errors import UsageError
from ..model.result import Report
from . import schema
from .database import StoreError
from .ledger.chain import Entry
from .ledger.entries import LOCK_KEY, append_bodies, utc_stamp  # one lock for every ledger writer
from .ledger.heads import record_head
from .runs.documents import report_digest
from .runs.texts import in_parts, read_text, write_parts

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from .database import Store

#: A digest subject: one blob, by the digest the ledger and the trials use.
DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")

#: Tables whose rows an erasure rewrites: the ones to vacuum afterwards.
_TOUCHED: Final = ("blobs", "runs", "trials", "verdicts", "opinions")


@dataclass(frozen=True)
class Erasure:
    """What one erasure did; ``entry`` is None when nothing was left to erase.

    ``scrubbed`` is False when the database could not be compacted after the
    erasure (old pages may linger in free space until reused).
    """

    subject_digest: str
    runs: tuple[str, ...]
    digests: tuple[str, ...]
    entry: Entry | None
    scrubbed: bool = True


@dataclass
class _Erased:
    """What the erasure changed: runs touched, blobs blanked, reports' digests before and after."""

    runs: set[str] = field(default_factory=set)
    digests: set[str] = field(default_factory=set)
    reports: dict[str, dict[str, str | None]] = field(default_factory=dict)


def subject_digest(subject: str) -> str:
    """How the ledger names a subject: ``sha256:`` of its UTF-8 bytes, never the raw id."""
    return "sha256:" + hashlib.sha256(subject.encode("utf-8")).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def erase(store: Store, subject: str, run_id: str | None = None, *,
          now: Callable[[], datetime] = _now, key: Ed25519PrivateKey | None = None) -> Erasure:
    """Erase ``subject`` (a case id, or a ``sha256:`` content digest) and record it.

    ``run_id`` limits a case subject to one run. Raises ``UsageError`` (exit 2)
    when nothing in the store matches; returns with ``entry`` None, recording
    nothing, when everything that matched was already erased.
    """
    engine = store.engine
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "sqlite":
                # Freed pages are zeroed, not left holding the old content.
                connection.exec_driver_sql("PRAGMA secure_delete=ON")
            elif connection.dialect.name == "postgresql":
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(LOCK_KEY)))
            if DIGEST.fullmatch(subject):
                if run_id is not None:
                    raise UsageError("--run applies to a case subject, not a content digest")
                done = _erase_digest(connection, subject)
            else:
                done = _erase_case(connection, subject, run_id)
            if not done.runs and not done.digests:
                return Erasure(subject_digest(subject), (), (), None)
            content: dict[str, Any] = {
                "subject": subject_digest(subject), "runs": sorted(done.runs),
                "digests": sorted(done.digests),
                "erased_at": utc_stamp(now())}
            if done.reports:
                content["reports"] = done.reports
            entry = append_bodies(connection, [("erasure", canonical(content))])[0]
            if key is not None:
                # A signed head over the erasure entry: dropping it later is caught.
                record_head(connection, key)
    except sa.exc.SQLAlchemyError as error:
        # Not the error's text: it can quote the content being erased.
        raise StoreError(f"cannot erase ({type(error).__name__}); nothing was erased") from None
    return Erasure(subject_digest(subject), tuple(sorted(done.runs)),
                   tuple(sorted(done.digests)), entry, scrub(engine))


def _protected(connection: Connection) -> set[str]:
    """Digests of erasure entries' contents: the record of an erasure is not erasable."""
    c = schema.ledger.c
    return set(connection.scalars(sa.select(c.content_digest).where(c.kind == "erasure")))


def _blank_blobs(connection: Connection, digests: Iterable[str]) -> set[str]:
    """Set to NULL the content of those of ``digests`` still held; returns which were."""
    b = schema.blobs.c
    wanted = sorted(set(digests) - _protected(connection))
    held: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        held.update(connection.scalars(sa.select(b.digest).where(
            b.digest.in_(chunk), b.content.is_not(None))))
    if held:
        connection.execute(schema.blobs.update().where(b.digest.in_(sorted(held)))
                           .values(content=None))
    return held


def _runs_referencing(connection: Connection, digests: set[str]) -> set[str]:
    """The runs with a trial whose trace is one of ``digests``."""
    t = schema.trials.c
    found: set[str] = set()
    ordered = sorted(digests)
    for start in range(0, len(ordered), 500):
        found.update(connection.scalars(sa.select(t.run_id).distinct().where(
            t.trace_digest.in_(ordered[start:start + 500]))))
    return found


def _erase_digest(connection: Connection, digest: str) -> _Erased:
    """One blob: its content goes; whatever refers to it (a trial, an entry) stays."""
    b = schema.blobs.c
    held = connection.execute(sa.select(b.digest).where(b.digest == digest)).first()
    if held is None:
        raise UsageError(f"no content {digest} in the store: nothing erased")
    if digest in _protected(connection):
        raise UsageError(f"{digest} is the record of an erasure: it is not erasable")
    erased = _blank_blobs(connection, [digest])
    return _Erased(_runs_referencing(connection, erased) if erased else set(), erased)


def _erase_case(connection: Connection, case_id: str, run_id: str | None) -> _Erased:
    """Every trial of ``case_id`` (in ``run_id`` only, if given): traces, suite, notes."""
    r, t, v = schema.runs.c, schema.trials.c, schema.verdicts.c
    if run_id is not None and connection.execute(
            sa.select(r.run_id).where(r.run_id == run_id)).first() is None:
        raise UsageError(f"no run {run_id} in the store: nothing erased")
    trials = sa.select(t.run_id, t.trace_digest).where(t.case_id == case_id)
    if run_id is not None:
        trials = trials.where(t.run_id == run_id)
    rows = connection.execute(trials).all()
    # The id as the canonical JSON of the documents spells it: a cheap filter,
    # confirmed below by parsing (a run interrupted before the case ran still
    # holds its input in the stored suite).
    needle = canonical(case_id).decode("utf-8")[1:-1]
    documents = sa.select(r.run_id, r.suite, r.report).where(sa.or_(
        r.run_id.in_(sorted({row.run_id for row in rows})),
        r.suite.contains(needle, autoescape=True),
        r.report.contains(needle, autoescape=True),
        # Documents kept in parts are read whole: a needle may straddle two parts.
        r.run_id.in_(in_parts())))
    if run_id is not None:
        documents = documents.where(r.run_id == run_id)
    holding: set[str] = {row.run_id for row in rows}
    reports: dict[str, dict[str, str | None]] = {}
    changed: set[str] = set()
    for doc in connection.execute(documents).all():
        had_suite = read_text(connection, doc.run_id, "suite", doc.suite)
        had_report = read_text(connection, doc.run_id, "report", doc.report)
        suite, suite_hit = _blank_suite(had_suite, case_id)
        report, report_hit = _blank_report(had_report, case_id)
        if suite_hit or report_hit:
            holding.add(doc.run_id)
        update: dict[str, Any] = {}
        if suite is not None and suite != had_suite:
            if doc.suite is None:  # kept in parts: rewritten in parts
                write_parts(connection, doc.run_id, "suite", suite)
            else:
                update["suite"] = suite
            changed.add(doc.run_id)
        if report is not None and had_report is not None and report != had_report:
            if doc.report is None:
                write_parts(connection, doc.run_id, "report", report)
            else:
                update["report"] = report
            reports[doc.run_id] = {"before": _sealed_digest(had_report),
                                   "after": _sealed_digest(report)}
            update["report_digest"] = "sha256:" + hashlib.sha256(
                report.encode("utf-8")).hexdigest()
            changed.add(doc.run_id)
        if update:
            connection.execute(schema.runs.update().where(r.run_id == doc.run_id)
                               .values(**update))
    if not holding:
        where = f" in run {run_id}" if run_id is not None else ""
        raise UsageError(f"no case {case_id} and no content with that digest{where} "
                         "in the store: nothing erased")
    for run in sorted(holding):
        notes = connection.execute(
            schema.verdicts.update()
            .where(v.run_id == run, v.case_id == case_id,
                   sa.or_(v.note != "", v.assertion != v.check))
            .values(note="", assertion=v.check))
        reasons = connection.execute(
            schema.trials.update()
            .where(t.run_id == run, t.case_id == case_id, t.reason.is_not(None), t.reason != "")
            .values(reason=""))
        if notes.rowcount or reasons.rowcount:
            changed.add(run)
    texts = _opinion_texts(connection, case_id, run_id) | _review_texts(connection, case_id,
                                                                          run_id)
    erased = _blank_blobs(connection, {row.trace_digest for row in rows if row.trace_digest}
                          | texts)
    # A trace shared with another run (identical bytes) is the same content: it
    # goes too, and that run is named as touched.
    return _Erased(changed | _runs_referencing(connection, erased), erased, reports)


def _review_texts(connection: Connection, case_id: str, run_id: str | None) -> set[str]:
    """The digests of reviewers' notes on the case's queued trials, and of sampled traces.

    The ``review`` entries stay: they name the note by digest only. A queued
    trial's reason is blanked with its trial's.
    """
    q = schema.review_items.c
    where = [q.case_id == case_id] + ([q.run_id == run_id] if run_id is not None else [])
    connection.execute(schema.review_items.update().where(*where, q.reason.is_not(None))
                       .values(reason=""))
    found: set[str] = set()
    for note, trace in connection.execute(sa.select(q.note_digest, q.trace_digest).where(*where)):
        found.update(d for d in (note, trace) if d)
    return found


def _opinion_texts(connection: Connection, case_id: str, run_id: str | None) -> set[str]:
    """The digests of what judges answered about the case (their raw answers quote it).

    The opinions themselves (``judge-opinion`` contents: model, prompt digest,
    tokens) stay: they are what was decided, and name the answers by digest only.
    """
    from .runs.trials import OPINION_TEXTS

    o, b = schema.opinions.c, schema.blobs.c
    query = (sa.select(b.content).join(schema.opinions, o.content_digest == b.digest)
             .where(o.case_id == case_id))
    if run_id is not None:
        query = query.where(o.run_id == run_id)
    found: set[str] = set()
    for content in connection.scalars(query):
        try:
            data = json.loads(content) if content is not None else None
        except ValueError:
            continue
        if isinstance(data, dict):
            found.update(data[name] for name in OPINION_TEXTS if isinstance(data.get(name), str))
    return found


#: What a conversation's erased messages read in the stored suite (a message is never empty).
ERASED = "(erased)"


def _blank_suite(text: str | None, case_id: str) -> tuple[str | None, bool]:
    """The stored suite with the case's input, arguments and paths nulled; and whether it held it.

    The case is listed in the document's top-level ``"erased"``: ``Case``
    forbids extra keys, and ``load_stored_suite`` reads only ``suite`` and ``files``.
    """
    if text is None:
        return None, False
    data = json.loads(text)
    hit = False
    for case in data.get("suite", {}).get("cases", []):
        if case.get("id") != case_id:
            continue
        hit = True
        case["input"] = None
        if "expected" in case:  # the judges' reference is the case's content too
            case["expected"] = None
        for assertion in case.get("expect", []):
            assertion["arg"] = None
            assertion["path"] = None
        # A conversation's scripted messages and a simulated user's instructions (SPEC §16)
        # stand in place, so the stored case still loads as the conversation it was.
        if isinstance(case.get("turns"), list):
            case["turns"] = [ERASED] * len(case["turns"])
        if isinstance(case.get("user"), dict) and "instructions" in case["user"]:
            case["user"]["instructions"] = ERASED
    if not hit:
        return text, False
    data["erased"] = sorted({*data.get("erased", []), case_id})
    return canonical(data).decode("utf-8"), True


def _check_name(label: str) -> str:
    """A label (``check path``) reduced to its check: the path can quote data."""
    return label.split(" ", 1)[0]


def _blank_report(text: str | None, case_id: str) -> tuple[str | None, bool]:
    """The stored report with the case's notes, reasons and labels blanked; whether it held it.

    Written back as the recorder writes a report (the model's JSON), so the
    bytes stay what ``report_digest`` hashes; a report the model cannot read
    is still blanked, as canonical JSON.
    """
    if text is None:
        return None, False
    data = json.loads(text)
    hit = False
    for case in data.get("cases", []):
        if case.get("id") != case_id:
            continue
        hit = True
        if case.get("reason"):
            case["reason"] = ""
        for rate in case.get("quality", []):
            rate["assertion"] = _check_name(rate["assertion"])
        for trial in case.get("trials", []):
            if trial.get("reason"):
                trial["reason"] = ""
            for verdict in trial.get("verdicts", []):
                verdict["note"] = ""
                verdict["assertion"] = verdict.get("check") or _check_name(verdict["assertion"])
            for turn in trial.get("turns") or []:  # a conversation's messages (SPEC §16)
                for said in ("user", "reply"):
                    if turn.get(said):
                        turn[said] = ""
    if not hit:
        return text, False
    try:
        return Report.model_validate(data).model_dump_json(by_alias=True), True
    except ValueError:
        return canonical(data).decode("utf-8"), True


def _sealed_digest(text: str) -> str | None:
    """What replay compares with the run-sealed entry: ``report_digest`` of the stored report."""
    try:
        return report_digest(Report.model_validate_json(text))
    except ValueError:
        return None


def scrub(engine: Engine) -> bool:
    """Rewrite the database so erased content is not left in free pages; True if it completed.

    SQLite: ``VACUUM`` (with ``secure_delete``), then in WAL mode
    ``wal_checkpoint(TRUNCATE)``, which fails (returns busy) while another
    connection reads. PostgreSQL: ``VACUUM`` of the touched tables, which
    makes dead row versions' space reusable but does not zero it, and cannot
    reach WAL segments or backups already taken. Outside any transaction.
    """
    try:
        if engine.dialect.name == "sqlite":
            return _scrub_sqlite(engine)
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.exec_driver_sql("VACUUM " + ", ".join(_TOUCHED))
    except (sa.exc.SQLAlchemyError, sqlite3.Error):
        return False
    return True


def _scrub_sqlite(engine: Engine) -> bool:
    """VACUUM and truncate the WAL on a raw connection in autocommit mode.

    Raw, because the store may open every SQLAlchemy transaction with
    ``BEGIN IMMEDIATE`` and ``VACUUM`` refuses to run inside one.
    """
    raw = engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        saved = driver.isolation_level
        driver.isolation_level = None  # autocommit: no implicit BEGIN
        try:
            driver.execute("PRAGMA secure_delete=ON")
            driver.execute("VACUUM")
            mode = driver.execute("PRAGMA journal_mode").fetchone()
            if mode is not None and str(mode[0]).lower() == "wal":
                busy = driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                return busy is not None and int(busy[0]) == 0
            return True
        finally:
            driver.isolation_level = saved
    finally:
        raw.close()

"""The database store: open (and migrate), save a run, list runs, load a report.

SQLite at ``.assay/assay.db`` is the embedded default; a URL such as
``postgresql+psycopg://…`` gives a team one shared store (DESIGN "Scale").
Every run is written in one transaction with ``executemany`` batches, so the
store does not become the bottleneck of a fast battery.

The store keeps the FULL report, hidden cases included, because replay needs
them; every outward surface must pass what it loads through
``grading.redact`` (PRINCIPLES 5).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..canonical import digest_bytes
from ..errors import HarnessFailure, UsageError
from ..install_hints import extra
from . import schema
from .ledger.book import Ledger
from .revision import HEAD_REVISION
from .runs.texts import read_pieces, read_text
from .runs.trials import OPINION_TEXTS, Holder

if TYPE_CHECKING:  # the models are imported where used: the writer process never needs them
    from ..model.result import Report, TrialResult
    from ..model.trace import Trace
    from ..model.turns import TurnSummary

DEFAULT_URL = "sqlite:///.assay/assay.db"
_MIGRATIONS = Path(__file__).parent / "migrations"
#: How long a SQLite connection waits for another's lock before giving up.
BUSY_TIMEOUT_S = 30.0
#: The PostgreSQL advisory lock key that serializes creating a new store ("assay-sc").
SCHEMA_LOCK_KEY: Final = 0x61737361792D7363

#: Alembic's version table, as Alembic defines it (``DefaultImpl.version_table_impl``):
#: a store created and stamped here is indistinguishable from one Alembic made.
_ALEMBIC_VERSION = sa.Table(
    "alembic_version", sa.MetaData(),
    sa.Column("version_num", sa.String(32), nullable=False),
    sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


class StoreError(HarnessFailure):
    """The store could not be opened or written (exit 3).

    Messages name the run and the kind of failure, never row values: a
    database error's text can quote a hidden case's content.
    """


class StoredTwice(StoreError):
    """A write the store's keys refused: a run id, a trial or a battery's window held already."""


@dataclass(frozen=True)
class RunSummary:
    """One line of ``assay runs``: what ran, against what, and how it scored."""

    run_id: str
    suite_id: str
    target_uri: str
    started_at: str
    finished_at: str
    public: float | None
    hidden: float | None
    overall: float | None
    passed: bool | None
    interrupted: bool | None
    #: ``open`` (recording, or stopped part-way: resumable) or ``sealed``.
    status: str = "sealed"


@dataclass(frozen=True)
class StoredTrial:
    """One ``trials`` row and its trace's bytes (None: no trace, or content erased)."""

    case_id: str
    n: int
    outcome: str
    trace_digest: str | None
    trace: bytes | None


@dataclass(frozen=True)
class StoredVerdict:
    """The part of one ``verdicts`` row that replay recomputes."""

    case_id: str
    n: int
    position: int
    outcome: str
    evidence: str


@dataclass(frozen=True)
class StoredRun:
    """A run as replay reads it: report and suite JSON (suite None before 0003), rows."""

    run_id: str
    report: str
    suite: str | None
    trials: list[StoredTrial]
    verdicts: list[StoredVerdict]
    #: What judges said, by (case id, n) and assertion position (``load_opinions``).
    opinions: dict[tuple[str, int], dict[int, list[Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class OpenRun:
    """A stored run as registered: what a resume must run the same way."""

    run_id: str
    suite_id: str
    suite_digest: str
    hidden_set: str | None
    target_uri: str
    target_digest: str
    seed: int | None
    started_at: str
    trials_per_case: int
    options: dict[str, Any]
    status: str


@dataclass(frozen=True)
class StoredBattery:
    """A sealed, whole battery of one suite id, as ``Store.batteries`` lists them."""

    run_id: str
    target_uri: str
    target_digest: str
    started_at: str
    #: The window's size and start (``24h``, ``2025-01-06T00:00:00Z``); None for a run
    #: that was not started with ``--window``.
    window_size: str | None
    window_start: str | None

    @property
    def window(self) -> str | None:
        """Size and start in one word (``24h@2025-01-06T00:00:00Z``), as ``Window.label``."""
        if self.window_size is None:
            return None
        return f"{self.window_size}@{self.window_start}"


def _missing_driver(error: ImportError) -> str:
    """The database driver a URL needs is not installed: name it, and how to get it."""
    driver = (error.name or "").partition(".")[0]
    if driver == "psycopg":
        return extra("postgres", "psycopg")
    return f"cannot use this database URL: its driver {driver or '(unknown)'} is not installed"


def open_store(url: str | None = None) -> Store:
    """Open the store at ``url`` (default: SQLite in ``.assay/``) and migrate it to head."""
    if not url:
        Path(".assay").mkdir(exist_ok=True)
        url = DEFAULT_URL
    try:
        engine = sa.create_engine(url)
    except ImportError as error:
        raise UsageError(f"--db: {_missing_driver(error)}") from None
    except sa.exc.ArgumentError as error:
        raise UsageError(f"--db: cannot use this database URL ({type(error).__name__})") from None
    database = engine.url.database
    if engine.url.get_backend_name() == "sqlite" and database and database != ":memory:":
        # A SQLite file in a folder that does not exist yet: make the folder, as
        # the default store does with .assay/.
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    if engine.url.get_backend_name() == "sqlite":
        _tune_sqlite(engine)
    store = Store(engine)
    try:
        store.migrate()
    except sa.exc.SQLAlchemyError as error:
        engine.dispose()
        reason = str(getattr(error, "orig", None) or type(error).__name__).splitlines()[0]
        raise StoreError(f"cannot open the store: {reason}") from None
    return store


def _tune_sqlite(engine: Engine) -> None:
    """WAL, a busy timeout and ``BEGIN IMMEDIATE`` for every transaction on a SQLite store.

    WAL lets readers (``assay runs``, the workbench) read while a battery
    writes, and ``synchronous=NORMAL`` keeps a commit durable against a
    crashed or killed process (only a power cut can lose the last batches).
    Taking the write lock at ``BEGIN`` makes two writers queue (up to the busy
    timeout) instead of failing when a read lock cannot be upgraded; the
    pysqlite driver's own transaction handling is switched off for that, as
    SQLAlchemy's documentation describes.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # synchronous first: switching a new file to WAL is itself a rollback-journal
        # write, and under NORMAL it syncs one time fewer (no change for a WAL store).
        cursor.execute("PRAGMA synchronous = NORMAL")
        _to_wal(cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _to_wal(cursor: Any) -> None:
    """Switch the file to WAL, waiting out another process that is switching it too.

    Two processes opening one brand-new file at once (three ``assay run``
    racing for a window, CI jobs sharing a store) both ask for WAL; SQLite
    answers one of them "database is locked" at once, without its busy
    handler, since waiting could deadlock. The switch is then retried for as
    long as the busy timeout would have waited; by then the other process
    has made the file WAL and the pragma is a no-op.
    """
    import sqlite3
    import time

    pause, waited = 0.002, 0.0
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or waited >= BUSY_TIMEOUT_S:
                raise
        time.sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.1)


def _table_names(connection: Connection) -> set[str] | None:
    """The database's table names; None when it is new (holds nothing).

    SQLite answers from ``sqlite_master`` in one query, and is new only with no
    schema object at all (an index, view or trigger alone makes it not new).
    Other databases answer through SQLAlchemy's inspector, and are new with no
    table in the default schema, the one Alembic would migrate.
    """
    if connection.dialect.name == "sqlite":
        rows = connection.execute(sa.text("SELECT type, name FROM sqlite_master")).all()
        return {name for kind, name in rows if kind == "table"} if rows else None
    return set(sa.inspect(connection).get_table_names()) or None


def _create_at_head(connection: Connection) -> None:
    """Create every table of ``schema.metadata`` and stamp it at ``HEAD_REVISION``.

    In the caller's transaction, so that a store is never seen half made.
    ``checkfirst=False``: the caller saw no table, and a table made since by
    someone else must fail this creation (rolled back), not be taken as ours.
    A test holds this schema equal to the one the revisions build.
    """
    schema.metadata.create_all(connection, checkfirst=False)
    _ALEMBIC_VERSION.create(connection, checkfirst=False)
    connection.execute(_ALEMBIC_VERSION.insert().values(version_num=HEAD_REVISION))


#: How long a settled connection's log may grow before a commit checkpoints it (pages;
#: SQLite's own default is 1,000): a few seals' reports, and what a busy writer leaves
#: for its close to move.
SETTLED_CHECKPOINT_PAGES = 4_000


class Store:
    """Runs, trials, verdicts and trace blobs in one database (PRINCIPLES 8)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ledger = Ledger(engine)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def settle(self) -> None:
        """Between writes, with nothing waiting: copy SQLite's write-ahead log into the
        database now (a passive checkpoint, which waits for nobody), rather than in
        whichever commit takes the log past its limit; and raise this connection's limit
        from SQLite's 1,000 pages to ``SETTLED_CHECKPOINT_PAGES``. The writer process
        calls it when it opens the store and whenever it is idle, so that the seal's
        commit does not pay for the run's log (decision 0087). A no-op on PostgreSQL;
        a checkpoint that cannot run is skipped."""
        if self.engine.dialect.name != "sqlite":
            return
        raw = self.engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            # Its own commits then leave the log to these checkpoints, up to a limit.
            driver.execute(f"PRAGMA wal_autocheckpoint = {SETTLED_CHECKPOINT_PAGES}")
            driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except Exception:  # noqa: BLE001 - only sooner than SQLite would do it anyway
            return
        finally:
            raw.close()

    def migrate(self) -> None:
        """Bring the schema to the newest revision; a no-op when it is already there.

        Neither a store already at ``HEAD_REVISION`` nor a brand-new, empty
        database imports Alembic. The first is recognised by its version row; the
        second is created at head from ``schema.metadata`` and stamped, as
        Alembic's documentation advises for a new database: replaying the four
        revisions (importing Alembic, then rebuilding ``runs`` in 0004) took a
        fifth of a second or more, on the critical path of a first ``assay
        run`` (docs/decisions/0024-fresh-store.md). A store at an older
        revision, or a database holding any table at all, is migrated by
        Alembic as before.
        """
        with self.engine.begin() as connection:
            tables = _table_names(connection)
            if tables is None and connection.dialect.name == "postgresql":
                # SQLite's BEGIN IMMEDIATE already made this transaction the only
                # writer; on PostgreSQL two first opens queue here, and the second
                # then sees the first one's tables.
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
                tables = _table_names(connection)
            if tables is None:
                _create_at_head(connection)
                return
            if "alembic_version" in tables and connection.scalar(
                    sa.text("SELECT version_num FROM alembic_version")) == HEAD_REVISION:
                return
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    @contextmanager
    def writing(self, run_id: str) -> Iterator[Connection]:
        """One write transaction for ``run_id``; database errors become ``StoreError`` (exit 3)."""
        try:
            with self.engine.begin() as connection:
                yield connection
        except sa.exc.IntegrityError:
            raise StoredTwice(f"run {run_id}: already stored, or a trial "
                             "(run, case, trial index) stored twice") from None
        except sa.exc.SQLAlchemyError as error:
            raise StoreError(f"run {run_id}: cannot save ({type(error).__name__})") from None

    def runs(self) -> list[RunSummary]:
        """Every stored run, oldest first."""
        r = schema.runs.c
        query = sa.select(r.run_id, r.suite_id, r.target_uri, r.started_at, r.finished_at,
                          r.score_public, r.score_hidden, r.score_overall, r.passed,
                          r.interrupted, r.status).order_by(r.started_at, r.run_id)
        with self.engine.connect() as connection:
            return [RunSummary(row.run_id, row.suite_id, row.target_uri, row.started_at,
                               row.finished_at, row.score_public, row.score_hidden,
                               row.score_overall,
                               None if row.passed is None else bool(row.passed),
                               None if row.interrupted is None else bool(row.interrupted),
                               row.status)
                    for row in connection.execute(query)]

    def load_replay(self, run_id: str) -> StoredRun:
        """What replay needs of a run: its report and suite JSON, trial and verdict rows.

        Trace contents come with their trial (None when the trial has no trace
        or its content was erased); nothing here is redacted.
        """
        r, t, v, b = schema.runs.c, schema.trials.c, schema.verdicts.c, schema.blobs.c
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(r.report, r.suite)
                                     .where(r.run_id == run_id)).first()
            if row is None:
                raise UsageError(f"no run {run_id} in the store")
            trials = [StoredTrial(x.case_id, x.n, x.outcome, x.trace_digest, x.content)
                      for x in connection.execute(
                          sa.select(t.case_id, t.n, t.outcome, t.trace_digest, b.content)
                          .outerjoin(schema.blobs, b.digest == t.trace_digest)
                          .where(t.run_id == run_id).order_by(t.id))]
            verdicts = [StoredVerdict(x.case_id, x.n, x.position, x.outcome, x.evidence)
                        for x in connection.execute(
                            sa.select(v.case_id, v.n, v.position, v.outcome, v.evidence)
                            .where(v.run_id == run_id).order_by(v.id))]
            opinions = _opinions(connection, run_id)
            # An open run has no report yet: replay says so where it reads it.
            report = read_text(connection, run_id, "report", row.report) or ""
            suite = read_text(connection, run_id, "suite", row.suite)
        return StoredRun(run_id, report, suite, trials, verdicts, opinions)

    def load_report(self, run_id: str) -> Report:
        """The FULL report of a run, with each trial's trace; redact before showing it."""
        from ..model.result import CaseResult, Report
        from ..model.trace import Trace

        t, b, r = schema.trials.c, schema.blobs.c, schema.runs.c
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(r.report, r.status, r.seal_entry, r.seal_hash)
                                     .where(r.run_id == run_id)).first()
            if row is None:
                raise UsageError(f"no run {run_id} in the store")
            body = read_text(connection, run_id, "report", row.report)
            if body is None:
                raise UsageError(f"run {run_id} is not sealed: it stopped part-way "
                                 f"(resume it with `assay run --resume {run_id}`)")
            query = (sa.select(t.case_id, t.n, b.content)
                     .join(schema.blobs, b.digest == t.trace_digest)
                     .where(t.run_id == run_id))
            traces = {(row.case_id, row.n): row.content for row in connection.execute(query)}
        report = Report.model_validate_json(body)
        if row.seal_entry is not None:
            report.seal = {"entry": int(row.seal_entry), "hash": row.seal_hash}
        for case in report.cases:
            if isinstance(case, CaseResult):
                for trial in case.trials:
                    content = traces.get((case.id, trial.n))
                    if content is not None:
                        trial.trace = Trace.model_validate_json(content)
        return report

    def report_document(self, run_id: str) -> tuple[str, str | None, dict[str, Any] | None]:
        """A run's status, its FULL report's stored JSON (None while open) and its seal.

        The text as stored, not a model: ``assay compare`` and ``assay gate``
        read two 10,000-case reports in well under a second, which validating
        them as models and loading every trace would not allow.
        """
        r = schema.runs.c
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(r.report, r.status, r.seal_entry, r.seal_hash)
                                     .where(r.run_id == run_id)).first()
            if row is None:
                raise UsageError(f"no run {run_id} in the store")
            body = read_text(connection, run_id, "report", row.report)
        seal = (None if row.seal_entry is None
                else {"entry": int(row.seal_entry), "hash": row.seal_hash})
        return row.status, body, seal

    def run_status(self, run_id: str) -> tuple[str, dict[str, Any] | None]:
        """A run's status and its seal (None while open); ``UsageError`` for no such run."""
        r = schema.runs.c
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(r.status, r.seal_entry, r.seal_hash)
                                     .where(r.run_id == run_id)).first()
        if row is None:
            raise UsageError(f"no run {run_id} in the store")
        return row.status, (None if row.seal_entry is None
                            else {"entry": int(row.seal_entry), "hash": row.seal_hash})

    def report_pieces(self, run_id: str) -> Iterator[str]:
        """A sealed run's FULL report's stored JSON a part at a time (``run_texts``).

        For a reader that goes through it once (a queue's submitter reading
        the report its workers sealed): a large one is never held whole.
        Nothing while the run is open.
        """
        r = schema.runs.c
        with self.engine.connect() as connection:
            inline = connection.scalar(sa.select(r.report).where(r.run_id == run_id))
            yield from read_pieces(connection, run_id, "report", inline)

    def window_holder(self, suite_id: str, target_digest: str, size: str,
                      start: str) -> Holder | None:
        """The run that holds this battery's window (open or sealed), if any."""
        r = schema.runs.c
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(r.run_id, r.status).where(
                r.suite_id == suite_id, r.target_digest == target_digest,
                r.window_size == size, r.window_start == start)).first()
        return None if row is None else Holder(row.run_id, row.status)

    def batteries(self, suite_id: str, target_digest: str | None = None, *,
                  target_uri: str | None = None, limit: int | None = None
                  ) -> list[StoredBattery]:
        """The sealed, whole batteries of a suite id, newest first (what ``assay drift`` reads).

        Only this agent version (``target_digest``) or target URI when given.
        Newest by when they started (``started_at``, then run id). Runs with and
        without a window are both listed (``window`` says which); an open run is
        not (it has no report yet), nor an interrupted one (sealed with what it
        had, it is no battery).
        """
        r = schema.runs.c
        query = (sa.select(r.run_id, r.target_uri, r.target_digest, r.started_at,
                           r.window_size, r.window_start)
                 .where(r.suite_id == suite_id, r.status == "sealed",
                        sa.or_(r.interrupted.is_(None), r.interrupted == sa.false()))
                 .order_by(r.started_at.desc(), r.run_id.desc()))
        if target_digest is not None:
            query = query.where(r.target_digest == target_digest)
        if target_uri is not None:
            query = query.where(r.target_uri == target_uri)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            return [StoredBattery(row.run_id, row.target_uri, row.target_digest, row.started_at,
                                  row.window_size, row.window_start)
                    for row in connection.execute(query)]

    def open_run(self, run_id: str) -> OpenRun:
        """What ``assay run --resume`` needs of a run: how it was registered, and its status."""
        r = schema.runs.c
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(
                r.run_id, r.suite_id, r.suite_digest, r.hidden_set, r.target_uri,
                r.target_digest, r.seed, r.started_at, r.trials_per_case, r.options, r.status,
            ).where(r.run_id == run_id)).first()
        if row is None:
            raise UsageError(f"no run {run_id} in the store")
        return OpenRun(row.run_id, row.suite_id, row.suite_digest, row.hidden_set,
                       row.target_uri, row.target_digest, row.seed, row.started_at,
                       row.trials_per_case, json.loads(row.options or "{}"), row.status)

    def load_trials(self, run_id: str, cases: Collection[str] | None = None, *,
                    for_folding: bool = False) -> dict[tuple[str, int], TrialResult]:
        """Every recorded trial of a run, rebuilt whole (verdicts, usage, trace) by (case, n).

        ``cases``: only the trials of these case ids (a queue worker's chunk).
        ``for_folding``: only what folding reads (a queue's seal): of each trace, only
        the model that answered (``grading.fold``) and a conversation's turns (the
        report keeps their summary), not the whole trace. (Opinions are read: the
        report's cost counts what the judges cost.)
        """
        from ..model.result import TrialResult, Verdict
        from ..model.trace import Trace, Usage
        from ..model.turns import summary

        t, v, b = schema.trials.c, schema.verdicts.c, schema.blobs.c
        some_v = () if cases is None else (v.case_id.in_(sorted(cases)),)
        some_t = () if cases is None else (t.case_id.in_(sorted(cases)),)
        verdicts: dict[tuple[str, int], list[Verdict]] = {}
        results: dict[tuple[str, int], TrialResult] = {}
        with self.engine.connect() as connection:
            for x in connection.execute(
                    sa.select(v.case_id, v.n, v.assertion, v.check, v.family, v.outcome,
                              v.evidence, v.note, v.provenance, v.threshold, v.score)
                    .where(v.run_id == run_id, *some_v).order_by(v.case_id, v.n, v.position)):
                verdicts.setdefault((x.case_id, x.n), []).append(Verdict(
                    assertion=x.assertion, check=x.check, family=x.family, outcome=x.outcome,
                    evidence=x.evidence, note=x.note, provenance=x.provenance,
                    threshold=x.threshold, score=x.score))
            opinions = _opinions(connection, run_id, cases=cases)
            for y in connection.execute(
                    sa.select(t.case_id, t.n, t.outcome, t.reason, t.duration_s, t.usage,
                              b.content)
                    .outerjoin(schema.blobs, b.digest == t.trace_digest)
                    .where(t.run_id == run_id, *some_t)):
                turns = None
                if y.content is None:
                    trace = None
                elif for_folding:
                    trace, turns = _served_model(y.content)
                else:
                    trace = Trace.model_validate_json(y.content)
                    turns = summary(trace)
                results[(y.case_id, y.n)] = TrialResult(
                    n=y.n, outcome=y.outcome, reason=y.reason, duration_s=y.duration_s,
                    usage=Usage.model_validate(y.usage),
                    verdicts=verdicts.get((y.case_id, y.n), []), trace=trace,
                    opinions=opinions.get((y.case_id, y.n), {}), turns=turns)
        return results


def _served_model(content: bytes) -> tuple[Trace | None, list[TurnSummary] | None]:
    """A stand-in trace holding what a seal's tally reads of a stored trace (or None): the
    model its facets name, its usage and evidence (the report's cost evidence), and its
    simulated user's record (SPEC §16: the report's cost counts what that spent); and the
    summary of its turns when it is a conversation (the report keeps it)."""
    from ..model.trace import Trace
    from ..model.turns import TURN_KINDS, summary

    try:
        stored = json.loads(content)
        facets = stored.get("facets")
    except (ValueError, AttributeError):
        return None, None
    model = facets.get("model") if isinstance(facets, dict) else None
    served = Trace(facets={"model": model}) if isinstance(model, str) else None
    kept = {key: stored[key] for key in ("usage", "evidence", "simulator") if key in stored}
    if kept:  # a record this version does not read: the model alone, as before
        with contextlib.suppress(ValueError):
            served = Trace(facets={"model": model} if isinstance(model, str) else {}, **kept)
    events = stored.get("events")
    if not isinstance(events, list) or not any(
            isinstance(e, dict) and e.get("kind") in TURN_KINDS for e in events):
        return served, None
    try:
        return served, summary(Trace.model_validate({"events": events}))
    except ValueError:  # events this version does not read: no summary, as with no trace
        return served, None


def _opinions(connection: Connection, run_id: str, *, case_id: str | None = None,
              n: int | None = None, cases: Collection[str] | None = None
              ) -> dict[tuple[str, int], dict[int, list[Any]]]:
    """A run's opinions, rebuilt, by (case id, n) and assertion position, answers in order.

    ``case_id`` and ``n`` keep one trial's (the workbench's trial page reads
    one trial, not the whole run).

    Each is its ``judge-opinion`` content with the raw answer read back from
    its blob. A raw answer whose bytes no longer match their digest (edited,
    or erased) comes back with no text and an error saying so: a verdict read
    from it is inconclusive, and replay shows the difference.
    """
    o, b = schema.opinions.c, schema.blobs.c
    rows = connection.execute(
        sa.select(o.case_id, o.n, o.position, o.item, o.content_digest, b.content)
        .outerjoin(schema.blobs, b.digest == o.content_digest)
        .where(o.run_id == run_id,
               *(() if case_id is None else (o.case_id == case_id,)),
               *(() if n is None else (o.n == n,)),
               *(() if cases is None else (o.case_id.in_(sorted(cases)),)))
        .order_by(o.case_id, o.n, o.position, o.item)).all()
    if not rows:
        return {}
    contents: list[tuple[Any, dict[str, Any] | None]] = []
    wanted: set[str] = set()
    for row in rows:
        try:
            # Content that no longer matches its digest (the ledger's) is no opinion.
            data = json.loads(row.content) if row.content is not None \
                and digest_bytes(bytes(row.content)) == row.content_digest else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            for name in OPINION_TEXTS:
                if isinstance(data.get(name), str):
                    wanted.add(data[name])
        contents.append((row, data if isinstance(data, dict) else None))
    texts: dict[str, bytes | None] = {}
    for chunk in _chunks(sorted(wanted), 500):
        texts.update({x.digest: x.content for x in connection.execute(
            sa.select(b.digest, b.content).where(b.digest.in_(chunk)))})
    found: dict[tuple[str, int], dict[int, list[Any]]] = {}
    for row, data in contents:
        opinion = _opinion(data, texts)
        found.setdefault((row.case_id, row.n), {}).setdefault(row.position, []).append(opinion)
    return found


def _opinion(data: dict[str, Any] | None, texts: dict[str, bytes | None]) -> Any:
    """One stored opinion rebuilt, its long texts read back and checked against their digests."""
    from ..judging.opinion import Opinion

    lost = Opinion(raw=None, model="unknown", prompt_digest="",
                   error="the stored opinion is missing")
    if data is None:
        return lost
    fields = dict(data)
    problem = None
    for name in OPINION_TEXTS:
        named = fields.get(name)
        if not isinstance(named, str):
            fields[name] = None
            continue
        content = texts.get(named)
        if content is None or digest_bytes(content) != named:
            fields[name] = None
            problem = f"the stored {name} answer is missing or does not match its digest"
        else:
            fields[name] = content.decode("utf-8", "surrogatepass")
    try:
        opinion = Opinion.from_json(fields)
    except ValueError:
        return lost
    if problem is not None:
        from dataclasses import replace

        opinion = replace(opinion, raw=None, error=problem)
    return opinion


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]

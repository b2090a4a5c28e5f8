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

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..canonical import canonical
from ..errors import HarnessFailure, UsageError
from ..model.result import CaseResult, Report
from ..model.trace import Trace
from . import schema
from .blobs import put_blobs
from .ledger import Ledger

DEFAULT_URL = "sqlite:///.assay/assay.db"
_MIGRATIONS = Path(__file__).parent / "migrations"


class StoreError(HarnessFailure):
    """The store could not be opened or written (exit 3).

    Messages name the run and the kind of failure, never row values: a
    database error's text can quote a hidden case's content.
    """


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
    passed: bool
    interrupted: bool


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


def open_store(url: str | None = None) -> Store:
    """Open the store at ``url`` (default: SQLite in ``.assay/``) and migrate it to head."""
    if not url:
        Path(".assay").mkdir(exist_ok=True)
        url = DEFAULT_URL
    try:
        engine = sa.create_engine(url)
    except (sa.exc.ArgumentError, ImportError) as error:
        raise UsageError(f"--db: cannot use this database URL ({type(error).__name__})") from None
    database = engine.url.database
    if engine.url.get_backend_name() == "sqlite" and database and database != ":memory:":
        # A SQLite file in a folder that does not exist yet: make the folder, as
        # the default store does with .assay/.
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    store = Store(engine)
    try:
        store.migrate()
    except sa.exc.SQLAlchemyError as error:
        engine.dispose()
        reason = str(getattr(error, "orig", None) or type(error).__name__).splitlines()[0]
        raise StoreError(f"cannot open the store: {reason}") from None
    return store


class Store:
    """Runs, trials, verdicts and trace blobs in one database (PRINCIPLES 8)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ledger = Ledger(engine)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def migrate(self) -> None:
        """Bring the schema to the newest revision; a no-op when it is already there."""
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    @contextmanager
    def _writing(self, run_id: str) -> Iterator[Connection]:
        try:
            with self.engine.begin() as connection:
                yield connection
        except sa.exc.IntegrityError:
            raise StoreError(f"run {run_id}: already stored, or a trial "
                             "(run, case, trial index) stored twice") from None
        except sa.exc.SQLAlchemyError as error:
            raise StoreError(f"run {run_id}: cannot save ({type(error).__name__})") from None

    def save_run(self, report: Report, suite: dict[str, Any] | None = None) -> None:
        """Store the FULL report of a run, its trials, verdicts and traces, in one transaction.

        ``suite`` is the suite that ran (``recording.stored_suite``): replay
        re-grades the traces with it, so a run saved without one cannot be replayed.
        """
        body = canonical(report.to_json_dict())
        trials: list[dict[str, Any]] = []
        verdicts: list[dict[str, Any]] = []
        blobs: dict[str, bytes] = {}
        for case in report.cases:
            if not isinstance(case, CaseResult):
                continue  # a redacted report has no trials left to keep
            for trial in case.trials:
                trace_digest = None
                if trial.trace is not None:
                    # Output an agent returned that JSON cannot hold is kept as its repr.
                    content = canonical(trial.trace.model_dump(mode="json", fallback=repr))
                    trace_digest = "sha256:" + hashlib.sha256(content).hexdigest()
                    blobs.setdefault(trace_digest, content)
                trials.append({
                    "run_id": report.run_id, "case_id": case.id, "split": case.split,
                    "n": trial.n, "outcome": trial.outcome, "reason": trial.reason,
                    "duration_s": trial.duration_s, "usage": trial.usage.model_dump(mode="json"),
                    "trace_digest": trace_digest,
                })
                verdicts.extend({
                    "run_id": report.run_id, "case_id": case.id, "n": trial.n,
                    "position": i, "assertion": v.assertion, "check": v.check,
                    "family": v.family, "outcome": v.outcome, "evidence": str(v.evidence),
                    "note": v.note, "provenance": v.provenance, "threshold": v.threshold,
                } for i, v in enumerate(trial.verdicts))
        scores = report.scores
        run = {
            "run_id": report.run_id, "suite_id": report.suite.id,
            "suite_digest": report.suite.digest, "hidden_set": report.suite.hidden_set,
            "hidden_source": report.suite.hidden_source, "target_uri": report.target.uri,
            "target_digest": report.target.digest, "target_facets": report.target.facets,
            "seed": report.seed, "started_at": report.started_at,
            "finished_at": report.finished_at, "trials_per_case": report.trials_per_case,
            "pass_mark": scores.pass_mark, "score_public": scores.public,
            "score_hidden": scores.hidden, "score_overall": scores.overall,
            "passed": scores.passed, "interrupted": report.interrupted,
            "report": body.decode("utf-8"),
            "report_digest": "sha256:" + hashlib.sha256(body).hexdigest(),
            "suite": None if suite is None else canonical(suite).decode("utf-8"),
        }
        with self._writing(report.run_id) as connection:
            connection.execute(schema.runs.insert(), run)
            put_blobs(connection, blobs)
            if trials:
                connection.execute(schema.trials.insert(), trials)
            if verdicts:
                connection.execute(schema.verdicts.insert(), verdicts)

    def runs(self) -> list[RunSummary]:
        """Every stored run, oldest first."""
        r = schema.runs.c
        query = sa.select(r.run_id, r.suite_id, r.target_uri, r.started_at, r.finished_at,
                          r.score_public, r.score_hidden, r.score_overall, r.passed,
                          r.interrupted).order_by(r.started_at, r.run_id)
        with self.engine.connect() as connection:
            return [RunSummary(row.run_id, row.suite_id, row.target_uri, row.started_at,
                               row.finished_at, row.score_public, row.score_hidden,
                               row.score_overall, bool(row.passed), bool(row.interrupted))
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
        return StoredRun(run_id, row.report, row.suite, trials, verdicts)

    def load_report(self, run_id: str) -> Report:
        """The FULL report of a run, with each trial's trace; redact before showing it."""
        t, b = schema.trials.c, schema.blobs.c
        with self.engine.connect() as connection:
            body = connection.scalar(
                sa.select(schema.runs.c.report).where(schema.runs.c.run_id == run_id))
            if body is None:
                raise UsageError(f"no run {run_id} in the store")
            query = (sa.select(t.case_id, t.n, b.content)
                     .join(schema.blobs, b.digest == t.trace_digest)
                     .where(t.run_id == run_id))
            traces = {(row.case_id, row.n): row.content for row in connection.execute(query)}
        report = Report.model_validate_json(body)
        for case in report.cases:
            if isinstance(case, CaseResult):
                for trial in case.trials:
                    content = traces.get((case.id, trial.n))
                    if content is not None:
                        trial.trace = Trace.model_validate_json(content)
        return report

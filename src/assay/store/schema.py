"""The store's tables, in SQLAlchemy Core (one description for SQLite and PostgreSQL).

Runs keep their full report (hidden cases included, for replay); trials and
verdicts are also kept as rows so that later steps (resume, replay, compare)
can query them without parsing reports. Traces live in ``blobs`` under their
content digest, a claim check: erasing content later blanks one blob and
leaves every row that points at it, and every hash, intact.

Two ways lead to these tables, and a test holds them equal (tables, columns,
types, defaults, keys, constraints, indexes): a brand-new store is created
from this metadata and stamped at head (``database._create_at_head``,
docs/decisions/0024-fresh-store.md), an older store is migrated by the
Alembic revisions in ``migrations/versions``. So a change here needs its
revision, and a revision its change here, in the same commit.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()


def as_bytes(value: bytes | str) -> bytes:
    """A blob's content as bytes, whatever the database handed back.

    SQLite keeps any value in any column: content edited in place with SQL's
    text functions (``replace(content, …)``) comes back as ``str``. It is
    read as its UTF-8 bytes, so its digest is checked like any content's and
    an edit is named (exit 1), never a traceback.
    """
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


class Content(sa.TypeDecorator[bytes]):
    """``LargeBinary`` whose values always read back as bytes (see :func:`as_bytes`)."""

    impl = sa.LargeBinary
    cache_ok = True

    def process_result_value(self, value: bytes | str | None, dialect: sa.Dialect
                             ) -> bytes | None:
        return None if value is None else as_bytes(value)

#: The columns a list of runs filters and orders by (revision 0008's covering indexes).
_LISTED_BY = ("started_at", "run_id", "suite_id", "status", "passed", "interrupted",
              "target_digest", "target_uri")

runs = sa.Table(
    "runs", metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("suite_id", sa.String(200), nullable=False),
    sa.Column("suite_digest", sa.String(80), nullable=False),
    sa.Column("hidden_set", sa.String(80)),
    sa.Column("hidden_source", sa.String(16)),
    sa.Column("target_uri", sa.Text, nullable=False),
    sa.Column("target_digest", sa.String(80), nullable=False),
    sa.Column("target_facets", sa.JSON, nullable=False),
    sa.Column("seed", sa.BigInteger),
    sa.Column("started_at", sa.String(40), nullable=False),
    sa.Column("finished_at", sa.String(40)),
    sa.Column("trials_per_case", sa.Integer, nullable=False),
    sa.Column("pass_mark", sa.Float, nullable=False),
    sa.Column("score_public", sa.Float),
    sa.Column("score_hidden", sa.Float),
    sa.Column("score_overall", sa.Float),
    sa.Column("passed", sa.Boolean),
    sa.Column("interrupted", sa.Boolean),
    # The report's canonical (RFC 8785) JSON: its SHA-256 is ``report_digest``.
    sa.Column("report", sa.Text),
    sa.Column("report_digest", sa.String(80)),
    # The suite that ran, hidden cases included, as canonical JSON
    # (docs/decisions/0015-replay.md); NULL for runs stored before revision 0003.
    sa.Column("suite", sa.Text),
    # ``open`` from registration until sealed (resumable), then ``sealed`` (revision 0004).
    sa.Column("status", sa.String(16), nullable=False, server_default="sealed"),
    # What the battery was asked (trials, timeout), as JSON: a resume runs the rest alike.
    sa.Column("options", sa.Text),
    # The report's seal (the run-sealed entry); ``report`` is kept with seal null,
    # so that its bytes are what ``report_digest`` hashes (revision 0004).
    sa.Column("seal_entry", sa.BigInteger),
    sa.Column("seal_hash", sa.String(80)),
    # The window of a battery run with ``--window`` (revision 0005): its size (``24h``)
    # and start (UTC); NULL for other runs. With the suite id and the agent version
    # they name the battery, and ``uq_runs_window`` keeps one run per name
    # (docs/decisions/0026-windows.md). NULLs never collide, so other runs are free.
    sa.Column("window_size", sa.String(8)),
    sa.Column("window_start", sa.String(40)),
    sa.Index("uq_runs_window", "suite_id", "target_digest", "window_size", "window_start",
             unique=True),
    # What a list of runs shows beyond the scores (revision 0008), as JSON written at
    # the seal (``records.listing_of``): evidence label, flags, cost, tokens, counts.
    sa.Column("listing", sa.Text),
    # Lists of runs, newest first, filtered by suite, status, result, version or target,
    # are answered from these two indexes alone (``store.runs.listing``): on SQLite, a column
    # stored after ``report`` and ``suite`` is reached through their overflow pages.
    sa.Index("ix_runs_listed", *_LISTED_BY),
    # A suite's runs by version (its batteries, ``store.runs.batteries``) come from the second
    # in version order; a suite's list, sorted from it, costs no table read either.
    sa.Index("ix_runs_suite_listed", "suite_id", "target_digest",
             *(c for c in _LISTED_BY if c not in ("suite_id", "target_digest"))),
)

trials = sa.Table(
    "trials", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), nullable=False),
    sa.Column("case_id", sa.String(200), nullable=False),
    sa.Column("split", sa.String(8), nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("duration_s", sa.Float, nullable=False),
    sa.Column("usage", sa.JSON, nullable=False),
    sa.Column("trace_digest", sa.String(80)),
    # The index of this trial's ``trial-verdict`` ledger entry (revision 0004).
    sa.Column("entry", sa.BigInteger),
    sa.UniqueConstraint("run_id", "case_id", "n", name="uq_trials_identity"),
    # A run's trials counted by outcome from the index alone (revision 0009): the
    # workbench follows an open run by asking this every tenth of a second.
    sa.Index("ix_trials_outcome", "run_id", "outcome"),
)

verdicts = sa.Table(
    "verdicts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), nullable=False),
    sa.Column("case_id", sa.String(200), nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("assertion", sa.Text, nullable=False),
    sa.Column("check", sa.String(100), nullable=False),
    sa.Column("family", sa.String(16), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("evidence", sa.String(16), nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("provenance", sa.Text, nullable=False),
    sa.Column("threshold", sa.Float),
    # The number an opinion gave (a rubric's weighted mean, a similarity; revision 0006).
    sa.Column("score", sa.Float),
    sa.UniqueConstraint("run_id", "case_id", "n", "position", name="uq_verdicts_identity"),
)

# What judges said of a trial's trace (revision 0006): one row per answer, at the
# assertion's ``position`` and the answer's ``item`` (a rubric's criterion). The
# opinion itself is the ``judge-opinion`` ledger entry's content, a blob under
# ``content_digest`` (its raw answer a blob of its own); ``entry`` is that entry.
opinions = sa.Table(
    "opinions", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), nullable=False),
    sa.Column("case_id", sa.String(200), nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("item", sa.Integer, nullable=False),
    sa.Column("content_digest", sa.String(80), nullable=False),
    sa.Column("entry", sa.BigInteger),
    sa.Index("ix_opinions_run", "run_id", "case_id", "n"),
)

# The annotation queue (revision 0007, SPEC §10): trials a person should look at,
# oldest first. ``source`` says how an item came: ``run`` (a failing or inconclusive
# trial, queued when its run was sealed), ``online`` and ``proxy`` (sampled
# production calls, their trace a blob under ``trace_digest``), ``manual`` (added
# by hand). ``label`` is what every surface names the case by: its id, or
# ``holdout-N`` for a hidden case, whose ``reason`` is never kept. A decision fills
# ``verdict`` (approved, rejected, needs-fix), ``reviewer``, ``decided_at`` and
# ``entry`` (its ``review`` ledger entry); the note is a blob under ``note_digest``,
# so erasing it leaves the entry's hash intact. A trial is queued once.
review_items = sa.Table(
    "review_items", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id")),
    sa.Column("suite_id", sa.String(200)),
    sa.Column("case_id", sa.String(200)),
    sa.Column("split", sa.String(8), nullable=False),
    sa.Column("n", sa.Integer),
    sa.Column("label", sa.String(200), nullable=False),
    sa.Column("outcome", sa.String(16)),
    sa.Column("reason", sa.Text),
    sa.Column("trace_digest", sa.String(80)),
    sa.Column("added_at", sa.String(40), nullable=False),
    sa.Column("verdict", sa.String(16)),
    sa.Column("note_digest", sa.String(80)),
    sa.Column("reviewer", sa.String(200)),
    sa.Column("decided_at", sa.String(40)),
    sa.Column("entry", sa.BigInteger),
    sa.UniqueConstraint("run_id", "case_id", "n", name="uq_review_items_trial"),
    sa.Index("ix_review_items_open", "verdict", "id"),
)

# A queued run's chunks (docs/decisions/0048-queue.md): the trials one job runs, as
# JSON ``[[case_id, [n, …] | null], …]`` (null: every trial of an adaptive case). The
# submitter writes them with the run's registration and the jobs; a worker marks its
# chunk ``done`` (the last one in defers the seal); the lease sweeper marks a stalled
# chunk ``split`` and writes one single-trial chunk per trial it had not recorded, with
# ``stalls`` one more. ``facets``: what the target said of itself in the worker that
# ran the chunk (a model a reply named), for the report's target.
run_chunks = sa.Table(
    "run_chunks", metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), primary_key=True),
    sa.Column("chunk", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("items", sa.Text, nullable=False),
    sa.Column("state", sa.String(8), nullable=False),
    sa.Column("stalls", sa.Integer, nullable=False),
    sa.Column("job_id", sa.BigInteger),
    sa.Column("facets", sa.Text),
    # Set once a worker began running it: only a started chunk is blamed for a stall.
    sa.Column("started", sa.Boolean),
    sa.Index("ix_run_chunks_state", "run_id", "state"),
)

# Batteries the job queue starts by itself (docs/decisions/0050-schedules.md): a suite
# (by id, from the files at ``paths``) against a target, as the battery of every
# ``every`` window; ``options`` holds the run's choices (trials, chunk, judge, …) as
# JSON; ``drift``: read drift after each of its batteries; ``notify``: POST it there.
schedules = sa.Table(
    "schedules", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("suite_id", sa.String(200), nullable=False),
    sa.Column("target_uri", sa.Text, nullable=False),
    sa.Column("every", sa.String(8), nullable=False),
    sa.Column("paths", sa.Text, nullable=False),
    sa.Column("hidden_dir", sa.Text),
    sa.Column("cwd", sa.Text, nullable=False),
    sa.Column("options", sa.Text, nullable=False),
    sa.Column("drift", sa.Boolean, nullable=False),
    sa.Column("notify", sa.Text),
    sa.Column("added_at", sa.String(40), nullable=False),
)

# A run's large documents in parts (docs/decisions/0051-cases-go-to-disk.md): the
# report (``kind`` "report") and the suite (``kind`` "suite") a battery hands over as
# files are kept here a mebibyte of text at a time, in ``part`` order, and ``runs.report``
# / ``runs.suite`` are NULL; the text is the parts joined (``run_texts.read_text``).
run_texts = sa.Table(
    "run_texts", metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), primary_key=True),
    sa.Column("kind", sa.String(8), primary_key=True),
    sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("body", sa.Text, nullable=False),
)

blobs = sa.Table(
    "blobs", metadata,
    sa.Column("digest", sa.String(80), primary_key=True),
    # The canonical (RFC 8785) bytes whose SHA-256 is ``digest``; NULL once erased.
    sa.Column("content", Content),
)

# The ledger (docs/decisions/0012-ledger-hashing.md, 0014-ledger-wiring.md):
# append-only, ``index`` gap-free from 0. Each entry's content is a blob under
# ``content_digest``, so erasing it leaves the entry and every hash intact.
ledger = sa.Table(
    "ledger", metadata,
    sa.Column("index", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("content_digest", sa.String(80), nullable=False),
    sa.Column("prev_hash", sa.String(80), nullable=False),
    sa.Column("hash", sa.String(80), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)

# Signed tree heads (docs/decisions/0017-recording.md): the Merkle root of the
# ledger's first ``size`` entries, signed with the store's Ed25519 key, and the
# compact range (JSON list of hex subtree hashes) the next head extends.
ledger_heads = sa.Table(
    "ledger_heads", metadata,
    sa.Column("size", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("root", sa.String(64), nullable=False),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("public_key", sa.Text, nullable=False),
    sa.Column("frontier", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)

"""What a list of runs shows, kept with each run (SPEC §11).

Revision ID: 0008
Revises: 0007

- ``runs.listing``: a small JSON document written when a run is sealed — its
  evidence label, flags, cost, tokens and per-split counts — so that a page
  listing a thousand runs reads one short column per run rather than parsing
  each run's report. Filled here for the runs sealed before this revision.
- ``ix_runs_listed``, ``ix_runs_suite_listed``: a list of runs, newest first,
  filtered by suite, status, result, version or target (and a suite's
  batteries, sealed and not interrupted), is answered from an
  index alone. On SQLite a column stored after the large ``report`` and
  ``suite`` columns is reached only through their overflow pages: filtering a
  thousand runs on ``status`` read them all (70 ms); the index answers in
  well under a millisecond.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``runs.listing`` and fill it from each sealed run's report."""
    from assay.store.runs.trials import listing_of

    op.add_column("runs", sa.Column("listing", sa.Text))
    listed_by = ["started_at", "run_id", "suite_id", "status", "passed", "interrupted",
                 "target_digest", "target_uri"]
    op.create_index("ix_runs_listed", "runs", listed_by)
    op.create_index("ix_runs_suite_listed", "runs",
                    ["suite_id", "target_digest",
                     *(c for c in listed_by if c not in ("suite_id", "target_digest"))])
    runs = sa.table("runs", sa.column("run_id", sa.String), sa.column("report", sa.Text),
                    sa.column("listing", sa.Text))
    connection = op.get_bind()
    rows = connection.execute(sa.select(runs.c.run_id, runs.c.report)
                              .where(runs.c.report.is_not(None))).all()
    for row in rows:
        try:
            listing = listing_of(json.loads(row.report))
        except (ValueError, TypeError, AttributeError):
            continue  # a report this code cannot read: its row lists without the extras
        connection.execute(runs.update().where(runs.c.run_id == row.run_id)
                           .values(listing=json.dumps(listing, sort_keys=True)))


def downgrade() -> None:
    """Drop ``runs.listing`` and its indexes."""
    op.drop_index("ix_runs_suite_listed", table_name="runs")
    op.drop_index("ix_runs_listed", table_name="runs")
    op.drop_column("runs", "listing")

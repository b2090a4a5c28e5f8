"""The first schema: runs, trials, verdicts and trace blobs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the four tables (kept literal: a revision must not follow schema.py's edits)."""
    op.create_table(
        "runs",
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
        sa.Column("finished_at", sa.String(40), nullable=False),
        sa.Column("trials_per_case", sa.Integer, nullable=False),
        sa.Column("pass_mark", sa.Float, nullable=False),
        sa.Column("score_public", sa.Float),
        sa.Column("score_hidden", sa.Float),
        sa.Column("score_overall", sa.Float),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("interrupted", sa.Boolean, nullable=False),
        sa.Column("report", sa.Text, nullable=False),
        sa.Column("report_digest", sa.String(80), nullable=False),
    )
    op.create_table(
        "trials",
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
        sa.UniqueConstraint("run_id", "case_id", "n", name="uq_trials_identity"),
    )
    op.create_table(
        "verdicts",
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
        sa.UniqueConstraint("run_id", "case_id", "n", "position", name="uq_verdicts_identity"),
    )
    op.create_table(
        "blobs",
        sa.Column("digest", sa.String(80), primary_key=True),
        sa.Column("content", sa.LargeBinary),
    )


def downgrade() -> None:
    """Drop the four tables."""
    for name in ("verdicts", "trials", "blobs", "runs"):
        op.drop_table(name)

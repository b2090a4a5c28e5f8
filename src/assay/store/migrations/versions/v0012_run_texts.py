"""A run's large documents in parts (issue 13: memory that does not grow with the battery).

Revision ID: 0012
Revises: 0011

- ``run_texts``: a run's report or suite, a mebibyte of text per row, for the
  runs whose battery handed them over as files; their ``runs.report`` /
  ``runs.suite`` are NULL (docs/decisions/0051-cases-go-to-disk.md). Runs
  stored before keep theirs in ``runs``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the table."""
    op.create_table(
        "run_texts",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("body", sa.Text, nullable=False),
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("run_texts")

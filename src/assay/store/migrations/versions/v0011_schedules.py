"""Batteries the job queue starts by itself (SPEC §12: `assay schedule`).

Revision ID: 0011
Revises: 0010

- ``schedules``: a suite against a target as the battery of every window of
  a size, with the run's choices, and whether to read drift after each
  battery and where to POST it (docs/decisions/0050-schedules.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the table."""
    op.create_table(
        "schedules",
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


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("schedules")

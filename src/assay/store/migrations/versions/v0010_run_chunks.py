"""A queued run's chunks (SPEC §12: batteries on a PostgreSQL job queue).

Revision ID: 0010
Revises: 0009

- ``run_chunks``: the trials each job of a queued run runs, its state (todo,
  done, split), how often it stalled, and the target's facets as the worker
  that ran it saw them (docs/decisions/0048-queue.md). Created on every
  store, used on PostgreSQL only (the queue needs it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the table."""
    op.create_table(
        "run_chunks",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("chunk", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("items", sa.Text, nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("stalls", sa.Integer, nullable=False),
        sa.Column("job_id", sa.BigInteger),
        sa.Column("facets", sa.Text),
    )
    op.create_index("ix_run_chunks_state", "run_chunks", ["run_id", "state"])


def downgrade() -> None:
    """Drop the table."""
    op.drop_index("ix_run_chunks_state", table_name="run_chunks")
    op.drop_table("run_chunks")

"""Whether a queued chunk had started when its worker stopped.

Revision ID: 0013
Revises: 0012

- ``run_chunks.started``: set when a worker begins running the chunk's trials.
  A chunk taken back from a stopped worker counts a stall only if it had
  started there: one that was still waiting its turn behind a suspect trial
  (leases: isolation) is not blamed for a crash it took no part in.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the column."""
    with op.batch_alter_table("run_chunks") as batch:
        batch.add_column(sa.Column("started", sa.Boolean))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("run_chunks") as batch:
        batch.drop_column("started")

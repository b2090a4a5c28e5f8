"""The suite that ran, kept with each run, so that replay can re-grade its traces.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``runs.suite`` (JSON text); NULL for runs stored before it existed."""
    op.add_column("runs", sa.Column("suite", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop ``runs.suite``."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("suite")

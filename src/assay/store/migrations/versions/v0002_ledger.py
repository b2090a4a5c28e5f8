"""The ledger: append-only entries whose contents live in ``blobs``.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the ledger table (kept literal: a revision must not follow schema.py's edits)."""
    op.create_table(
        "ledger",
        sa.Column("index", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("content_digest", sa.String(80), nullable=False),
        sa.Column("prev_hash", sa.String(80), nullable=False),
        sa.Column("hash", sa.String(80), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    """Drop the ledger table."""
    op.drop_table("ledger")

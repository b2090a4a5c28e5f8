"""The annotation queue (SPEC §10).

Revision ID: 0007
Revises: 0006

- ``review_items``: trials a person should look at, oldest first — failing
  and inconclusive trials queued when their run is sealed, sampled
  production calls (``online``, ``proxy``) with their trace as a blob, and
  items added by hand. A hidden case's item is labelled ``holdout-N`` and
  keeps no reason. A decision (approved, rejected, needs-fix) is sealed as a
  ``review`` ledger entry; its note is a blob, erasable like any content.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``review_items`` with its trial key and its index of open items."""
    op.create_table(
        "review_items",
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
    )
    op.create_index("ix_review_items_open", "review_items", ["verdict", "id"])


def downgrade() -> None:
    """Drop ``review_items``."""
    op.drop_index("ix_review_items_open", table_name="review_items")
    op.drop_table("review_items")

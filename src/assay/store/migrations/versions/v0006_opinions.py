"""Opinions: what judges said of each trial's trace (SPEC §9).

Revision ID: 0006
Revises: 0005

- ``opinions``: one row per answer a quality check rests on (a judge's, a
  rubric criterion's, a similarity), by run, case, trial, the assertion's
  ``position`` and the answer's ``item``. The opinion is the content of its
  ``judge-opinion`` ledger entry (``entry``), a blob under
  ``content_digest``; replay reads it back and grades on it again, so that
  a verdict that rests on an opinion is re-derived without asking anyone.
- ``verdicts.score``: the number an opinion gave (a rubric's weighted mean,
  a similarity), NULL for every other verdict and every verdict before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the ``opinions`` table, its index by trial, and ``verdicts.score``."""
    op.create_table(
        "opinions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("case_id", sa.String(200), nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("item", sa.Integer, nullable=False),
        sa.Column("content_digest", sa.String(80), nullable=False),
        sa.Column("entry", sa.BigInteger),
    )
    op.create_index("ix_opinions_run", "opinions", ["run_id", "case_id", "n"])
    op.add_column("verdicts", sa.Column("score", sa.Float, nullable=True))


def downgrade() -> None:
    """Drop the ``opinions`` table and ``verdicts.score``."""
    with op.batch_alter_table("verdicts") as batch:
        batch.drop_column("score")
    op.drop_index("ix_opinions_run", table_name="opinions")
    op.drop_table("opinions")

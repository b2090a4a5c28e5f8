"""Runs recorded as they go (open until sealed, so they can be resumed), and tree heads.

Revision ID: 0004
Revises: 0003

- ``runs.status``: ``open`` from registration until the run is sealed, then
  ``sealed``; runs stored before this revision were saved whole, so ``sealed``.
- ``runs.options``: what the battery was asked (trials, timeout) as JSON, so
  that ``assay run --resume`` runs the rest the same way.
- ``runs.seal_entry``/``seal_hash``: the report's seal. The stored report is
  kept with ``seal`` null, so that its bytes are exactly what ``report_digest``
  (and the run-sealed entry) hash.
- The columns only known at the end (finished_at, passed, interrupted, report,
  report_digest) may be NULL while a run is open.
- ``trials.entry``: the index of the trial's ``trial-verdict`` ledger entry,
  written in the same transaction as the trial (NULL for older runs).
- ``ledger_heads``: each signed tree head over the ledger's first ``size``
  entries, with the compact range (``frontier``) that extends it cheaply.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None

_LATE = ("finished_at", "passed", "interrupted", "report", "report_digest")


def upgrade() -> None:
    """Add ``runs.status``/``options`` and ``trials.entry``, relax late columns, add heads."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("status", sa.String(16), nullable=False,
                                   server_default="sealed"))
        batch.add_column(sa.Column("options", sa.Text, nullable=True))
        batch.add_column(sa.Column("seal_entry", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("seal_hash", sa.String(80), nullable=True))
        batch.alter_column("finished_at", existing_type=sa.String(40), nullable=True)
        batch.alter_column("passed", existing_type=sa.Boolean, nullable=True)
        batch.alter_column("interrupted", existing_type=sa.Boolean, nullable=True)
        batch.alter_column("report", existing_type=sa.Text, nullable=True)
        batch.alter_column("report_digest", existing_type=sa.String(80), nullable=True)
    op.add_column("trials", sa.Column("entry", sa.BigInteger, nullable=True))
    op.create_table(
        "ledger_heads",
        sa.Column("size", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("frontier", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    """Drop ``ledger_heads`` and the two run columns (open runs cannot go back)."""
    op.drop_table("ledger_heads")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("entry")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("seal_hash")
        batch.drop_column("seal_entry")
        batch.drop_column("options")
        batch.drop_column("status")

"""Batteries by window: at most one run per suite, agent version and window.

Revision ID: 0005
Revises: 0004

- ``runs.window_size``/``window_start``: the window of a run started with
  ``assay run --window`` (``24h``, ``2025-01-06T00:00:00Z``); NULL for the
  others, and for every run stored before.
- ``uq_runs_window``: a unique index on (suite_id, target_digest,
  window_size, window_start). It is what keeps one battery per window when
  processes race (docs/decisions/0026-windows.md); NULLs are distinct in both
  SQLite and PostgreSQL, so runs without a window never collide. An index
  rather than a table constraint: SQLite adds it without copying ``runs``.
  It also serves ``Store.batteries`` (its first two columns).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two window columns and the unique index over a battery's name."""
    op.add_column("runs", sa.Column("window_size", sa.String(8), nullable=True))
    op.add_column("runs", sa.Column("window_start", sa.String(40), nullable=True))
    op.create_index("uq_runs_window", "runs",
                    ["suite_id", "target_digest", "window_size", "window_start"], unique=True)


def downgrade() -> None:
    """Drop the index and the window columns."""
    op.drop_index("uq_runs_window", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("window_start")
        batch.drop_column("window_size")

"""Alembic's entry point: migrate the connection the store hands over.

There is no alembic.ini on the user's side: ``database.migrate`` builds the
configuration in code and passes its open connection in ``attributes``.
"""

from __future__ import annotations

from alembic import context

from assay.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()

"""The store schema's newest revision, importable without SQLAlchemy
(``store.runs.sqlite_reports``).

The newest Alembic revision in ``migrations/versions``; a test keeps them equal.
"""

HEAD_REVISION = "0013"

"""Many rows in one ``executemany``, straight to the driver.

SQLAlchemy Core processes each row's parameters in Python (a few
microseconds a row); a battery of ten thousand trials writes five rows per
trial, so the recorder compiles each INSERT once for the connection's dialect
and hands the driver plain rows. Values must already be what the driver
takes: JSON columns as JSON text.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert


def insert_rows(connection: Connection, statement: Insert, rows: Sequence[dict[str, Any]]) -> None:
    """Run ``statement`` (an INSERT) for every row: one compile, one driver ``executemany``."""
    if not rows:
        return
    compiled = _compiled(statement, connection.dialect, tuple(rows[0]))
    if compiled.positional:
        order = compiled.positiontup or []
        pick = itemgetter(*order)
        params: Sequence[Any] = [pick(row) for row in rows] if len(order) > 1 \
            else [(pick(row),) for row in rows]
    else:
        params = rows
    connection.exec_driver_sql(compiled.string, params)


_COMPILED: dict[tuple[str, str, str, tuple[str, ...]], SQLCompiler] = {}


def _compiled(statement: Insert, dialect: Dialect, keys: tuple[str, ...]) -> SQLCompiler:
    """``statement`` compiled for ``dialect`` and these columns, once per process."""
    # A plain INSERT and a dialect's ON CONFLICT DO NOTHING one (blobs) are different
    # classes; those are the only two kinds this module is given.
    kind = f"{type(statement).__module__}.{type(statement).__qualname__}"
    cache_key = (dialect.name, statement.table.name, kind, keys)
    found = _COMPILED.get(cache_key)
    if found is None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        assert isinstance(compiled, SQLCompiler)
        found = _COMPILED[cache_key] = compiled
    return found

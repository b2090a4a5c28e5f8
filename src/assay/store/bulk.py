"""Many rows in one ``executemany``, straight to the driver.

SQLAlchemy Core processes each row's parameters in Python (a few
microseconds a row); a battery of ten thousand trials writes five rows per
trial, so the recorder compiles each INSERT once for the connection's dialect
and hands the driver plain rows. Values must already be what the driver
takes: JSON columns as JSON text (see ``json_text``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert


def json_text(value: Any) -> str:
    """A JSON column's value as SQLAlchemy's JSON type would write it."""
    return json.dumps(value)


def insert_rows(connection: Connection, statement: Insert, rows: Sequence[dict[str, Any]]) -> None:
    """Run ``statement`` (an INSERT) for every row: one compile, one driver ``executemany``."""
    if not rows:
        return
    compiled = statement.compile(dialect=connection.dialect, column_keys=list(rows[0]))
    if compiled.positional:
        order = compiled.positiontup or []
        pick = itemgetter(*order)
        params: Sequence[Any] = [pick(row) for row in rows] if len(order) > 1 \
            else [(pick(row),) for row in rows]
    else:
        params = rows
    connection.exec_driver_sql(str(compiled), params)

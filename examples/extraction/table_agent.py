"""A small table-extraction agent: a document in, rows out.

It reads CSV (comma or semicolon delimited, quoted fields allowed) and
Markdown pipe tables, and returns ``{"columns": [...], "rows": [{...}, ...]}``
with money columns normalised to two decimals ("42" -> "42.00", "41,5" -> "41.50").
The document is a path relative to the case's fixture folder, or inline
text under ``text``.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

MONEY = {"total", "amount", "price", "unit_price", "subtotal"}


def _read(input: dict[str, Any], tools: Any) -> str:
    if "text" in input:
        return str(input["text"])
    base = tools.fixture if tools is not None and tools.fixture is not None else Path.cwd()
    return (Path(base) / input["document"]).read_text(encoding="utf-8")


def _money(value: str) -> str:
    cleaned = value.strip().replace("$", "").replace("€", "").replace(" ", "")
    if "," in cleaned and "." not in cleaned:
        cleaned = cleaned.replace(",", ".")
    try:
        return f"{Decimal(cleaned).quantize(Decimal('0.01'))}"
    except InvalidOperation:
        return value.strip()


def _markdown(text: str) -> list[list[str]]:
    table = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the |---|---| rule under the header
        table.append(cells)
    return table


def _csv(text: str) -> list[list[str]]:
    first = text.splitlines()[0] if text.strip() else ""
    delimiter = ";" if first.count(";") > first.count(",") else ","
    return [row for row in csv.reader(io.StringIO(text), delimiter=delimiter) if row]


def extract(input: dict[str, Any], tools: Any = None) -> dict[str, Any]:
    """Extract the first table of the document."""
    text = _read(input, tools)
    is_markdown = any(line.lstrip().startswith("|") for line in text.splitlines())
    table = _markdown(text) if is_markdown else _csv(text)
    if not table:
        return {"columns": [], "rows": []}
    columns = [c.strip().lower().replace(" ", "_") for c in table[0]]
    rows = []
    for cells in table[1:]:
        row = {}
        for name, cell in zip(columns, cells, strict=False):
            row[name] = _money(cell) if name in MONEY else cell.strip()
        rows.append(row)
    return {"columns": columns, "rows": rows}

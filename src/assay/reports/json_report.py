"""``--json FILE``: one line per run, each line the report of SPEC §6.

One shape whatever the number of runs (decisions/0020-json-report-lines.md):
the file is JSON Lines, so a one-run file is exactly the SPEC §6 object
(``json.load`` reads it) and a command with several suites or targets adds
one such line per run; a reader that goes line by line, or ``jq``, needs no
branch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError

from .common import write_file

if TYPE_CHECKING:  # the models load where a report is made, not with its renderers
    from ..model import Report

# JSON allows these raw inside strings, but Python's str.splitlines() (and some
# editors) break lines at them; escaped, a report stays on its one line.
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def as_json(report: Report) -> dict[str, Any]:
    """One run's report as plain JSON data (``assay show --json``)."""
    return report.model_dump(mode="json", by_alias=True)


def report_line(report: Report) -> str:
    """One run's report as one line of JSON, without the newline."""
    return b"".join(_line_pieces(report)).decode("utf-8")


def _line_pieces(report: Report) -> Iterator[bytes]:
    """``report_line``, encoded, in pieces (a case at a time: ``model.result.report_json``)."""
    from ..model.result import report_json

    try:
        pieces = report_json(report)
        first = next(pieces)
    except PydanticSerializationError:
        first, pieces = _escaped(report), iter(())
    yield _one_line_bytes(first)
    for piece in pieces:  # what fails after the first piece fails the file (write_file)
        yield _one_line_bytes(piece)


def _escaped(report: Report) -> bytes:
    # Text UTF-8 cannot hold (a lone surrogate, say in a case id) is written
    # as a \uXXXX escape by the stdlib instead of losing the file.
    return json.dumps(report.model_dump(mode="json", by_alias=True),
                      separators=(",", ":")).encode()


def _one_line_bytes(piece: bytes) -> bytes:
    for raw, escaped in _LINE_BREAKS_UTF8.items():
        if raw in piece:
            piece = piece.replace(raw, escaped)
    return piece


_LINE_BREAKS_UTF8 = {raw.encode(): escaped.encode() for raw, escaped in _LINE_BREAKS.items()}


def write_json(reports: list[Report], path: Path) -> None:
    """Write each run's report to ``path``, one line each, whole or not at all.

    Each line is written a case at a time (``model.result.report_json``): a
    battery's report copies its cases' JSON from its spool.
    """

    def pieces() -> Iterator[bytes]:
        for report in reports:
            yield from _line_pieces(report)
            yield b"\n"

    write_file(path, pieces())

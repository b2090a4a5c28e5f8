"""``--json FILE``: the report of SPEC §6 (one run), or a batch of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

from ..model import Report
from .common import write_file


class Batch(BaseModel):
    """Several runs from one command, each with its own report."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(default="assay.batch/1", alias="schema")
    passed: bool
    runs: list[Report]


def _document(reports: list[Report]) -> Report | Batch:
    if len(reports) == 1:
        return reports[0]
    return Batch(passed=all(r.scores.passed for r in reports), runs=reports)


def as_json(reports: list[Report]) -> dict[str, Any]:
    """One run gives its report; several give ``assay.batch/1`` holding each."""
    return _document(reports).model_dump(mode="json", by_alias=True)


def json_document(reports: list[Report]) -> str:
    """The JSON report's text (pydantic's serializer: fast for large runs).

    Text UTF-8 cannot hold (a lone surrogate, say in a case id) is written as
    a ``\\uXXXX`` escape by the stdlib instead of losing the file.
    """
    document = _document(reports)
    try:
        return document.model_dump_json(indent=2, by_alias=True)
    except PydanticSerializationError:
        return json.dumps(document.model_dump(mode="json", by_alias=True), indent=2)


def write_json(reports: list[Report], path: Path) -> None:
    """Write the JSON report to ``path``."""
    write_file(path, json_document(reports) + "\n")

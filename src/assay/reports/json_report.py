"""``--json FILE``: the report of SPEC §6 (one run), or a batch of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..model import Report


def as_json(reports: list[Report]) -> dict[str, Any]:
    """One run gives its report; several give ``assay.batch/1`` holding each."""
    if len(reports) == 1:
        return reports[0].to_json_dict()
    return {
        "schema": "assay.batch/1",
        "passed": all(r.scores.passed for r in reports),
        "runs": [r.to_json_dict() for r in reports],
    }


def write_json(reports: list[Report], path: Path) -> None:
    """Write the JSON report to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Indented for people; past a thousand cases, compact (the C encoder is
    # ten times faster and nobody reads such a file without jq).
    cases = sum(len(r.cases) for r in reports)
    indent = 2 if cases <= 1000 else None
    path.write_text(json.dumps(as_json(reports), indent=indent, ensure_ascii=False) + "\n",
                    encoding="utf-8")

"""A JSON or YAML document read from a file a suite names (a state, an ``equals_file``)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def read_document(path: Path) -> object:
    """A JSON or YAML file's document; ``ValueError`` says why it cannot be had."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path.name!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path.name!r} cannot be read: {exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path.name!r} is not JSON: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise ValueError(f"{path.name!r} is not YAML{at}") from None

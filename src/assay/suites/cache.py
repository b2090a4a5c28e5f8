"""The parsed-suite cache: a YAML suite's data and line marks, kept as JSON under ``.assay/cache``.

Parsing YAML is most of what loading a large suite costs (libyaml builds a
node for every value; a JSON reader reads the same data ten times faster).
What is kept is only what the parse gave: the plain data and the line of
every case and assertion. Everything after the parse (validation, checks,
hidden cases, fixtures, digests) runs as on a first load, on the same data,
so a suite loads to the same cases with the same digests either way; a load
that meets any problem parses the file again, for the error's exact words
and line.

An entry is used only when the file's bytes, assay's version, the parser
(this module and ``marks``), PyYAML's and Python's versions all match what
it was made from; anything else, or an unreadable entry, is a miss. Data
that JSON would not give back exactly (dates, non-string keys, NaN) is not
kept. One entry per suite file, named by the file's resolved path; deleting
the folder is always safe. Entries are written only where ``.assay/`` exists
already (the default store's folder): loading never creates it. The suite
file's own data only: hidden cases and fixtures are never written here.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .. import __version__
from . import marks

#: The working folder's assay folder: the cache is kept only where it already is
#: (a run with ``--no-store`` or another store leaves no ``.assay/`` behind).
HOME = Path(".assay")
#: Where entries go, relative to the working folder (beside the default store).
FOLDER = HOME / "cache" / "suites"
FORMAT = "assay.parsed-suite/1"

Lines = list[tuple[int | None, list[int | None]]]

_parser: str | None = None


def _parser_digest() -> str:
    """What the parse depends on besides the file: versions and the parsing code itself."""
    global _parser
    if _parser is None:
        h = hashlib.sha256(f"{FORMAT}\0{__version__}\0{yaml.__version__}\0{sys.version}".encode())
        for module in (marks, sys.modules[__name__]):
            h.update(Path(str(module.__file__)).read_bytes())
        _parser = h.hexdigest()
    return _parser


def key_of(text: bytes) -> str:
    """The key an entry for a file with these bytes must carry."""
    return hashlib.sha256(_parser_digest().encode() + b"\0" + text).hexdigest()


def _entry_path(path: Path) -> Path:
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    return FOLDER / f"{name}.json"


def read(path: Path, key: str) -> tuple[Any, Lines] | None:
    """The data and case lines kept for ``path`` under ``key``, or None."""
    try:
        entry = json.loads(_entry_path(path).read_bytes())
        if entry["key"] != key:
            return None
        return entry["data"], [(line, list(inner)) for line, inner in entry["lines"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keeping() -> bool:
    """Whether entries are kept at all: only where ``.assay/`` already exists.

    Asked before anything is prepared for ``write``: the lines and the JSON
    text of a large suite cost a tenth of its load, for nothing when there
    is nowhere to keep them.
    """
    try:
        return HOME.is_dir()
    except OSError:
        return False


def write(path: Path, key: str, data: Any, lines: Lines) -> None:
    """Keep ``data`` and ``lines`` for ``path`` (nothing, quietly, if JSON cannot hold them)."""
    try:
        if not keeping():
            return
        text = json.dumps({"key": key, "data": data, "lines": lines}, ensure_ascii=False,
                          allow_nan=False, separators=(",", ":"))
        if json.loads(text)["data"] != data:  # e.g. {1: x} would come back as {"1": x}
            return
        target = _entry_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".entry-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except (OSError, TypeError, ValueError, RecursionError):
        pass


def lines_of(data: Any, line: Any) -> Lines:
    """The line of every case and of every assertion, as ``marks.Marked.line`` gives them."""
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        return []
    found: Lines = []
    for i, case in enumerate(cases):
        expect = case.get("expect") if isinstance(case, dict) else None
        count = len(expect) if isinstance(expect, list) else 0
        found.append((line(["cases", i]), [line(["cases", i, "expect", j]) for j in range(count)]))
    return found


class KeptLines:
    """``line_of`` for a suite loaded from the cache: the kept lines of cases and assertions.

    Any other place has no kept line: asking for one raises ``Unknown``, and
    the loader parses the file again (only errors ask for other places).
    """

    class Unknown(Exception):
        """A line that was not kept."""

    def __init__(self, lines: Lines) -> None:
        self.lines = lines

    def __call__(self, loc: Sequence[str | int]) -> int | None:
        """The line of ``["cases", i]`` or ``["cases", i, "expect", j]``."""
        if len(loc) in (2, 4) and loc[0] == "cases" and isinstance(loc[1], int) \
                and 0 <= loc[1] < len(self.lines):
            case_line, assertion_lines = self.lines[loc[1]]
            if len(loc) == 2:
                return case_line
            j = loc[3]
            if loc[2] == "expect" and isinstance(j, int) and 0 <= j < len(assertion_lines):
                return assertion_lines[j]
        raise KeptLines.Unknown(list(loc))

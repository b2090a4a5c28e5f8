"""The parsed-suite cache: a YAML suite's data and line marks, kept as JSON under ``.assay/cache``.

Parsing YAML is most of what loading a large suite costs (libyaml builds a
node for every value; a JSON reader reads the same data ten times faster).
What is kept is only what the parse gave: the plain data and the line of
every case and assertion. Everything after the parse (validation, checks,
hidden cases, fixtures, digests) runs as on a first load, on the same data,
so a suite loads to the same cases with the same digests either way; a load
that meets any problem parses the file again, for the error's exact words
and line.

An entry is one JSON value a line, so that it is written while the file is
parsed and read back a case at a time, never held whole: first
``{"format", "key"}``, then ``[line, [assertion lines], data]`` per case,
last ``{"top": the other top-level keys}``. Only a suite of the usual shape
(a mapping whose ``cases`` is a list) is kept.

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

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson
import yaml

from ..version import __version__
from . import marks

#: The working folder's assay folder: the cache is kept only where it already is
#: (a run with ``--no-store`` or another store leaves no ``.assay/`` behind).
HOME = Path(".assay")
#: Where entries go, relative to the working folder (beside the default store).
FOLDER = HOME / "cache" / "suites"
FORMAT = "assay.parsed-suite/2"

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


class Miss(Exception):
    """An entry that turned out unreadable part way through: the file is parsed instead."""


def key_of_file(path: Path) -> str:
    """``key_of`` the file's bytes, read in pieces (raises OSError if it cannot be read)."""
    h = hashlib.sha256(_parser_digest().encode() + b"\0")
    with path.open("rb") as fh:
        while piece := fh.read(1 << 20):
            h.update(piece)
    return h.hexdigest()


class Kept:
    """An entry being read: iterating yields each case as ``marks.RawCase``; then ``top`` is set.

    Raises ``Miss`` if the entry breaks off or is malformed, perhaps after
    some cases were yielded.
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.top: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[marks.RawCase]:
        try:
            with self._stream:
                for text in self._stream:
                    item = json.loads(text)
                    if isinstance(item, dict):
                        top = item["top"]
                        if not isinstance(top, dict) or next(self._stream, ""):
                            raise Miss("a malformed end")
                        self.top = top
                        return
                    line, inner, data = item
                    if not _is_line(line) or not all(_is_line(at) for at in inner):
                        raise Miss("a malformed line")
                    yield data, line, list(inner)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Miss(type(exc).__name__) from None
        raise Miss("no end")


def _is_line(value: Any) -> bool:
    return value is None or type(value) is int


def read(path: Path, key: str) -> Kept | None:
    """The entry kept for ``path`` under ``key``, ready to be read, or None."""
    try:
        stream = _entry_path(path).open(encoding="utf-8")
    except OSError:
        return None
    try:
        head = json.loads(stream.readline())
        if head.get("format") == FORMAT and head.get("key") == key:
            return Kept(stream)
    except (OSError, ValueError, AttributeError):
        pass
    stream.close()
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


class EntryFile:
    """A cache entry written to a temporary file beside its place and put there whole by
    ``commit``: a reader never meets half of one. Quietly nothing once ``abandon`` ed (a
    folder that cannot be written, a value that cannot be kept)."""

    def __init__(self, target: Path, head: bytes) -> None:
        self._target = target
        self._stream: IO[bytes] | None = None
        self._tmp = ""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, self._tmp = tempfile.mkstemp(dir=target.parent, prefix=".entry-")
            self._stream = os.fdopen(fd, "wb")
            self._stream.write(head)
        except OSError:
            self.abandon()

    @property
    def open(self) -> bool:
        """Still being written (not abandoned, not committed)."""
        return self._stream is not None

    def write(self, data: bytes | bytearray) -> None:
        """Add ``data``; a write that fails abandons the entry."""
        if self._stream is None:
            return
        try:
            self._stream.write(data)
        except OSError:
            self.abandon()

    def commit(self) -> None:
        """Put the entry in its place (a failure abandons it)."""
        if self._stream is None:
            return
        try:
            self._stream.close()
            self._stream = None
            os.replace(self._tmp, self._target)
            self._tmp = ""
        except OSError:
            self.abandon()

    def abandon(self) -> None:
        """Leave no entry behind."""
        if self._stream is not None:
            with contextlib.suppress(OSError):
                self._stream.close()
            self._stream = None
        if self._tmp:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = ""


class Writer:
    """An entry written case by case while the file is parsed; put in place by ``finish``.

    Quietly nothing if the folder cannot be written or JSON cannot hold a
    value exactly (e.g. ``{1: x}`` would come back as ``{"1": x}``).
    """

    def __init__(self, path: Path, key: str) -> None:
        self._entry = EntryFile(_entry_path(path),
                                orjson.dumps({"format": FORMAT, "key": key}) + b"\n")

    def _put(self, value: Any) -> None:
        if not self._entry.open:
            return
        try:
            # orjson: a tenth of the standard library's time on a first load. What it
            # refuses (a key that is no string, an integer past 64 bits) or writes in a
            # form that does not come back (NaN as null) leaves the file unkept.
            text = orjson.dumps(value)
            if orjson.loads(text) != value:
                raise ValueError("not kept exactly")
        except (TypeError, ValueError, RecursionError, orjson.JSONEncodeError):
            self.abandon()
            return
        self._entry.write(text + b"\n")

    def add(self, data: Any, line: int | None, lines: list[int | None]) -> None:
        """Keep one more case: its data, its line, and its assertions' lines."""
        self._put([line, lines, data])

    def finish(self, top: dict[str, Any]) -> None:
        """Keep the other top-level keys and put the entry in place."""
        self._put({"top": top})
        self._entry.commit()

    def abandon(self) -> None:
        """Leave no entry behind (a parse that failed, or data JSON cannot hold)."""
        self._entry.abandon()


def writer(path: Path, key: str) -> Writer | None:
    """A writer for ``path``'s entry, or None where entries are not kept (``keeping``)."""
    return Writer(path, key) if keeping() else None


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

    def __init__(self, lines: Lines, start: int = 0) -> None:
        self.lines = lines
        #: The index of the first case ``lines`` are of (a block of a longer list).
        self.start = start

    def __call__(self, loc: Sequence[str | int]) -> int | None:
        """The line of ``["cases", i]`` or ``["cases", i, "expect", j]``."""
        if len(loc) in (2, 4) and loc[0] == "cases" and isinstance(loc[1], int) \
                and 0 <= loc[1] - self.start < len(self.lines):
            case_line, assertion_lines = self.lines[loc[1] - self.start]
            if len(loc) == 2:
                return case_line
            j = loc[3]
            if loc[2] == "expect" and isinstance(j, int) and 0 <= j < len(assertion_lines):
                return assertion_lines[j]
        raise KeptLines.Unknown(list(loc))

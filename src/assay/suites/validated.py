"""The validated-case cache: a YAML suite's public cases as a load validated them, kept as JSON.

A load from the parsed-suite cache (``suites.cache``) still validates every
case through pydantic, checks it against the registry and digests it: most
of what a re-run of an unchanged 10,000-case suite spends loading. This
cache keeps what those steps made, so that the next load of the same file
with the same code reads it back instead (docs/decisions/0082, amending
0023):

- per case, its values as ``model.packed.PackedCases`` packs them
  (``row_of``), written as JSON: never a pickle, so an entry is inert data,
  whoever put it in ``.assay/``. Each assertion's argument is kept as the
  file wrote it, before its check prepared it;
- per case, its two facet digests (``facets.packed_digests``);
- the suite digest, with the digest of the suite body it was made with, and
  the digest of every fixture and workspace the cases named.

**The key** is the parsed-suite cache's (the file's bytes, assay's, PyYAML's
and Python's versions, the parser's code), the file's name as given (cases
remember it), pydantic's versions, and the bytes of every module that
validates a case or makes a digest of it (``model/``, ``suites/``,
``checks/``, ``canonical.py``): a change to how a case is validated or a
digest is made misses.

**On a hit, what reads the world is done again**: every assertion's check
prepares its argument again, from the argument as written (a grader's script
or function is found again, an ``equals_file`` read again, a judge's
argument checked again), and the result must be the one the entry was made
with; every fixture and workspace a case names is found and digested again
and must match; the suite's body (its workspace's digest included) must give
the kept body digest. The loader goes on from there as on any load: hidden
cases (never kept here), the suite's workspace, outcome checks, skills, tool
fixtures, a python judge. Any difference or problem is a miss, and the file
is loaded in full, so an error has the exact words and line of a first load.

An entry is written only after a load that succeeded, only where ``.assay/``
already exists, and only when JSON gives every value back exactly (else
nothing is kept and the file loads as before). One entry per suite file,
beside the parsed-suite cache's, in ``.assay/cache/cases/``; deleting it is
always safe. Lines: ``{"format", "key"}``; per block of cases ``[rows,
facets]`` (facets as base64); last ``{"end": …}`` with the digest of the
lines before it, so an entry cut short or damaged is a miss.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
import pydantic
import pydantic_core

from ..checks import REGISTRY, LoadContext
from ..model import Evidence
from ..model.conversation import SimulatedUser
from ..model.invocation import Invocation
from ..model.packed import ASSERTION_FIELDS, CASE_FIELDS, Layout, PackedCases
from ..version import __version__
from . import cache
from .facets import PACKED, json_digest

#: Where entries go, relative to the working folder (beside the parsed-suite cache's).
FOLDER = cache.HOME / "cache" / "cases"
FORMAT = "assay.validated-suite/1"

#: The packages and modules whose code decides what a case is and what its digests are.
_CODE = ("model", "suites", "checks", "canonical.py")

_C = {name: i for i, name in enumerate(CASE_FIELDS)}
_A = {name: i for i, name in enumerate(ASSERTION_FIELDS)}
_EXPECT, _FILE, _SPLIT = _C["expect"], _C["file"], _C["split"]
_INVOCATION, _USER = _C["invocation"], _C["user"]
_ARG, _CHECK, _A_FILE = _A["arg"], _A["check"], _A["file"]
_EVIDENCE = (_A["min_evidence"], _A["breach_evidence"])
#: A row's length: the values, then the given bits (an assertion's, then its prepared mark).
_CASE_LENGTH = len(CASE_FIELDS) + 1
_ASSERTION_LENGTH = len(ASSERTION_FIELDS) + 2
#: The models a case's values may hold, kept as their values and given bits.
_INVOCATION_LAYOUT = Layout(Invocation)
_USER_LAYOUT = Layout(SimulatedUser)
#: Cases a line: reading one back holds its data whole, and orjson's for it (a few
#: times the line's size), so lines are kept short.
LINE = 256
#: Values orjson would write in a form of its own are refused: the entry is not kept.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME \
    | orjson.OPT_PASSTHROUGH_SUBCLASS

_code: str | None = None


def _code_digest() -> str:
    """The versions and the code an entry depends on besides the file (made once)."""
    global _code
    if _code is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256(f"{FORMAT}\0{__version__}\0{pydantic.VERSION}\0"
                           f"{pydantic_core.__version__}\0{sys.version}\0".encode())
        for name in _CODE:
            where = root / name
            for module in sorted(where.rglob("*.py")) if where.is_dir() else [where]:
                h.update(module.relative_to(root).as_posix().encode() + b"\0")
                h.update(hashlib.sha256(module.read_bytes()).digest())
        _code = h.hexdigest()
    return _code


def key_of(parse_key: str, path: Path) -> str:
    """The key an entry for the file at ``path`` (as given) must carry: ``parse_key`` is
    the parsed-suite cache's for its bytes (``cache.key_of_file``)."""
    return hashlib.sha256(f"{_code_digest()}\0{parse_key}\0{path}".encode()).hexdigest()


def _entry_path(path: Path) -> Path:
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    return FOLDER / f"{name}.json"


class Miss(Exception):
    """What a hit turned out not to be: the file is loaded in full instead."""


class _Unkept(Exception):
    """A value JSON would not give back exactly: no entry is written."""


def _prepared(value: Any) -> str:
    """The digest of a prepared argument as a case's identity holds it (its JSON)."""
    try:
        return json_digest(pydantic_core.to_jsonable_python(value))
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        raise _Unkept(type(exc).__name__) from None


def _model_values(value: Any, layout: Layout) -> list[Any]:
    if type(value) is not layout.model or value.__pydantic_extra__ \
            or value.__pydantic_private__:
        raise _Unkept(type(value).__name__)
    return [*layout.values(value.__dict__), layout.given(value)]


def _model_of(values: Any, layout: Layout) -> Any:
    if type(values) is not list or len(values) != len(layout.names) + 1:
        raise Miss("a malformed model")
    return layout.made(dict(zip(layout.names, values, strict=False)), values[-1])


# --------------------------------------------------------------------------- writing


class Writer:
    """An entry written a block at a time while a file loads; put in place by ``finish``.

    Quietly nothing if the folder cannot be written or a value would not come
    back exactly from JSON (``abandon``).
    """

    def __init__(self, path: Path, key: str) -> None:
        self._file = str(path)
        self._lines = hashlib.sha256()
        self._count = 0
        #: The line being written, ``[[row, …], facets]`` once ended, and its cases' digests.
        self._line = bytearray(b"[[")
        self._digests = bytearray()
        #: Set by the loader once the file's cases are all in: the other top-level keys,
        #: and the digest of each fixture and workspace the cases named.
        self.top: dict[str, Any] | None = None
        self.fixtures: dict[str, str] = {}
        self._entry = cache.EntryFile(_entry_path(path),
                                      orjson.dumps({"format": FORMAT, "key": key}) + b"\n")

    def add(self, row: tuple[Any, ...] | None, written: Sequence[Any], digests: bytes) -> None:
        """Keep one more public case: its values (``model.packed.row_of``), its assertions'
        arguments as written (``make_cases(args=…)``) and its facet digests (``PACKED``
        bytes, ``facets.packed_digests``)."""
        if not self._entry.open:
            return
        try:
            values = self._row(row, written)
            text = orjson.dumps(values, option=_OPTIONS)
            if orjson.loads(text) != values:
                raise _Unkept("not given back exactly")
        except (_Unkept, orjson.JSONEncodeError, TypeError, ValueError):
            self.abandon()
            return
        # Into the line's one buffer: no bytes object of orjson's is held (each takes 4 KiB,
        # whatever it holds).
        self._line += b"," if self._digests else b""
        self._line += text
        self._digests += digests
        if len(self._digests) == PACKED * LINE:
            self._end_line()

    def _end_line(self) -> None:
        if not self._entry.open or not self._digests:
            return
        self._line += b'],"' + base64.b64encode(self._digests) + b'"]\n'
        self._entry.write(self._line)
        if not self._entry.open:
            return
        self._lines.update(self._line)
        self._count += len(self._digests) // PACKED
        self._line, self._digests = bytearray(b"[["), bytearray()

    def _row(self, row: tuple[Any, ...] | None, written: Sequence[Any]) -> list[Any]:
        if row is None or row[_SPLIT] or row[_FILE] != self._file \
                or len(written) != len(row[_EXPECT]):
            raise _Unkept("not a public case of this file")
        values = list(row)
        values[_FILE] = None  # the file's own name, given back on reading
        values[_EXPECT] = [self._assertion(inner, arg)
                           for inner, arg in zip(row[_EXPECT], written, strict=True)]
        invocation = values[_INVOCATION]
        if invocation is not None and type(invocation) is not str:
            values[_INVOCATION] = _model_values(invocation, _INVOCATION_LAYOUT)
        if values[_USER] is not None:
            values[_USER] = _model_values(values[_USER], _USER_LAYOUT)
        return values

    def _assertion(self, inner: tuple[Any, ...], written: Any) -> list[Any]:
        values = list(inner)
        if values[_A_FILE] != self._file:
            raise _Unkept("an assertion of another file")
        values[_A_FILE] = None
        prepared = values[_ARG]
        values[_ARG] = written
        for i in _EVIDENCE:
            if values[i] is not None:
                if type(values[i]) is not Evidence:
                    raise _Unkept("an unknown evidence level")
                values[i] = values[i].value
        # Whether the check's prepare gave back the argument itself, else what it made.
        values.append(None if prepared is written else _prepared(prepared))
        return values

    def finish(self, suite_digest: str, body: str) -> None:
        """Put the entry in place: the load succeeded with this suite digest, made with a
        body whose digest is ``body``."""
        self._end_line()
        if not self._entry.open or self.top is None:
            self.abandon()
            return
        try:
            end = {"count": self._count, "lines": self._lines.hexdigest(), "top": self.top,
                   "digest": suite_digest, "body": body, "fixtures": self.fixtures}
            text = orjson.dumps({"end": end}, option=_OPTIONS)
            if orjson.loads(text) != {"end": end}:
                raise _Unkept("not given back exactly")
        except (_Unkept, orjson.JSONEncodeError, TypeError, ValueError):
            self.abandon()
            return
        self._entry.write(text + b"\n")
        self._entry.commit()

    def abandon(self) -> None:
        """Leave no entry behind (a load that failed, or a value JSON cannot hold)."""
        self._entry.abandon()


#: Where a suite's stored JSON is kept (``kept_suite_json``), beside its validated cases.
STORED = cache.HOME / "cache" / "stored"


def _stored_path(key: str, digest: str) -> Path:
    return STORED / (hashlib.sha256(f"{key}\0{digest}".encode()).hexdigest()[:40] + ".json")


def kept_suite_json(key: str, digest: str) -> tuple[IO[bytes], str] | None:
    """The suite's stored JSON kept by a run of the same load (``keep_suite_json``): the
    stream at its first byte and the ``sha256:`` digest its bytes must have, or None.

    The JSON the store keeps of a suite (``store.runs.documents.spill_suite``) is
    made from its cases alone, so the same file under the same code (``key``, the
    validated-case cache's key of the load) with the same suite digest (its
    fixtures and workspace included) gives the same bytes: a re-run copies them
    instead of writing 3 MB again for 10,000 cases. The caller compares the
    digest with the bytes it read (a damaged entry is then a miss). Suites with
    hidden cases are never kept (``LoadedSuite.cache_key``).
    """
    try:
        stream = _stored_path(key, digest).open("rb")
    except OSError:
        return None
    try:
        want = orjson.loads(stream.readline(200))["sha256"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        stream.close()
        return None
    if not isinstance(want, str) or not want.startswith("sha256:"):
        stream.close()
        return None
    return stream, want


def keep_suite_json(key: str, digest: str, written: Path, body_digest: str) -> None:
    """Keep the stored JSON in the file ``written`` (whose bytes have ``body_digest``) for
    the next run of the same load (``kept_suite_json``); quietly nothing if it cannot."""
    entry = cache.EntryFile(_stored_path(key, digest),
                            orjson.dumps({"sha256": body_digest}) + b"\n")
    try:
        with written.open("rb") as source:
            while entry.open and (chunk := source.read(1 << 20)):
                entry.write(chunk)
    except OSError:
        entry.abandon()
        return
    entry.commit()


def writer(path: Path, key: str) -> Writer | None:
    """A writer for ``path``'s entry, or None where entries are not kept (``cache.keeping``)."""
    return Writer(path, key) if cache.keeping() else None


# --------------------------------------------------------------------------- reading


@dataclass
class Hit:
    """An entry read back: the public cases packed, and what the loader checks again."""

    cases: PackedCases
    #: Each case's facet digests (``facets.PACKED`` bytes a case), in order.
    case_digests: bytearray
    #: The positions of the cases that name something of the world or that a load
    #: notes (a fixture, a workspace, a conversation, a skill, an outcome check): the
    #: loader reads these back whole.
    notable: list[int]
    top: dict[str, Any]
    suite_digest: str
    body: str
    fixtures: dict[str, str] = field(default_factory=dict)


#: Checks whose cases a load notes (``loader._Digests.note``): outcome checks and ``state``.
NOTED_CHECKS = frozenset({"files", "file", "command", "state"})


def read(path: Path, key: str) -> Hit | None:
    """The entry kept for ``path`` under ``key``, read back, or None (a miss, for whatever
    reason: no entry, another key, damaged, or an argument its check prepares otherwise
    now)."""
    try:
        stream = _entry_path(path).open("rb")
    except OSError:
        return None
    try:
        with stream:
            head = orjson.loads(stream.readline())
            if not isinstance(head, dict) or head.get("format") != FORMAT \
                    or head.get("key") != key:
                return None
            return _Reading(path).read(stream)
    except Exception:  # noqa: BLE001 - anything at all: a miss, and the file loads in full
        return None


class _Reading:
    """One entry's blocks made packed cases, each argument prepared again on the way."""

    def __init__(self, path: Path) -> None:
        self.file = str(path)
        self.context = LoadContext(base_dir=path.parent)
        self.cases = PackedCases()
        self.digests = bytearray()
        self.notable: list[int] = []

    def read(self, stream: IO[bytes]) -> Hit:
        lines = hashlib.sha256()
        for text in stream:
            item = orjson.loads(text)
            if isinstance(item, dict):
                end = item["end"]
                if next(stream, b"") or end["lines"] != lines.hexdigest() \
                        or end["count"] != len(self.cases) \
                        or len(self.digests) != PACKED * len(self.cases):
                    raise Miss("a damaged entry")
                top, fixtures = end["top"], end["fixtures"]
                if not isinstance(top, dict) or not isinstance(fixtures, dict):
                    raise Miss("a malformed end")
                return Hit(self.cases, self.digests, self.notable, top, str(end["digest"]),
                           str(end["body"]), fixtures)
            lines.update(text)
            rows, digests = item
            for row in rows:
                self._add(row)
            self.digests += base64.b64decode(digests, validate=True)
        raise Miss("no end")

    def _add(self, row: list[Any]) -> None:
        if type(row) is not list or len(row) != _CASE_LENGTH or row[_SPLIT] is not False:
            raise Miss("a malformed case")
        expect = [self._assertion(inner) for inner in row[_EXPECT]]
        row[_EXPECT] = expect
        row[_FILE] = self.file
        notable = row[_C["fixture"]] is not None or row[_C["workspace"]] is not None \
            or row[_C["turns"]] is not None or row[_USER] is not None \
            or any(inner[_CHECK] in NOTED_CHECKS for inner in expect)
        if type(row[_INVOCATION]) is list:
            row[_INVOCATION] = _model_of(row[_INVOCATION], _INVOCATION_LAYOUT)
            notable = True
        if row[_USER] is not None:
            row[_USER] = _model_of(row[_USER], _USER_LAYOUT)
        if notable:
            self.notable.append(len(self.cases))
        self.cases.append_row(row)  # lists where a row has tuples: packed as tuples

    def _assertion(self, values: list[Any]) -> list[Any]:
        if type(values) is not list or len(values) != _ASSERTION_LENGTH:
            raise Miss("a malformed assertion")
        mark = values.pop()
        written = values[_ARG]
        # Prepared again, as the load that kept it did: what it reads may have changed.
        prepared = REGISTRY[values[_CHECK]].prepare(written, self.context)
        if (prepared is written) != (mark is None) or \
                (mark is not None and _prepared(prepared) != mark):
            raise Miss("an argument prepared otherwise now")
        values[_ARG] = prepared
        values[_A_FILE] = self.file
        for i in _EVIDENCE:
            if values[i] is not None:
                values[i] = Evidence(values[i])
        return values

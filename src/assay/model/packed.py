"""Cases held compactly: a suite's case list as bytes, each read back as a ``Case`` when asked.

A validated ``Case`` with one assertion is about 2.5 KB of Python objects;
a suite of a hundred thousand of them would hold 250 MB before a trial ran.
``PackedCases`` keeps each case as the pickle of a tuple of its field values
(about 80 bytes for a one-line case: the file it was written in is kept
once for all cases), concatenated in blocks, and makes the ``Case`` again
on every read, without validating it a second time (it was validated when
it was packed). A read costs a few microseconds.

It is a ``Sequence[Case]``: ``len``, indexing, slicing, iteration and ``in``
work as on the list a suite held before. A case read twice is two equal
objects, not one (a few recent reads are kept, so the reads of one trial
share one); nothing in assay changes a case once loaded. The bytes live in
this process only; they are never written anywhere.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any, overload

from pydantic import BaseModel

from .restore import restored
from .suite import Assertion, Case, Split

#: Cases per block: one ``bytes`` each, so the packed form costs no object per case.
_BLOCK = 512
#: Recent reads kept: a trial reads its case a few times in a row.
_RECENT = 16
_PROTOCOL = 4
#: How every protocol-4 pickle starts (then a frame's length, for all but tiny ones).
_HEAD = b"\x80\x04"
_FRAMED = b"\x80\x04\x95"
#: One frame ends at 64 KiB: a pickle under this is one frame, whose head can be dropped.
_ONE_FRAME = 60_000


class Layout:
    """A model's field values as a tuple in field order, and the fields it was given as bits.

    ``model_fields_set`` (the fields pydantic counts as given) is kept, so a
    case reads back exactly as it was packed.
    """

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.names = tuple(model.model_fields)
        self.values = itemgetter(*self.names)
        self.bits = {name: 1 << i for i, name in enumerate(self.names)}
        #: The fields a dump writes, and those of them it leaves out when their value says so.
        written = [name for name, info in model.model_fields.items() if not info.exclude]
        self._dumped_names = tuple(written)
        self._dumped_values = itemgetter(*(self.names.index(name) for name in written))
        self._left_out_if = tuple((name, info.exclude_if) for name, info
                                  in model.model_fields.items()
                                  if not info.exclude and info.exclude_if is not None)
        self._sets: dict[int, frozenset[str]] = {}

    def dumped(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """A packed row's values as the model's JSON dump holds them, by name: the fields it
        excludes left out, as its ``exclude_if`` ones are when they say so."""
        data = dict(zip(self._dumped_names, self._dumped_values(row), strict=True))
        for name, leave_out in self._left_out_if:
            if leave_out(data[name]):
                del data[name]
        return data

    def given(self, model: BaseModel) -> int:
        """The fields ``model`` was given, as bits."""
        return sum(map(self.bits.__getitem__, model.__pydantic_fields_set__))

    def restore(self, row: tuple[Any, ...], given: int, **special: Any) -> Any:
        """A model from values already validated: pydantic's own unpickling, without a pickle."""
        values = dict(zip(self.names, row, strict=False))
        values.update(special)
        return self.made(values, given)

    def made(self, values: dict[str, Any], given: int) -> Any:
        """The model holding ``values`` (every field, validated) as given by ``given``'s fields.

        What pydantic's ``__setstate__`` does, with its four slots set directly:
        half the cost of a read, which the battery's plan pays for every case.
        """
        names = self._sets.get(given)
        if names is None:
            names = self._sets[given] = frozenset(
                name for i, name in enumerate(self.names) if given >> i & 1)
        return restored(self.model, values, set(names))


_CASE = Layout(Case)
_ASSERTION = Layout(Assertion)
#: The names of a packed row's values, in order (``row_of``; the given bits follow).
CASE_FIELDS = _CASE.names
ASSERTION_FIELDS = _ASSERTION.names
_CASE_EXPECT = _CASE.names.index("expect")
_CASE_SPLIT = _CASE.names.index("split")
_CASE_TRIALS = _CASE.names.index("trials")
_CASE_FILE = _CASE.names.index("file")
_ASSERTION_FILE = _ASSERTION.names.index("file")
_ASSERTION_CHECK = _ASSERTION.names.index("check")
#: An assertion's enum fields: a dump writes their values.
_EVIDENCE = ("min_evidence", "breach_evidence")


def row_of(case: Case) -> tuple[Any, ...] | None:
    """A case's values as packed: its fields' values in field order, ``expect`` a tuple
    of its assertions' values (each with the bits of its given fields at the end),
    ``split`` a bool (hidden), and the bits of the case's given fields at the end.

    None for anything unusual (a subclass, extra or private values), which is
    packed whole instead.
    """
    return _values(case, _same)


def _same(name: str | None) -> str | None:
    return name


def _values(case: Case, file: Callable[[str | None], Any]) -> tuple[Any, ...] | None:
    """``row_of``, with each file name given as ``file`` gives it (a place in a table)."""
    if type(case) is not Case or case.__pydantic_extra__ or case.__pydantic_private__ \
            or any(type(a) is not Assertion or a.__pydantic_extra__
                   or a.__pydantic_private__ for a in case.expect):
        return None
    expect = []
    for assertion in case.expect:
        inner = list(_ASSERTION.values(assertion.__dict__))
        inner[_ASSERTION_FILE] = file(inner[_ASSERTION_FILE])
        inner.append(_ASSERTION.given(assertion))
        expect.append(tuple(inner))
    row = list(_CASE.values(case.__dict__))
    row[_CASE_EXPECT] = tuple(expect)
    row[_CASE_SPLIT] = row[_CASE_SPLIT] == "hidden"  # a byte, not a word
    row[_CASE_FILE] = file(row[_CASE_FILE])
    row.append(_CASE.given(case))
    return tuple(row)


class PackedCases(Sequence[Case]):
    """A suite's cases as compact bytes, each made a ``Case`` again when read."""

    def __init__(self, cases: Iterable[Case] = ()) -> None:
        self._blocks: list[bytes] = []
        #: The current block's packed cases, until it fills and is joined into one bytes.
        self._open: list[bytes] = []
        #: Per case, where its bytes end within its block.
        self._ends = array("I")
        self._splits = bytearray()
        self._files: list[str | None] = []
        self._file_index: dict[str | None, int] = {}
        self._recent: dict[int, Case] = {}
        #: Every check an assertion of a packed case names (asked of a whole suite at once).
        self._check_names: set[str] = set()
        self.extend(cases)

    # ----------------------------------------------------------------- writing

    def append(self, case: Case, row: tuple[Any, ...] | None = None) -> None:
        """Pack one more case at the end (``row``: its ``row_of``, if made already)."""
        if row is not None:
            packed = self._pack_row(row)
        else:
            values = _values(case, self._file)
            if values is None:
                self._check_names.update(a.check for a in case.expect)
                packed = self._pickle((None, case))
            else:
                self._check_names.update(inner[_ASSERTION_CHECK]
                                         for inner in values[_CASE_EXPECT])
                packed = self._pickle(values)
        self._add(packed, case.split == "hidden")

    def append_row(self, row: Sequence[Any]) -> None:
        """Pack one more case at the end from its values as ``row_of`` gives them (lists
        for its tuples will do).

        The values are trusted as validated: they were a case's (the
        validated-case cache, ``suites.validated``, gives them back).
        """
        self._add(self._pack_row(row), bool(row[_CASE_SPLIT]))

    def _add(self, data: bytes, hidden: bool) -> None:
        end = len(data) + (self._ends[-1] if self._open else 0)
        self._open.append(data)
        self._ends.append(end)
        self._splits.append(hidden)
        if len(self._open) == _BLOCK:
            self._blocks.append(b"".join(self._open))
            self._open = []

    def extend(self, cases: Iterable[Case]) -> None:
        """Pack each case in turn."""
        for case in cases:
            self.append(case)

    def _file(self, name: str | None) -> int:
        found = self._file_index.get(name)
        if found is None:
            found = self._file_index[name] = len(self._files)
            self._files.append(name)
        return found

    def _pack_row(self, row: Sequence[Any]) -> bytes:
        """A ``row_of`` row's pickle, its files named by their place in ``_files``."""
        expect = []
        names = self._check_names
        for inner in row[_CASE_EXPECT]:
            values = list(inner)
            names.add(values[_ASSERTION_CHECK])
            values[_ASSERTION_FILE] = self._file(values[_ASSERTION_FILE])
            expect.append(tuple(values))
        values = list(row)
        values[_CASE_EXPECT] = tuple(expect)
        values[_CASE_FILE] = self._file(values[_CASE_FILE])
        return self._pickle(tuple(values))

    @staticmethod
    def _pickle(value: tuple[Any, ...]) -> bytes:
        data = pickle.dumps(value, _PROTOCOL)
        if data.startswith(_FRAMED) and len(data) < _ONE_FRAME:
            return data[11:]  # the same pickle without its head: 11 bytes a case
        return data

    # ----------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> Case: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Case]: ...

    def __getitem__(self, index: int | slice) -> Case | Sequence[Case]:
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(len(self)))]
        count = len(self._ends)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("case index out of range")
        found = self._recent.get(index)
        if found is None:
            found = self._read(index)
            if len(self._recent) >= _RECENT:
                del self._recent[next(iter(self._recent))]
            self._recent[index] = found
        return found

    def get(self, index: int) -> Case:
        """The case at ``index``, made anew (never one shared with another reader)."""
        if not 0 <= index < len(self._ends):
            raise IndexError("case index out of range")
        return self._read(index)

    def __iter__(self) -> Iterator[Case]:
        for index in range(len(self._ends)):
            yield self._read(index)

    def ids(self) -> Iterator[str]:
        """Each case's id, in order, without making the cases (a fifth of the cost)."""
        for row in self._rows():
            yield row[1].id if row[0] is None else row[0]

    def trials(self) -> Iterator[int | None]:
        """Each case's own ``trials`` (None: the suite's), without making the cases."""
        for row in self._rows():
            yield row[1].trials if row[0] is None else row[_CASE_TRIALS]

    def check_names(self) -> frozenset[str]:
        """Every check named by an assertion of any case, without reading a case."""
        return frozenset(self._check_names)

    def assertion_files(self) -> Iterator[tuple[str, list[str | None]]]:
        """Each case's id and the file of each of its assertions, without making the cases."""
        files = self._files
        for row in self._rows():
            if row[0] is None:
                yield row[1].id, [a.file for a in row[1].expect]
            else:
                yield row[0], [files[inner[_ASSERTION_FILE]] for inner in row[_CASE_EXPECT]]

    def _rows(self, indices: Iterable[int] | None = None) -> Iterator[tuple[Any, ...]]:
        for index in range(len(self._ends)) if indices is None else indices:
            yield self._row(index)

    def _row(self, index: int) -> tuple[Any, ...]:
        """The values packed for the case at ``index`` (a ``(None, case)`` kept whole)."""
        data = self._bytes(index)
        row: tuple[Any, ...] = pickle.loads(data if data[0] == _HEAD[0] else _HEAD + data)
        return row

    def having(self, checks: Collection[str],
               indices: Iterable[int] | None = None) -> Iterator[Case]:
        """The cases (at ``indices``, else all) with an assertion whose check is one of
        ``checks``, in order: the others are passed over without being made."""
        for index in range(len(self._ends)) if indices is None else indices:
            row = self._row(index)
            if row[0] is None:
                if any(a.check in checks for a in row[1].expect):
                    yield row[1]
            elif any(inner[_ASSERTION_CHECK] in checks for inner in row[_CASE_EXPECT]):
                yield self._read(index)

    def dumped(self, start: int, stop: int) -> list[dict[str, Any]] | None:
        """The cases from ``start`` to ``stop`` as the data pydantic's JSON dump of each
        ``Case`` writes (fields in order, those it leaves out left out, enums as their
        values), for an encoder that writes the same bytes; None if any case is kept
        whole (``_pack``), whose dump only pydantic knows."""
        found = []
        for row in self._rows(range(start, stop)):
            if row[0] is None:
                return None
            expect = []
            for inner in row[_CASE_EXPECT]:
                data = _ASSERTION.dumped(inner)
                for name in _EVIDENCE:
                    if data[name] is not None:
                        data[name] = data[name].value
                expect.append(data)
            data = _CASE.dumped(row)
            data["expect"] = expect
            data["split"] = "hidden" if row[_CASE_SPLIT] else "public"
            found.append(data)
        return found

    def split_of(self, index: int) -> Split:
        """Whether the case at ``index`` is public or hidden, without reading it."""
        return "hidden" if self._splits[index] else "public"

    def of_split(self, split: Split) -> Sequence[Case]:
        """The cases of one split, in order, still packed (a view of these)."""
        flag = split == "hidden"
        return _View(self, array("I", (i for i, s in enumerate(self._splits) if s == flag)))

    def _bytes(self, index: int) -> bytes | memoryview:
        block, at = divmod(index, _BLOCK)
        start = self._ends[index - 1] if at else 0
        end = self._ends[index]
        if block < len(self._blocks):
            return memoryview(self._blocks[block])[start:end]
        return self._open[at]

    def _read(self, index: int) -> Case:
        data = self._bytes(index)  # ``_row``, written out: the battery's plan reads every case
        row = pickle.loads(data if data[0] == _HEAD[0] else _HEAD + data)
        if row[0] is None:
            case: Case = row[1]
            return case
        files, names, made = self._files, _ASSERTION.names, _ASSERTION.made
        expect = []
        for inner in row[_CASE_EXPECT]:
            values = dict(zip(names, inner, strict=False))
            values["file"] = files[inner[_ASSERTION_FILE]]
            expect.append(made(values, inner[-1]))
        values = dict(zip(_CASE.names, row, strict=False))
        values["expect"] = expect
        values["split"] = "hidden" if row[_CASE_SPLIT] else "public"
        values["file"] = files[row[_CASE_FILE]]
        case_made: Case = _CASE.made(values, row[-1])
        return case_made

    def __repr__(self) -> str:
        return f"PackedCases({len(self)} cases)"

    def __eq__(self, other: object) -> bool:
        # Equal to a list of equal cases, as the list a suite held before was.
        if not isinstance(other, list | PackedCases | _View):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list


class _View(Sequence[Case]):
    """Some of a ``PackedCases``' cases by position, read through it."""

    def __init__(self, packed: PackedCases, positions: array[int]) -> None:
        self._packed = packed
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> Case: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Case]: ...

    def __getitem__(self, index: int | slice) -> Case | Sequence[Case]:
        if isinstance(index, slice):
            return [self._packed[i] for i in self._positions[index]]
        return self._packed[self._positions[index]]

    def __iter__(self) -> Iterator[Case]:
        for index in self._positions:
            yield self._packed.get(index)

    def having(self, checks: Collection[str]) -> Iterator[Case]:
        """``PackedCases.having`` of these cases."""
        return self._packed.having(checks, self._positions)

    def check_names(self) -> frozenset[str]:
        """The checks any case of the whole packed suite names (those of these among them)."""
        return self._packed.check_names()

    def __eq__(self, other: object) -> bool:
        # Equal to a list of equal cases, as the list a suite held before was.
        if not isinstance(other, list | PackedCases | _View):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

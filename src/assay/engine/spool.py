"""A battery's folded cases, kept on disk by their place in the report, read back as asked.

A battery of a hundred thousand cases would hold every ``CaseResult`` (its
trials and verdicts) until the report: over a gigabyte. Instead each case,
once final, is written here as the JSON the report gives it, and the report
lists its cases through this sequence: reading one parses it back, and a
writer of the report's bytes (``store.runs.documents``) copies the stored JSON as
it is, so a case is serialised once. What the JSON leaves out of a case
(its trials' traces and opinions) is in the store, where every trial was
recorded as it finished; the report never carried them.

The file is an unnamed temporary file: it goes when the spool does.
"""

from __future__ import annotations

import json
import tempfile
from abc import abstractmethod
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, TypeVar, overload

from pydantic_core import PydanticSerializationError

from ..model.compact import fast_json
from ..model.records import PlainCase
from ..model.result import CaseResult, HoldoutResult, Report

#: A case's outcome, and a trial's, by code.
OUTCOMES = ("pass", "fail", "inconclusive", "broken")
_SCORED = 1
_TRIAL = 2
#: The spool's write buffer: a flush is a system call that lets the lane's threads take
#: the GIL from the loop, so it should come every few hundred cases, not every dozen.
_BUFFER = 256 * 1024


_T = TypeVar("_T", CaseResult, CaseResult | HoldoutResult)


class _ReadBack(Sequence[_T]):
    """A sequence whose items are made when asked for (``_at``): indexing, slices, equality."""

    @abstractmethod
    def _at(self, index: int) -> _T:
        """The item at ``index`` (in range), read back."""

    @overload
    def __getitem__(self, index: int) -> _T: ...

    @overload
    def __getitem__(self, index: slice) -> list[_T]: ...

    def __getitem__(self, index: int | slice) -> _T | list[_T]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("case index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[_T]:
        for index in range(len(self)):
            yield self._at(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: dict[int, Any]) -> list[_T]:
        # A deep copy of a report is a report that holds its own cases.
        return list(self)


class CaseSpool(_ReadBack[CaseResult]):
    """``size`` case results by position, each ``put`` once, kept as JSON in a temporary file."""

    def __init__(self, size: int) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="assay-cases-", buffering=_BUFFER)
        self._start = array("q", [-1]) * size
        self._length = array("q", [0]) * size
        #: Per position, 1 for a hidden case (its redacted view names it holdout-N).
        self._hidden = bytearray(size)
        #: Per position, what a reader may ask without parsing the case: its outcome
        #: (``OUTCOMES``), and ``_SCORED`` plus a bit per outcome its trials had.
        self._outcome = bytearray(size)
        self._facts = bytearray(size)
        self._end = 0
        #: Whether a read left the file's position elsewhere than at its end.
        self._reading = False

    def put(self, index: int, case: CaseResult | PlainCase) -> None:
        """Keep the case at ``index`` (its report JSON; traces and opinions are not in it)."""
        self.put_raw(index, case_json(case), split=case.split, outcome=case.outcome,
                     score=case.score, trials=[t.outcome for t in case.trials])

    def append_raw(self, data: bytes, **facts: Any) -> None:
        """Keep one more case's report JSON, after the others (``read_report``)."""
        self._start.append(-1)
        self._length.append(0)
        self._hidden.append(0)
        self._outcome.append(0)
        self._facts.append(0)
        self.put_raw(len(self._start) - 1, data, **facts)

    def put_raw(self, index: int, data: bytes, *, split: str, outcome: str,
                score: float | None, trials: list[str]) -> None:
        """Keep a case's report JSON as given, with what readers ask of it unparsed."""
        self._hidden[index] = split == "hidden"
        self._outcome[index] = OUTCOMES.index(outcome) if outcome in OUTCOMES else 0
        facts = _SCORED if score is not None else 0
        for trial in trials:
            if trial in OUTCOMES:
                facts |= _TRIAL << OUTCOMES.index(trial)
        self._facts[index] = facts
        self._write(index, data)

    def outcomes(self) -> list[str]:
        """Each case's outcome, in order, without reading a case."""
        return [OUTCOMES[code] for code in self._outcome]

    def splits(self) -> list[str]:
        """Each case's split, in order, without reading a case."""
        return ["hidden" if flag else "public" for flag in self._hidden]

    def scored(self) -> bool:
        """Whether a case has a number from opinions (its ``score``)."""
        return any(facts & _SCORED for facts in self._facts)

    def trial_outcomes(self, index: int) -> set[str]:
        """The outcomes the case's trials had, without reading it."""
        facts = self._facts[index]
        return {name for i, name in enumerate(OUTCOMES) if facts & (_TRIAL << i)}

    def _write(self, index: int, data: bytes) -> None:
        file = self._file
        if self._reading:  # a seek flushes the buffer: only after a read moved the file
            file.seek(self._end)
            self._reading = False
        file.write(data)
        self._start[index], self._length[index] = self._end, len(data)
        self._end += len(data)

    def has(self, index: int) -> bool:
        """Whether the case at ``index`` was put."""
        return self._start[index] >= 0

    def raw(self, index: int) -> bytes:
        """The JSON the case at ``index`` was kept as (what the report's bytes hold)."""
        start = self._start[index]
        if start < 0:
            raise LookupError(f"case {index} was not folded")
        self._reading = True
        self._file.seek(start)
        return self._file.read(self._length[index])

    def raws(self) -> Iterator[bytes]:
        """Every case's JSON, in order."""
        for index in range(len(self._start)):
            yield self.raw(index)

    def __len__(self) -> int:
        return len(self._start)

    def redacted(self) -> Redacted:
        """The cases as they may leave the harness: each hidden one as ``holdout-N``."""
        return Redacted(self)

    def _at(self, index: int) -> CaseResult:
        return CaseResult.model_validate_json(self.raw(index))

    def __repr__(self) -> str:
        return f"CaseSpool({len(self)} cases)"


    def close(self) -> None:
        """Let the file go now rather than when the spool is collected."""
        self._file.close()


class Redacted(_ReadBack[CaseResult | HoldoutResult]):
    """A spool's cases with each hidden one as ``holdout-N`` (N its rank among them).

    ``grading.report.redact`` over a spool: nothing of a hidden case but its
    outcome is read out of its JSON.
    """

    def __init__(self, spool: CaseSpool) -> None:
        self._spool = spool
        hidden = spool._hidden
        #: Per position, how many hidden cases come before it.
        self._rank = array("l", [0]) * len(hidden)
        seen = 0
        for index, flag in enumerate(hidden):
            self._rank[index] = seen
            seen += flag

    def __len__(self) -> int:
        return len(self._spool)

    def _at(self, index: int) -> CaseResult | HoldoutResult:
        return self._holdout(index) if self._spool._hidden[index] else self._spool[index]

    def _holdout(self, index: int) -> HoldoutResult:
        outcome = OUTCOMES[self._spool._outcome[index]]
        return HoldoutResult(id=f"holdout-{self._rank[index] + 1}", outcome=outcome)  # type: ignore[arg-type]

    def outcomes(self) -> list[str]:
        """Each case's outcome, in order (a holdout's is its case's)."""
        return self._spool.outcomes()

    def splits(self) -> list[str]:
        """Each case's split, in order."""
        return self._spool.splits()

    def scored(self) -> bool:
        """Whether a public case has a score (a holdout shows none)."""
        spool = self._spool
        return any(facts & _SCORED and not hidden
                   for facts, hidden in zip(spool._facts, spool._hidden, strict=True))

    def trial_outcomes(self, index: int) -> set[str]:
        """The outcomes of the case's trials (a holdout shows no trial)."""
        return set() if self._spool._hidden[index] else self._spool.trial_outcomes(index)

    def raws(self) -> Iterator[bytes]:
        """Each case's JSON as the redacted report writes it."""
        for index in range(len(self)):
            yield case_json(self._holdout(index)) if self._spool._hidden[index] \
                else self._spool.raw(index)

    def redacted(self) -> Redacted:
        """Already redacted: itself."""
        return self


def read_report(text: str | Iterable[str]) -> Report:
    """A stored report's JSON (``runs.report``, or its parts) as a report whose cases are spooled.

    How a queue's submitter reads the run its workers sealed: the text is
    read a piece at a time (``run_texts``), each case parsed once, to find
    where it ends and its split, and kept as the very text it was stored
    as, so the report written from it (``--json``) has the stored bytes; the
    report model holds no case, and this holds about one piece of the text.
    """
    pieces = iter([text] if isinstance(text, str) else text)
    decoder = json.JSONDecoder()
    buffer = ""

    def more() -> bool:
        nonlocal buffer
        piece = next(pieces, None)
        if piece is None:
            return False
        buffer += piece
        return True

    while (at := buffer.find(_CASES)) < 0:
        if not more():
            raise ValueError("a stored report without its cases")
    head = buffer[:at + len(_CASES)]
    buffer, position = buffer[at + len(_CASES):], 0
    spool = CaseSpool(0)
    while True:
        while position >= len(buffer):
            if not more():
                raise ValueError("a stored report that ends within its cases")
        if buffer[position] == "]":
            break
        try:
            case, end = decoder.raw_decode(buffer, position)
        except json.JSONDecodeError:
            if more():  # the case goes on in the next piece
                continue
            raise
        if not isinstance(case, dict):
            raise ValueError("a stored report's case is not an object")
        trials = case.get("trials") or []
        spool.append_raw(buffer[position:end].encode("utf-8"), split=case.get("split"),
                         outcome=case.get("outcome"), score=case.get("score"),
                         trials=[t.get("outcome") for t in trials if isinstance(t, dict)])
        position = end
        while position >= len(buffer) and more():
            pass
        if position < len(buffer) and buffer[position] == ",":
            position += 1
        if position > _KEEP:  # what was read is let go
            buffer, position = buffer[position:], 0
    tail = buffer[position:] + "".join(pieces)
    shell = Report.model_validate_json(head + tail)
    shell.__dict__["cases"] = spool
    return shell


#: Characters of a stored report's text read past before they are let go (``read_report``).
_KEEP = 1 << 20

#: Where a stored report's cases begin (``model.result.report_json``).
_CASES = '"cases":['


def case_json(case: Any) -> bytes:
    """A case's JSON as the report writes it (by alias, compact).

    A battery's plain record (``model.records.PlainCase``) is written by orjson,
    byte for byte as the model would be (``model.compact``); what orjson
    refuses is written through the model. Text UTF-8 cannot hold (a lone
    surrogate) is written as a ``\\uXXXX`` escape by the standard library
    instead of losing the case.
    """
    if isinstance(case, PlainCase):
        fast = fast_json(case.json_dict())
        if fast is not None:
            return fast
        case = case.to_model()
    try:
        return case.__pydantic_serializer__.to_json(case, by_alias=True)  # type: ignore[no-any-return]
    except PydanticSerializationError:
        return json.dumps(case.model_dump(mode="json", by_alias=True),
                          separators=(",", ":")).encode()

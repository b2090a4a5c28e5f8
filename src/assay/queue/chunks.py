"""A queued battery cut into chunks: the trials each job runs (pure).

A job costs the queue a few milliseconds of CPU whatever it holds
(docs/performance.md, "The queue"), so a job holds a chunk of trials, not
one. A chunk names cases and their trial numbers; an adaptive case (one
whose trials grow while its rate straddles its threshold) is never cut: its
chunk names the case alone (``None``) and the worker's battery adds its
trials as they finish.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Trials per job unless ``--chunk`` says otherwise: the queue's cost per trial is
#: then a fiftieth of its cost per job.
DEFAULT_CHUNK = 50

#: One chunk: (case id, trial numbers), trial numbers None for a whole adaptive case.
Items = list[tuple[str, list[int] | None]]


@dataclass(frozen=True)
class Chunk:
    """A chunk as a worker reads it: what to run, and which of its cases are hidden."""

    #: Case id → the trial numbers to run (None: every trial an adaptive case plans).
    only: dict[str, set[int] | None]
    #: The chunk's hidden cases (a trial recorded for one is stored as hidden).
    hidden: frozenset[str]

    def split(self, case_id: str) -> str:
        """``hidden`` or ``public``: the split a trial of ``case_id`` is stored under."""
        return "hidden" if case_id in self.hidden else "public"


def cut(trials: Iterable[tuple[str, int]], whole: Mapping[str, int], size: int) -> list[Items]:
    """Cut a battery's planned trials into chunks of about ``size`` trials, in plan order.

    ``trials``: (case id, trial number) of every fixed trial; ``whole``: each
    adaptive case and the trials it starts with (it counts as that many).
    Every planned trial lands in exactly one chunk; an adaptive case's chunk
    holds it whole.
    """
    if size < 1:
        raise ValueError(f"a chunk holds at least one trial, not {size}")
    chunks: list[Items] = []
    current: Items = []
    filled = 0
    by_case: dict[str, list[int]] = {}

    def close() -> None:
        nonlocal current, filled, by_case
        if current:
            chunks.append(current)
        current, filled, by_case = [], 0, {}

    for case_id, n in trials:
        numbers = by_case.get(case_id)
        if numbers is None:
            numbers = by_case[case_id] = []
            current.append((case_id, numbers))
        numbers.append(n)
        filled += 1
        if filled >= size:
            close()
    for case_id, first in whole.items():
        if filled and filled + first > size:
            close()
        current.append((case_id, None))
        filled += first
        if filled >= size:
            close()
    close()
    return chunks


def encode(items: Items, hidden: Iterable[str] = ()) -> str:
    """A chunk's items as the ``run_chunks.items`` JSON; a hidden case's entry is marked."""
    secret = set(hidden)
    return json.dumps([[case_id, numbers, *(["hidden"] if case_id in secret else [])]
                       for case_id, numbers in items],
                      separators=(",", ":"), ensure_ascii=False)


def decode(text: str) -> Chunk:
    """``run_chunks.items`` as a ``Chunk``."""
    only: dict[str, set[int] | None] = {}
    hidden: set[str] = set()
    for entry in json.loads(text):
        case_id, numbers = str(entry[0]), entry[1]
        if len(entry) > 2 and entry[2] == "hidden":
            hidden.add(case_id)
        if numbers is None:
            only[case_id] = None
        else:
            have = only.setdefault(case_id, set())
            if have is not None:
                have.update(int(n) for n in numbers)
    return Chunk(only, frozenset(hidden))


def count(only: dict[str, set[int] | None], whole: int = 1) -> int:
    """Trials a chunk names (an adaptive case counted as ``whole``)."""
    return sum(whole if numbers is None else len(numbers) for numbers in only.values())


def singles(only: dict[str, set[int] | None], recorded: Sequence[tuple[str, int]]) -> list[Items]:
    """A stalled chunk's trials not ``recorded`` yet, one chunk each (an adaptive case whole)."""
    done = set(recorded)
    split: list[Items] = []
    for case_id, numbers in only.items():
        if numbers is None:
            split.append([(case_id, None)])
            continue
        split.extend([(case_id, [n])] for n in sorted(numbers) if (case_id, n) not in done)
    return split

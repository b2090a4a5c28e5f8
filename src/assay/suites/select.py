"""Some of a suite's public cases: ``assay run --case PATTERN --tag TAG`` (decision 0055).

A part is for the loop of working on a few cases: run them, change the
agent, run them again. It is never the suite's battery, so it is never
recorded, and its report carries the flag ``part-of-suite``. Hidden cases
are never chosen: a pattern or a tag that reached them would tell, by the
count of holdouts that ran, which hidden ids or tags exist, and a hidden
score over a handful of cases would read as the hidden score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..model import Case
from ..model.packed import PackedCases
from .loader import LoadedSuite


@dataclass(frozen=True)
class Part:
    """What a selection kept of one suite: the part, and how many public cases it had."""

    loaded: LoadedSuite
    chosen: int
    public: int


def select_cases(loaded: Sequence[LoadedSuite], patterns: Sequence[str],
                 tags: Sequence[str]) -> list[Part]:
    """Each suite's public cases whose id matches a pattern and that have a tag.

    A pattern is a shell glob on the case id (``refund-*``); with patterns
    and tags both given a case needs both (any pattern, any tag). Suites
    with no case chosen are left out; the order of cases is the suite's.
    """
    wanted_tags = set(tags)
    parts = []
    for item in loaded:
        cases = item.suite.cases
        public = [i for i in range(len(cases)) if _split(cases, i) == "public"]
        chosen = []
        for index in public:
            case = cases[index]
            if patterns and not any(fnmatchcase(case.id, p) for p in patterns):
                continue
            if wanted_tags and wanted_tags.isdisjoint(case.tags):
                continue
            chosen.append(index)
        if chosen:
            parts.append(Part(item.part_of(chosen), len(chosen), len(public)))
    return parts


def _split(cases: Sequence[Case], index: int) -> str:
    """A case's split, without making the case when the cases are packed."""
    return cases.split_of(index) if isinstance(cases, PackedCases) else cases[index].split

"""What judge calibration reads: decided review items with their trials' judge opinions.

One read transaction. A decided item that names a trial of a stored run
(queued when the run was sealed, or added by hand with ``assay review
--add``) comes back with what each quality assertion of that trial was —
its check and prepared argument, from the suite the run stored — and the
opinions its judges gave, rebuilt as ``store.database`` rebuilds them for
replay (a raw answer whose bytes no longer match their digest comes back as
an error, never as an answer). Judging the pairs is ``analysis.calibration``'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...canonical import digest_bytes
from .. import schema
from ..database import _opinion
from ..runs.texts import read_text
from ..runs.trials import OPINION_TEXTS

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ...judging.opinion import Opinion
    from ..database import Store

#: Case ids per ``IN (…)`` query: well under every backend's parameter limit.
_CHUNK = 500


@dataclass(frozen=True)
class JudgedAssertion:
    """One assertion of a trial that has opinions: its check and argument, the answers in order.

    ``check`` and ``arg`` are None when the run's stored suite does not
    describe the assertion (no suite, no such case or position). A hidden
    case's argument and the judges' answers are its content: left out of
    ``repr``, so a stray log line cannot print them.
    """

    position: int
    check: str | None
    arg: Any = field(repr=False)
    opinions: list[Opinion] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class ReviewedTrial:
    """A decided review item of one trial of a stored run, with its judged assertions.

    ``case_id`` is the real id (a hidden case's too): only ``label`` may be shown
    for a hidden one, and ``repr`` shows neither the id nor the assertions.
    """

    item: int
    run_id: str
    case_id: str = field(repr=False)
    label: str
    split: str
    n: int
    verdict: str
    reviewer: str | None
    assertions: list[JudgedAssertion] = field(repr=False)


@dataclass(frozen=True)
class Reviews:
    """Decided items of run trials, oldest first, and how many decided items had no trial."""

    trials: list[ReviewedTrial]
    elsewhere: int


def reviewed_trials(store: Store) -> Reviews:
    """Every decided item that names a run's trial, with that trial's opinions, by item number."""
    c = schema.review_items.c
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(c.id, c.run_id, c.case_id, c.split, c.n, c.label, c.verdict, c.reviewer)
            .where(c.verdict.is_not(None)).order_by(c.id)).all()
        named = [row for row in rows
                 if row.run_id is not None and row.case_id is not None and row.n is not None]
        by_run: dict[str, set[tuple[str, int]]] = {}
        for row in named:
            by_run.setdefault(row.run_id, set()).add((row.case_id, int(row.n)))
        judged: dict[tuple[str, str, int], list[JudgedAssertion]] = {}
        for run_id, wanted in by_run.items():
            expects = _expects(connection, run_id, {case for case, _ in wanted})
            for (case_id, n), positions in _trial_opinions(connection, run_id, wanted).items():
                judged[(run_id, case_id, n)] = [
                    JudgedAssertion(position, *_assertion(expects, case_id, position),
                                    opinions=opinions)
                    for position, opinions in sorted(positions.items())]
    trials = [ReviewedTrial(item=int(row.id), run_id=row.run_id, case_id=row.case_id,
                            label=row.label, split=row.split, n=int(row.n), verdict=row.verdict,
                            reviewer=row.reviewer,
                            assertions=judged.get((row.run_id, row.case_id, int(row.n)), []))
              for row in named]
    return Reviews(trials, elsewhere=len(rows) - len(named))


def _expects(connection: Connection, run_id: str,
             cases: set[str]) -> dict[str, list[tuple[str | None, Any]]]:
    """Each wanted case's assertions as (check, argument), from the suite the run stored."""
    r = schema.runs.c
    text = read_text(connection, run_id, "suite",
                     connection.execute(sa.select(r.suite).where(r.run_id == run_id)).scalar())
    try:
        body = json.loads(text)["suite"] if text else {}
        found: dict[str, list[tuple[str | None, Any]]] = {}
        for case in body.get("cases") or []:
            if isinstance(case, dict) and case.get("id") in cases:
                found[case["id"]] = [
                    (a.get("check"), a.get("arg")) if isinstance(a, dict) else (None, None)
                    for a in case.get("expect") or []]
        return found
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}  # a suite that cannot be read describes nothing: its opinions are unreadable


def _assertion(expects: dict[str, list[tuple[str | None, Any]]], case_id: str,
               position: int) -> tuple[str | None, Any]:
    listed = expects.get(case_id) or []
    if 0 <= position < len(listed) and isinstance(listed[position][0], str):
        return listed[position]
    return None, None


def _trial_opinions(connection: Connection, run_id: str, wanted: set[tuple[str, int]]
                    ) -> dict[tuple[str, int], dict[int, list[Opinion]]]:
    """The opinions of the ``wanted`` trials of one run, by trial and position, in answer order.

    Each is its ``judge-opinion`` content (checked against its digest) with
    its raw answer read back from its blob, as ``store.database`` reads them.
    """
    o, b = schema.opinions.c, schema.blobs.c
    cases = sorted({case for case, _ in wanted})
    contents: list[tuple[Any, dict[str, Any] | None]] = []
    texts_wanted: set[str] = set()
    for at in range(0, len(cases), _CHUNK):
        rows = connection.execute(
            sa.select(o.case_id, o.n, o.position, o.item, o.content_digest, b.content)
            .outerjoin(schema.blobs, b.digest == o.content_digest)
            .where(o.run_id == run_id, o.case_id.in_(cases[at:at + _CHUNK]))
            .order_by(o.case_id, o.n, o.position, o.item))
        for row in rows:
            if (row.case_id, int(row.n)) not in wanted:
                continue
            data = _content(row.content, row.content_digest)
            if data is not None:
                texts_wanted.update(data[name] for name in OPINION_TEXTS
                                    if isinstance(data.get(name), str))
            contents.append((row, data))
    texts: dict[str, bytes | None] = {}
    digests = sorted(texts_wanted)
    for at in range(0, len(digests), _CHUNK):
        texts.update({x.digest: None if x.content is None else bytes(x.content)
                      for x in connection.execute(sa.select(b.digest, b.content)
                                                  .where(b.digest.in_(digests[at:at + _CHUNK])))})
    found: dict[tuple[str, int], dict[int, list[Opinion]]] = {}
    for row, data in contents:
        found.setdefault((row.case_id, int(row.n)), {}).setdefault(int(row.position), []) \
            .append(_opinion(data, texts))
    return found


def _content(content: Any, content_digest: str) -> dict[str, Any] | None:
    """An opinion entry's content, or None when it is gone or no longer matches its digest."""
    if content is None or digest_bytes(bytes(content)) != content_digest:
        return None
    try:
        data = json.loads(bytes(content))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


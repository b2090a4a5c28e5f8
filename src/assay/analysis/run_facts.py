"""A finished run as compare, gate and drift read it: per case, what it was and how it went.

Built from a report's JSON, a stored run's (full: hidden cases keep their
real ids, so two stored runs align them by identity) or a report file's
(redacted: hidden cases are ``holdout-N``). Plain data, read once: the
deciders below are pure functions of these facts (DESIGN "analysis/").

Hidden content stays where it is: a ``CaseFacts`` keeps a hidden case's id
for alignment only; every outward surface names it by ``label``.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError

#: The run's facets a row is aligned on besides its own (SPEC §8): the harness,
#: the host's version and the model. A case's own ``model`` (what its trials say
#: answered) replaces the run's. And ``agent_cache``: a run whose answers may be
#: kept ones is not compared with one that called the model (decision 0033).
RUN_FACETS = ("harness", "host_version", "model", "agent_cache")
#: What a run that does not record a facet of ``RUN_FACETS`` did: a run without
#: ``agent_cache`` (made without the flag, or before it existed) called the model.
RUN_DEFAULTS = {"agent_cache": "off"}


@dataclass(slots=True)  # not frozen: a 10,000-case run makes 10,000 of them at once
class CaseFacts:
    """One case of a run: outcome, pass@1, what it was (facets), what it spent."""

    id: str
    #: What outward surfaces call it: its id, or ``holdout-N`` for a hidden case.
    label: str
    split: str
    outcome: str
    pass_at_1: float
    facets: Mapping[str, str]
    usd: float | None = None
    tokens: int | None = None
    duration_s: float = 0.0
    trials: int = 0
    #: Structural checks that failed in some trial (assertion labels); a hidden
    #: case's are withheld from every surface, like its notes.
    breaches: tuple[str, ...] = ()
    #: Quality checks whose interval straddles their threshold (assertion labels).
    straddles: tuple[str, ...] = ()
    synthetic: bool = False


@dataclass(frozen=True)
class RunFacts:
    """One sealed run, from its report."""

    run_id: str
    #: ``store`` (hidden cases by identity) or ``file`` (hidden cases as holdout-N).
    source: str
    suite_id: str
    suite_digest: str
    hidden_set: str | None
    target_uri: str
    target_digest: str
    facets: Mapping[str, str]
    started_at: str
    overall: float | None
    public: float | None
    hidden: float | None
    pass_mark: float
    passed: bool
    interrupted: bool
    usd: float | None
    tokens: int | None
    cases: list[CaseFacts] = field(default_factory=list)
    seal: Mapping[str, Any] | None = None


def from_report(data: Any, source: str, seal: Mapping[str, Any] | None = None,
                *, where: str = "the report") -> RunFacts:
    """The facts of a report's JSON (a dict); a malformed one is a usage error naming ``where``."""
    try:
        return _from_report(data, source, seal)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(f"{where} is not an assay report (schema assay.report/1): "
                         f"{_what(error)}") from None


def _what(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"it has no {error.args[0]!r}"
    return "a field has the wrong form"


def _from_report(data: Any, source: str, seal: Mapping[str, Any] | None) -> RunFacts:
    if not isinstance(data, dict) or data.get("schema") != "assay.report/1":
        raise ValueError("schema")
    target, suite, scores, cost = data["target"], data["suite"], data["scores"], data["cost"]
    run_facets = {k: str(v) for k, v in (target.get("facets") or {}).items()}
    shared = {**RUN_DEFAULTS, **{k: v for k, v in run_facets.items() if k in RUN_FACETS}}
    cases = []
    hidden = 0
    for case in data["cases"]:
        split = str(case["split"])
        label = str(case["id"])
        if split == "hidden":
            hidden += 1
            label = f"holdout-{hidden}"
        cases.append(_case(case, label, shared))
    tokens = None
    if cost.get("input_tokens") is not None or cost.get("output_tokens") is not None:
        tokens = int(cost.get("input_tokens") or 0) + int(cost.get("output_tokens") or 0)
    return RunFacts(
        run_id=str(data["run_id"]), source=source, suite_id=str(suite["id"]),
        suite_digest=str(suite["digest"]), hidden_set=suite.get("hidden_set"),
        target_uri=str(target["uri"]), target_digest=str(target["digest"]),
        facets=run_facets, started_at=str(data["started_at"]),
        overall=scores.get("overall"), public=scores.get("public"),
        hidden=scores.get("hidden"), pass_mark=float(scores["pass_mark"]),
        passed=bool(scores["passed"]), interrupted=bool(data.get("interrupted", False)),
        usd=cost.get("usd"), tokens=tokens, cases=cases,
        seal=seal if seal is not None else data.get("seal"),
    )


def _case(case: dict[str, Any], label: str, shared: Mapping[str, str]) -> CaseFacts:
    """One case's facts; ``shared``: the run's facets every row is aligned on."""
    outcome = str(case["outcome"])
    trials = case.get("trials")
    own = case.get("facets") or {}
    if any(type(v) is not str for v in own.values()):  # a report file is anyone's
        own = {str(k): str(v) for k, v in own.items()}
    facets = {**shared, **own}
    if trials is None:  # a holdout of a redacted report: its outcome only
        return CaseFacts(str(case["id"]), label, str(case["split"]), outcome,
                         1.0 if outcome == "pass" else 0.0, facets)
    # One pass, few lookups: a 10,000-case report has 10,000 of these loops.
    usd: float | None = None
    tokens: int | None = None
    duration = 0.0
    breaches: dict[str, None] = {}
    for trial in trials:
        usage = trial.get("usage")
        if usage:
            spent, took_in, took_out = (usage.get("cost_usd"), usage.get("input_tokens"),
                                        usage.get("output_tokens"))
            if spent is not None:
                usd = (usd or 0.0) + float(spent)
            if took_in is not None or took_out is not None:
                tokens = (tokens or 0) + int(took_in or 0) + int(took_out or 0)
        duration += float(trial.get("duration_s") or 0.0)
        for verdict in trial.get("verdicts") or ():
            if verdict.get("family") == "structural" and verdict.get("outcome") == "fail":
                breaches.setdefault(str(verdict.get("assertion")), None)
    quality = case.get("quality")
    straddles = tuple(str(q["assertion"]) for q in quality if q.get("straddles")) if quality else ()
    return CaseFacts(
        str(case["id"]), label, str(case["split"]), outcome, float(case["pass_at_1"]), facets,
        usd, tokens, duration, len(trials), tuple(breaches), straddles,
        bool(case.get("synthetic", False)),
    )


# --- where runs come from ------------------------------------------------------------

def load_run(ref: str, store: Any) -> RunFacts:
    """A run named by ``ref``: a report file when such a file exists, else a run of ``store``.

    A stored run must be sealed; a report file must hold exactly one report
    (``assay run --json`` writes one line per run).
    """
    path = Path(ref)
    if path.is_file():
        return load_file(path)
    return load_stored(store, ref)


def load_stored(store: Any, run_id: str) -> RunFacts:
    """A sealed stored run (hidden cases by identity); an open one is a usage error."""
    return _stored_facts(run_id, *store.report_document(run_id))


def _stored_facts(run_id: str, status: str, body: str | None,
                  seal: Mapping[str, Any] | None) -> RunFacts:
    """The facts of a stored run's report (``Store.report_document``'s answer)."""
    if body is None or status != "sealed":
        raise UsageError(f"run {run_id} is not sealed: it stopped part-way or is still "
                         f"running (finish it with `assay run --resume {run_id}`)")
    from pydantic_core import from_json  # jiter: a quarter quicker than json.loads here

    with _held_collector():
        try:
            data = from_json(body)
        except ValueError:  # jiter refuses a lone surrogate, which a case id may hold
            try:
                data = json.loads(body)
            except ValueError:
                raise UsageError(f"run {run_id}: its stored report is not JSON") from None
        return from_report(data, "store", seal, where=f"run {run_id}")


@contextmanager
def _held_collector() -> Iterator[None]:
    """The cyclic collector off while a report is read: it builds no cycles.

    A 10,000-case report is a few hundred thousand containers; collecting over
    them as they are made took a quarter of reading one, and frees nothing.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_file(path: Path) -> RunFacts:
    """The one report in a ``--json`` file; anything else is a usage error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot read it ({type(error).__name__})") from None
    try:  # one document (`assay show --json` indents it), else JSON Lines (`--json F`)
        with _held_collector():
            documents = [json.loads(text)]
    except json.JSONDecodeError as whole:
        try:
            documents = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            raise UsageError(f"{path}:{whole.lineno}: not a JSON report ({whole.msg})") from None
        except RecursionError:
            documents = [None]  # nested past the parser's depth: no report is
    except RecursionError:  # json's C scanner recurses: a hostile file would be a traceback
        documents = [None]
    if not documents:
        raise UsageError(f"{path} is empty: not an assay report")
    if len(documents) != 1:
        ids = ", ".join(str(d.get("run_id")) for d in documents if isinstance(d, dict))
        raise UsageError(f"{path} holds {len(documents)} reports ({ids}); compare one run: "
                         "give its stored run id")
    with _held_collector():
        return from_report(documents[0], "file", where=str(path))


# --- several runs at once ----------------------------------------------------------------

def load_runs(refs: Sequence[str], db: str | None) -> list[RunFacts]:
    """The runs named by ``refs`` (files or stored run ids), through one store opened once.

    A plain SQLite store at the schema's head is read without SQLAlchemy
    (``store.runs.sqlite_reports``: importing it was half of a 10,000-case comparison);
    any other store is opened as every command opens it. (Reading the second
    run in a forked child, side by side with the first, was tried: on this
    two-core machine it saved under a tenth of a second; docs/performance.md.)
    """
    stored = [ref for ref in refs if not Path(ref).is_file()]
    if not stored:
        return [load_file(Path(ref)) for ref in refs]
    from ..store.revision import HEAD_REVISION
    from ..store.runs.sqlite_reports import report_documents

    documents = report_documents(db, stored, HEAD_REVISION)
    if documents is not None:
        found = []
        for ref in refs:
            if ref not in documents:
                found.append(load_file(Path(ref)))
                continue
            document = documents[ref]
            if document is None:
                raise UsageError(f"no run {ref} in the store")
            found.append(_stored_facts(ref, *document))
        return found
    from ..store.database import open_store

    store = open_store(db)
    try:
        return [load_run(ref, store) for ref in refs]
    finally:
        store.close()

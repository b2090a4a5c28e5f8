"""``assay rejudge RUN``: the recorded outputs of a run judged again, into a new sealed run.

The agent is not called (SPEC §9). A rejudge is an ordinary battery — the
same planning, panel of judges, recording, ledger and seal as ``assay run``
— whose target is the run's record: ``RecordedTarget`` hands each trial the
trace stored for it, and a trial that broke breaks again with its reason.
Deterministic checks are graded again on the same traces (the same
verdicts: grading is pure); the quality checks are asked again, of the
judge the command names or the one the suite names, through the judge
cache, so a rejudge whose questions were all asked before makes no call.

What stays the original's: the suite as stored with the run (hidden cases
included: no private folder is needed), its digests, the agent version
(target URI, digest, identity, facets), the seed, and each case's number
of trials (an adaptive run's too). What is new: the run id, the judges'
opinions and cost, and ``rejudge_of`` naming the original in the report and
the run's options. ``--threshold X`` sets every quality check's pass-rate
bar to X (the suite's stored copy is changed for this run only).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import HarnessFailure, UsageError
from ..model import Evidence, Trace
from ..model.result import TrialResult
from ..model.suite import Suite
from ..targets import TrialBroken, TrialRequest
from .runs import QuietWatcher, RunResult, RunSettings, Watcher, _check_judges, _Recording, _run_one


class RecordedTarget:
    """The agent of a rejudge: the traces one stored run recorded, handed back per trial."""

    def __init__(self, uri: str, identity: dict[str, str], facets: dict[str, str],
                 evidence: dict[str, Evidence], trials: dict[tuple[str, int], TrialResult]) -> None:
        self.uri = uri
        self.facets = facets
        self.evidence = evidence
        self._identity = identity
        self._trials = trials

    async def start(self) -> None:
        """Nothing to start: the outputs were recorded."""

    async def run(self, request: TrialRequest) -> Trace:
        """The stored trace of this case and trial; a trial that broke breaks again."""
        trial = self._trials.get((request.case.id, request.n))
        if trial is None:
            raise TrialBroken("the original run recorded no such trial")
        if trial.trace is None or trial.outcome == "broken":
            # A broken trial may keep what happened before it broke (a simulated
            # conversation's turns): it broke, and breaks again, all the same.
            raise TrialBroken(trial.reason or "the original trial broke")
        return trial.trace

    async def close(self) -> None:
        """Nothing to release."""

    def identity(self) -> dict[str, str]:
        """The original run's agent version."""
        return dict(self._identity)

    def digest(self) -> str:
        """``sha256:…`` of the identity."""
        from ..targets.identity import identity_digest

        return identity_digest(self._identity)


def rejudge_run(run_id: str, settings: RunSettings, *, db: str | None,
                threshold: float | None = None, watcher: Watcher | None = None) -> RunResult:
    """Judge run ``run_id``'s recorded outputs again into a new sealed run; its result.

    ``UsageError`` for a run that does not exist, is not sealed, has no stored
    suite or no judged check, or whose agent version cannot be rebuilt.
    """
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key
    from ..store.runs.documents import load_stored_suite
    from ..store.runs.record import LocalSink
    from ..suites.loader import LoadedSuite

    watcher = watcher or QuietWatcher()
    key = signing_key(db)
    store = open_store(db)
    try:
        stored = store.open_run(run_id)
        if stored.status != "sealed":
            raise UsageError(f"run {run_id} is not sealed: finish it first "
                             f"(assay run --resume {run_id})")
        record = store.load_replay(run_id)
        if record.suite is None:
            raise UsageError(f"run {run_id} was recorded before assay kept the suite with a "
                             "run: it cannot be judged again")
        suite = load_stored_suite(json.loads(record.suite))
        report = json.loads(record.report)
        identity = dict(stored.options.get("target_identity") or {})
        if not identity:
            raise UsageError(f"run {run_id} was recorded before assay kept the agent's "
                             "identity: its version cannot be named again")
        trials = store.load_trials(run_id)
        suite = _for_rejudge(suite, trials, threshold)
        loaded = LoadedSuite(suite, Path(suite.source or "."), stored.suite_digest,
                             stored.hidden_set, report["suite"].get("hidden_source"))
        _keep_facets(loaded, report)
        target_ref = report["target"]
        target = RecordedTarget(stored.target_uri, identity, dict(target_ref.get("facets") or {}),
                                {k: Evidence(v) for k, v in
                                 (target_ref.get("evidence") or {}).items()}, trials)
        if target.digest() != stored.target_digest:
            raise UsageError(f"run {run_id}: the stored identity does not give its agent version")
        settings = replace(settings, trials=None, seed=stored.seed, rejudge_of=run_id)
        plan = [(loaded, stored.target_uri)]
        _check_judges(plan, settings)
        result = _run_one(loaded, stored.target_uri, settings, watcher,
                          _Recording(LocalSink(store, key)), target=target)
        if result.harness_failure is not None:
            raise HarnessFailure(result.harness_failure)
        return result
    finally:
        store.close()


def _for_rejudge(suite: Suite, trials: dict[tuple[str, int], TrialResult],
                 threshold: float | None) -> Suite:
    """The stored suite as the rejudge runs it: each case's recorded number of trials.

    Without a judged check there is nothing to judge again: refused.
    With ``threshold``, every quality check's pass-rate bar is set to it.
    """
    from ..checks import lookup

    counts: dict[str, int] = {}
    for case_id, n in trials:
        counts[case_id] = max(counts.get(case_id, 0), n)
    quality = False
    cases = []
    for case in suite.cases:
        expect = []
        for assertion in case.expect:
            check = lookup(assertion.check)
            if check is not None and check.family == "quality":
                quality = True
                if threshold is not None:
                    arg: Any = assertion.arg
                    if isinstance(arg, dict) and assertion.check in ("judge", "rubric"):
                        arg = {k: v for k, v in arg.items() if k != "threshold"}
                    assertion = assertion.model_copy(update={"threshold": threshold,
                                                             "arg": arg})
            expect.append(assertion)
        if case.id in counts:
            cases.append(case.model_copy(update={"expect": expect, "trials": counts[case.id]}))
    if not quality:
        raise UsageError(f"suite {suite.id} has no judged check (judge, rubric, similar): "
                         "there is nothing to judge again")
    return suite.model_copy(update={"cases": cases})


def _keep_facets(loaded: Any, report: dict[str, Any]) -> None:
    """The original cases' facets, from its full report, but the served model and the judges.

    So that compare aligns the rejudge with its original exactly where they
    should agree: the judges are what a rejudge changes.
    """
    stored = {c.get("id"): c.get("facets") for c in report.get("cases", [])
              if isinstance(c, dict)}
    for case in loaded.suite.cases:
        facets = stored.get(case.id)
        if isinstance(facets, dict):
            loaded._facets[case.id] = {k: v for k, v in facets.items()
                                       if k not in ("model", "judge")}

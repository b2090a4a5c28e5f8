"""`assay promote RUN CASE`: a draft case from one stored trial (SPEC §10, cold start)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import AssayError, UsageError
from .common import DB_OPTION, STDOUT, fail
from .draft_files import write_draft

if TYPE_CHECKING:
    from ..drafting.promote import Promotion
    from ..store.database import Store
    from ..store.runs.case_trials import CaseTrial, RunCases

_HOLDOUT = re.compile(r"holdout-([1-9][0-9]*)")


@click.command()
@click.argument("run_id", metavar="RUN")
@click.argument("case", metavar="CASE")
@click.option("--trial", type=click.IntRange(min=1), metavar="N",
              help="Which trial of the case to promote (default: its first).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              default=STDOUT, help="Write the draft to FILE (default: standard output).")
@click.option("--force", is_flag=True, help="Replace FILE when it exists already.")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR",
              help="The private hidden cases: a hidden case (holdout-N) is promoted only when "
                   "this folder holds the very hidden set the run ran.")
@DB_OPTION
def promote(run_id: str, case: str, trial: int | None, out: Path, force: bool,
            hidden_dir: Path | None, db: str | None) -> None:
    """Write a draft case from one stored trial.

    The draft (YAML, the form of a suite's cases: entries, id CASE-promoted)
    gives the case's input and asserts what the trial did: its status, a
    calls for each tool it called, and a never_calls for the tools its
    fixture offered that it did not call. A draft is for a person to read
    and edit before it joins a suite. CASE is a case id, or holdout-N for a
    hidden case (which needs --hidden-dir). Exit 2 for a run, case or trial
    that is not there.
    """
    from ..drafting.promote import promoted_text
    from ..store.database import open_store

    try:
        store = open_store(db)
        try:
            found, label = _find(store, run_id, case, trial, hidden_dir)
        finally:
            store.close()
        write_draft(out, promoted_text(found), force=force)
    except AssayError as error:
        fail(error)
        return
    if out != STDOUT:
        from ..reports.safe import inert

        click.echo(inert(f"promote: wrote a draft of {label}, trial {found.n}, to {out}"),
                   err=True)


@dataclass(frozen=True)
class _Case:
    id: str
    label: str
    hidden: bool


def _find(store: Store, run_id: str, given: str, n: int | None,
          hidden_dir: Path | None) -> tuple[Promotion, str]:
    """The trial to promote and the name the case may be shown by."""
    from ..drafting.promote import Promotion, case_file, offered_tools
    from ..model import Trace
    from ..store.runs.case_trials import case_trials, run_cases

    run = run_cases(store, run_id)
    case = _resolve(run, given, hidden_dir)
    trials = case_trials(store, run_id, case.id)
    chosen = _trial(trials, n, case.label, run_id)
    if chosen.trace is None:
        why = (f"it broke before it left one: {chosen.reason}"
               if not chosen.has_trace and chosen.reason and not case.hidden else
               "it broke before it left one" if not chosen.has_trace else
               "its content was erased")
        raise UsageError(f"trial {chosen.n} of {case.label} in run {run_id} has no trace to "
                         f"promote: {why}")
    try:
        trace = Trace.model_validate_json(chosen.trace)
    except ValueError:
        raise UsageError(f"trial {chosen.n} of {case.label} in run {run_id}: its stored trace "
                         "cannot be read") from None
    stored = run.cases.get(case.id)
    if stored is None:
        raise UsageError(f"run {run_id} does not keep {case.label}'s input: nothing to promote")
    source = case_file(run.files, case.id)
    promotion = Promotion(run_id=run_id, case=stored, n=chosen.n, outcome=chosen.outcome,
                          trace=trace, offered=offered_tools(stored, run.facets.get(case.id, {}),
                                                             source),
                          hidden=case.hidden, source_file=source)
    return promotion, case.label


def _resolve(run: RunCases, given: str, hidden_dir: Path | None) -> _Case:
    """The case CASE names: a public id, a hidden one's ``holdout-N``, or (held) its id.

    A hidden case's own id is answered exactly as an id the run does not
    have, unless the hidden set is held: the answer must not tell anyone
    which ids the hidden cases have.
    """
    hidden = [case_id for case_id, split in run.order if split == "hidden"]
    named = "holdout-1" if len(hidden) == 1 else f"holdout-1 to holdout-{len(hidden)}"
    labels = {case_id: f"holdout-{i}" for i, case_id in enumerate(hidden, start=1)}
    public = {case_id for case_id, split in run.order if split != "hidden"}
    if given in public:
        return _Case(given, given, False)
    held = _holds(run, hidden_dir) if hidden else False
    matched = _HOLDOUT.fullmatch(given)
    if matched is not None and given not in labels.values() and hidden:
        raise UsageError(f"run {run.run_id} has {len(hidden)} hidden case(s), {named}: "
                         f"no {given}")
    if matched is not None and hidden:
        case_id = hidden[int(matched.group(1)) - 1]
    elif given in labels and held:
        case_id = given
    else:
        more = f" (its hidden cases are named {named})" if hidden else ""
        raise UsageError(f"run {run.run_id} has no case {given!r}{more}; assay show "
                         f"{run.run_id} lists its cases")
    label = labels[case_id]
    if not held:
        if hidden_dir is None:
            raise UsageError(f"{label} is a hidden case of run {run.run_id}: its content goes "
                             "only to whoever holds the run's hidden set; give --hidden-dir "
                             f"DIR with the private cases in DIR/{run.suite_id}/")
        raise UsageError(f"--hidden-dir does not hold the hidden set run {run.run_id} ran: "
                         f"{label} stays hidden")
    return _Case(case_id, label, True)


def _holds(run: RunCases, hidden_dir: Path | None) -> bool:
    """Whether ``hidden_dir`` holds exactly the hidden set the run ran (by its digest)."""
    from ..review.reveal import holds_hidden_set

    return holds_hidden_set(hidden_dir, run.suite_id, run.hidden_set)


def _trial(trials: list[CaseTrial], n: int | None, label: str, run_id: str) -> CaseTrial:
    if not trials:
        raise UsageError(f"{label} has no trials in run {run_id}: nothing to promote")
    if n is None:
        return trials[0]
    for trial in trials:
        if trial.n == n:
            return trial
    have = ", ".join(str(t.n) for t in trials)
    raise UsageError(f"{label} has trial(s) {have} in run {run_id}; there is no trial {n}")


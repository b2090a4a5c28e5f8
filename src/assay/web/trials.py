"""A trial: its trace as a timeline, its verdicts with their evidence and provenance.

``/runs/{run}/cases/{index}/trials/{n}`` names a trial as the run's page
links it: the case's 1-based position in the run's report, the trial's
number. The page shows what the store holds of it (``store.runs.trial_evidence``):
outcome, reason, duration, the agent's usage and what it left unreported,
every event of the trace in order, each verdict with the judges' opinions
behind it (model, prompt digest, parameters, raw answer, tokens, cost,
latency), the judges' cost apart from the agent's, and the raw evidence as a
download. A hidden case's trial is its ``holdout-N`` label, number and
outcome: the store module never reads more of it, so nothing more can be
shown (docs/decisions/0044-trial-page.md).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi import Path as PathPart
from starlette.responses import Response

from .render import BadRequest, NotFound, path_part, respond

if TYPE_CHECKING:
    from ..model import Event, Trace
    from ..store.runs.trial_evidence import HiddenTrial, PublicTrial, Step

router = APIRouter()

#: Why a hidden case's trial shows no more than it does.
WITHHELD = ("A hidden case: its input, output, trace, verdicts, reason and the judges' "
            "answers stay private, here and in every download.")


@router.get("/runs/{run_id}/cases/{index}/trials/{n}")
@router.get("/api/runs/{run_id}/cases/{index}/trials/{n}")
def trial_page(request: Request, run_id: str, index: int = PathPart(ge=1),
               n: int = PathPart(ge=1)) -> Response:
    """One trial: its trace, verdicts, opinions and usage; a holdout's label and outcome only."""
    from ..store.runs.trial_evidence import HiddenTrial

    found = _found(request, run_id, index, n)
    data = _withheld(found) if isinstance(found, HiddenTrial) else _shown(found)
    return respond(request, "trial.html", data)


@router.get("/runs/{run_id}/cases/{index}/trials/{n}/trace.json")
def trace_download(request: Request, run_id: str, index: int = PathPart(ge=1),
                   n: int = PathPart(ge=1)) -> Response:
    """The trial's raw evidence as stored: its trace, verdicts and opinions (public cases only)."""
    from fastapi.responses import JSONResponse

    from ..store.runs.trial_evidence import HiddenTrial

    found = _found(request, run_id, index, n)
    if isinstance(found, HiddenTrial):
        raise NotFound(f"{found.label} trial {n} of run {run_id}: a hidden case's evidence "
                       "is not downloadable (its content stays private)")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{run_id}-case{index}-trial{n}")
    return JSONResponse(_evidence(found), headers={
        "content-disposition": f'attachment; filename="{name}.json"'})


def _found(request: Request, run_id: str, index: int, n: int) -> HiddenTrial | PublicTrial:
    from ..store.runs.trial_evidence import RunNotSealed, TrialNotFound, trial_at

    store = request.app.state.bench.open()
    try:
        return trial_at(store, run_id, index, n)
    except TrialNotFound as error:
        raise NotFound(str(error)) from None
    except RunNotSealed as error:
        raise BadRequest(str(error)) from None


def _href(run_id: str, index: int, n: int) -> str:
    return f"/runs/{path_part(run_id)}/cases/{index}/trials/{n}"


def _step(run_id: str, step: Step | None) -> dict[str, Any] | None:
    if step is None:
        return None
    return {"index": step.index, "label": step.label, "n": step.n, "outcome": step.outcome,
            "href": _href(run_id, step.index, step.n)}


def _frame(found: HiddenTrial | PublicTrial, split: str, outcome: str,
           trial_outcome: str) -> dict[str, Any]:
    """What every trial's page holds: where it is, how it ended, the way around."""
    run = found.run
    return {
        "run": {"run_id": run.run_id, "suite": run.suite_id, "target": run.target_uri,
                "seal": run.seal_entry, "href": f"/runs/{path_part(run.run_id)}"},
        "case": {"index": found.index, "label": found.label, "split": split,
                 "outcome": outcome},
        "trial": {"n": _number(found), "outcome": trial_outcome},
        "trials": [{"n": m, "outcome": ended, "href": _href(run.run_id, found.index, m),
                    "current": m == _number(found)} for m, ended in found.trials],
        "previous": _step(run.run_id, found.previous),
        "next": _step(run.run_id, found.next),
    }


def _number(found: HiddenTrial | PublicTrial) -> int:
    from ..store.runs.trial_evidence import HiddenTrial

    return found.n if isinstance(found, HiddenTrial) else int(found.trial.get("n", 0))


def _withheld(found: HiddenTrial) -> dict[str, Any]:
    """A hidden case's trial: label, number and outcome; the rest is not even read."""
    data = _frame(found, "hidden", found.case_outcome, found.outcome)
    data.update(hidden=True, withheld=WITHHELD, download=None)
    return data


def _shown(found: PublicTrial) -> dict[str, Any]:
    """A public case's trial, whole."""
    from ..model import Usage

    case, trial = found.case, found.trial
    data = _frame(found, str(case.get("split", "public")), str(case.get("outcome", "")),
                  str(trial.get("outcome", "")))
    trace = _trace_model(found)
    usage = Usage.model_validate(trial.get("usage") or {})
    data["case"].update(
        reason=case.get("reason"), pass_at_1=case.get("pass_at_1"),
        pass_hat_k=case.get("pass_hat_k"), k=case.get("k"), score=case.get("score"),
        tags=case.get("tags") or [], synthetic=bool(case.get("synthetic")),
        quality=case.get("quality") or [])
    data["trial"].update(
        reason=trial.get("reason"), duration_s=trial.get("duration_s"),
        ledger_entry=found.entry,
        usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
               "tokens": usage.tokens, "cost_usd": usage.cost_usd,
               "unreported": [fact for fact, value in (("tokens", usage.tokens),
                                                       ("cost", usage.cost_usd))
                              if value is None],
               "evidence": {fact: (trace.evidence_for(fact).value if trace is not None
                                   else "unavailable") for fact in ("tokens", "cost")}})
    data.update(hidden=False, verdicts=_verdicts(found, raw_streams=False),
                judges=_judges(found), trace=_trace(found, trace),
                download=_href(found.run.run_id, found.index, _number(found)) + "/trace.json")
    return data


def _trace_model(found: PublicTrial) -> Trace | None:
    """The stored trace as this version reads it; None when absent, erased or unreadable."""
    from pydantic import ValidationError

    from ..model import Trace

    if found.trace is None:
        return None
    try:
        return Trace.model_validate_json(found.trace)
    except ValidationError:
        return None


def _trace(found: PublicTrial, trace: Trace | None) -> dict[str, Any]:
    """The trace for the page: its fields and events, or why there is none to show."""
    digest = found.trace_digest
    if found.erased:
        return {"state": "erased", "digest": digest,
                "note": "The trace's content was erased (assay erase); its digest stays in "
                        "the ledger, so what was decided on it still verifies."}
    if found.trace is None:
        return {"state": "none", "digest": None,
                "note": "This trial left no trace (it broke before the agent answered)."}
    if trace is None:
        return {"state": "unreadable", "digest": digest, "stored": _loose(found.trace),
                "note": "The stored trace is in a form this version does not read; "
                        "it is shown as stored."}
    fields = trace.model_dump(mode="json")
    # The tool fixture's final state (SPEC §14) under its own name: ``state`` here says
    # whether the trace is stored at all.
    final = fields.pop("state", None)
    return {"state": "stored", "digest": digest, **fields, "final_state": final,
            "conversation": _conversation(trace)}


def _conversation(trace: Trace) -> list[dict[str, Any]] | None:
    """A conversation's turns for the chat view (SPEC §16): each turn's events, as positions
    in the trace's ``events``; None when the trace is not a conversation.

    The agent's last message of a turn is left out when its reply says the same (the
    ``openai:`` loop records both): the bubble shows it once, the timeline both.
    """
    from ..model.turns import turns_of

    turns = turns_of(trace.events)
    if not turns:
        return None
    position = {id(event): index for index, event in enumerate(trace.events)}
    shown = []
    for turn in turns:
        events, reply = turn.events, turn.reply
        kept = [position[id(event)] for event, after in zip(events, [*events[1:], None],
                                                             strict=True)
                if not (after is not None and after is reply and _echoes(event, after))]
        shown.append({"turn": turn.n, "events": kept, "replied": reply is not None})
    return shown


def _echoes(message: Event, reply: Event) -> bool:
    """Whether ``message`` is the agent's text of ``reply`` (its answer as text, or as the
    JSON it was read as)."""
    from ..model.turns import said

    if message.kind != "message" or message.text is None:
        return False
    if message.text == said(reply.result):
        return True
    try:
        return bool(json.loads(message.text) == reply.result)
    except ValueError:
        return False


def _verdicts(found: PublicTrial, *, raw_streams: bool) -> list[dict[str, Any]]:
    """Each verdict as the report holds it, with the opinions it was read from."""
    shown: list[dict[str, Any]] = []
    for position, verdict in enumerate(found.trial.get("verdicts") or []):
        if not isinstance(verdict, dict):
            continue
        opinions = []
        for opinion in found.opinions.get(position, []):
            record = {"cached": False, **opinion.to_json()}
            if not raw_streams:  # a host's whole event stream: the download has it
                stream = record.pop("stream", None)
                record["stream"] = None if stream is None else \
                    f"{len(stream):,} characters, in the raw evidence"
            opinions.append(record)
        shown.append({"position": position, "assertion": verdict.get("assertion"),
                      "check": verdict.get("check"), "family": verdict.get("family"),
                      "outcome": verdict.get("outcome"), "evidence": verdict.get("evidence"),
                      "note": verdict.get("note"), "provenance": verdict.get("provenance"),
                      "threshold": verdict.get("threshold"), "score": verdict.get("score"),
                      "opinions": opinions})
    return shown


def _judges(found: PublicTrial) -> dict[str, Any] | None:
    """What the judges of this trial cost, apart from the agent (None: nobody was asked)."""
    answers = [o for listed in found.opinions.values() for o in listed]
    if not answers:
        return None
    paid = [o for o in answers if not o.cached]

    def total(values: list[Any]) -> Any:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    return {"calls": len(answers), "cached": len(answers) - len(paid),
            "usd": total([o.cost_usd for o in paid]),
            "input_tokens": total([o.input_tokens for o in paid]),
            "output_tokens": total([o.output_tokens for o in paid]),
            "unpriced": sum(1 for o in paid if o.cost_usd is None)}


def _evidence(found: PublicTrial) -> dict[str, Any]:
    """The download: the stored trace as it was kept, the verdicts, every opinion whole."""
    trial = found.trial
    if found.erased:
        trace: dict[str, Any] = {"digest": found.trace_digest, "state": "erased",
                                 "content": None,
                                 "note": "the trace's content was erased (assay erase); "
                                         "its digest stays in the ledger"}
    elif found.trace is None:
        trace = {"digest": None, "state": "none", "content": None,
                 "note": "this trial left no trace"}
    else:
        trace = {"digest": found.trace_digest, "state": "stored",
                 "content": _loose(found.trace)}
    return {
        "schema": "assay.trial-evidence/1",
        "run_id": found.run.run_id,
        "case": {"index": found.index, "id": found.label},
        "n": trial.get("n"), "outcome": trial.get("outcome"), "reason": trial.get("reason"),
        "duration_s": trial.get("duration_s"), "usage": trial.get("usage"),
        "ledger_entry": found.entry,
        "trace": trace,
        "verdicts": _verdicts(found, raw_streams=True),
    }


def _loose(data: bytes) -> Any:
    """Stored JSON as a value; text when it does not parse (shown as stored either way)."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")

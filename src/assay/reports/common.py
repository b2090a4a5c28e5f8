"""What every renderer shares: outcomes, numbers, a case's reason, writing its file."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..grading.scores import shortfalls

if TYPE_CHECKING:
    from ..model import CaseResult, HoldoutResult, Report, TrialResult
    from ..model.turns import TurnSummary


def pct(value: float | None) -> str:
    """A score as a percentage, or an em dash when there is none."""
    return "—" if value is None else f"{value * 100:.1f}%"


def why(case: CaseResult | HoldoutResult) -> str:
    """A public case's reason for not passing; a hidden case has none to show."""
    from ..model import HoldoutResult

    if isinstance(case, HoldoutResult):
        return ""
    return case.reason or ""


#: Paths a one-line summary of a trial's workspace changes names.
CHANGES_NAMED = 5
#: Cases whose workspace changes the terminal and Markdown list (the JSON report has all).
CHANGES_LISTED = 20


def changes_text(trial: TrialResult) -> str | None:
    """What a trial changed in its workspace, on one line (None: it had no workspace)."""
    if trial.changes is None:
        return None
    if not trial.changes:
        return "nothing changed"
    parts = [f"{c.change} {c.path}" for c in trial.changes[:CHANGES_NAMED]]
    more = len(trial.changes) - CHANGES_NAMED
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def changed_cases(report: Report) -> list[tuple[str, int, str]]:
    """(case id, trial, what it changed) for the public cases that ran in a workspace and did
    not pass: each one's first trial that did not pass (else its first), at most
    ``CHANGES_LISTED``. Hidden cases are never here: their changes are hidden content."""
    from ..model import CaseResult

    found: list[tuple[str, int, str]] = []
    for case in _public_failures(report):
        if not isinstance(case, CaseResult) or case.split != "public" or \
                case.outcome == "pass" or not case.trials:
            continue
        trial = next((t for t in case.trials if t.outcome != "pass"), case.trials[0])
        text = changes_text(trial)
        if text is not None:
            found.append((case.id, trial.n, text))
            if len(found) == CHANGES_LISTED:
                break
    return found


#: Conversations of cases that did not pass that the terminal, Markdown and JUnit show.
CONVERSATIONS_LISTED = 10


def _public_failures(report: Report) -> Iterable[CaseResult | HoldoutResult]:
    """The report's cases, of which a caller wants the public ones that did not pass: from
    a spool (cases read back as asked for), only those are read."""
    from ..model.result import KeptCases

    cases = report.cases
    if not isinstance(cases, KeptCases):
        return cases
    wanted = [i for i, (outcome, split) in enumerate(zip(cases.outcomes(), cases.splits(),
                                                         strict=True))
              if outcome != "pass" and split == "public"]
    return (cases[i] for i in wanted)


def talked_cases(report: Report) -> list[tuple[str, TrialResult]]:
    """(case id, trial) for the public cases that are conversations and did not pass: each
    one's first trial that did not pass and holds turns, at most ``CONVERSATIONS_LISTED``.
    Hidden cases are never here: what was said in them is hidden content (SPEC §16)."""
    from ..model import CaseResult

    found: list[tuple[str, TrialResult]] = []
    for case in _public_failures(report):
        if not isinstance(case, CaseResult) or case.split != "public" or \
                case.outcome == "pass":
            continue
        trial = next((t for t in case.trials if t.outcome != "pass" and t.turns), None)
        if trial is not None:
            found.append((case.id, trial))
            if len(found) == CONVERSATIONS_LISTED:
                break
    return found


#: Turns of one conversation those surfaces show; the rest are counted (the report has all).
TURNS_LISTED = 20


def listed_turns(trial: TrialResult) -> tuple[list[TurnSummary], str | None]:
    """The turns of ``trial`` a summary shows and, when some are left out, the line saying so."""
    turns = trial.turns or []
    if len(turns) <= TURNS_LISTED:
        return turns, None
    return turns[:TURNS_LISTED], (f"… {len(turns) - TURNS_LISTED} more turn(s); the JSON "
                                  "report has every turn")


def turn_lines(turn: TurnSummary) -> list[tuple[str, str]]:
    """One turn as (who, what) lines, in the order they happened: the user's message, the
    tools the agent called, its reply (or that it gave none)."""
    lines = [("user", turn.user if turn.user is not None else "(no message recorded)")]
    if turn.calls:
        lines.append(("calls", ", ".join(turn.calls)))
    lines.append(("agent", turn.reply if turn.reply is not None else "(no reply)"))
    return lines


def conversation_lines(trial: TrialResult, indent: str = "") -> list[str]:
    """A trial's turns as plain lines (each message inert, on one line): ``turn N  user:
    …``, ``calls: …``, ``agent: …``, then how many turns were left out, if any."""
    from .safe import inert

    turns, left_out = listed_turns(trial)
    lines = []
    for turn in turns:
        head = f"turn {turn.turn}"
        for who, what in turn_lines(turn):
            lines.append(f"{indent}{head:<8} {who}: {inert(what, one_line=True)}")
            head = ""
    if left_out is not None:
        lines.append(f"{indent}{left_out}")
    return lines


def has_scores(report: Report) -> bool:
    """Whether any shown case has a number from opinions (a ``score`` column is then shown)."""
    from ..model.result import KeptCases

    if isinstance(report.cases, KeptCases):  # read back as asked for: asked without reading
        return report.cases.scored()
    return any(getattr(case, "score", None) is not None for case in report.cases)


#: Rows a table of cases lists; past it, only cases that did not pass are (SPEC §6 has all).
MAX_ROWS = 200


def listed_cases(report: Report, limit: int = MAX_ROWS
                 ) -> tuple[Sequence[CaseResult | HoldoutResult], str | None]:
    """The cases a table lists and, when some are left out, the line that says which.

    Up to ``limit`` cases, all of them; past it, the first ``limit`` that did
    not pass, in order (a run's cases read back from its spool are read only
    when listed). The line counts what was left out, passed or not.
    """
    from ..model.result import KeptCases

    cases = report.cases
    if len(cases) <= limit:
        return cases, None
    outcomes = cases.outcomes() if isinstance(cases, KeptCases) else [c.outcome for c in cases]
    failing = [i for i, outcome in enumerate(outcomes) if outcome != "pass"]
    listed = [cases[i] for i in failing[:limit]]
    passed, rest = len(cases) - len(failing), len(failing) - len(listed)
    left = [f"{passed} passed"] if passed else []
    left += [f"{rest} did not pass"] if rest else []
    return listed, (f"… {len(cases) - len(listed)} more case(s) not listed "
                    f"({', '.join(left)}); the JSON report has every case")


def score_cell(case: CaseResult | HoldoutResult) -> str:
    """A case's number from opinions (SPEC §9), or nothing (a hidden case shows none)."""
    value = getattr(case, "score", None)
    return "" if value is None else f"{value:.2f}"


def trials_text(report: Report) -> str:
    """How many trials each case ran: the configured number, or an adaptive run's range.

    ``3 trial(s) per case``, or ``3–16 trial(s) per case, adaptive up to
    30``: the range is over the cases shown, a hidden case's count is not (a
    holdout carries no trials).
    """
    if report.adaptive is None:
        return f"{report.trials_per_case} trial(s) per case"
    from ..model import CaseResult

    ran = sorted({len(c.trials) for c in report.cases if isinstance(c, CaseResult)})
    cap = report.adaptive.max_trials
    if not ran:
        return f"adaptive, up to {cap} trial(s) per case"
    span = f"{ran[0]}" if len(ran) == 1 else f"{ran[0]}–{ran[-1]}"
    return f"{span} trial(s) per case, adaptive up to {cap}"


def verdict_line(report: Report) -> str:
    """``PASSED`` or ``NOT PASSED`` with why, in a few words."""
    reasons = shortfalls(report.scores, report.counts, interrupted=report.interrupted)
    return "NOT PASSED: " + "; ".join(reasons) if reasons else "PASSED"


def write_file(path: Path, data: str | bytes | Iterable[bytes]) -> None:
    """Write a report file whole or not at all: into a temporary file beside it, then renamed.

    A reporter that fails part-way leaves the file it was asked for as it
    was (absent, or the previous run's), never half written. A link is
    followed (the file it names is replaced, not the link), and what is not
    a regular file (``/dev/stdout``, a pipe, ``/dev/full``) is written in
    place: renaming over a device would replace it, for every process on
    the machine.
    """
    path = Path(os.path.realpath(path))
    pieces = [data.encode("utf-8")] if isinstance(data, str) else \
        [data] if isinstance(data, bytes) else data
    try:
        special = not stat.S_ISREG(path.stat().st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with path.open("wb") as device:
            device.writelines(pieces)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as out:
            out.writelines(pieces)  # a large report goes out as it is made, a case at a time
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)

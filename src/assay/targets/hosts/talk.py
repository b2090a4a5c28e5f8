"""A conversation with a host CLI (SPEC §16): the host's own session, resumed with each message.

The first user message runs the CLI as a single trial does, its prompt on
stdin; the session its stream names (claude's ``session_id``, codex's
``thread_id``) is kept, and each later message runs the CLI again in the same
throwaway home and working folder, resuming that session (``claude -p
--resume ID``, ``codex exec … resume ID -``). The host reads the conversation
so far from its own session record — nothing assay retells — so what the
model is sent is what a person resuming the session would send it.

Each run's events carry its turn and are timed from the trial's start; a
``user`` event opens each turn and a ``reply`` event (the run's output)
closes it. The trial's output is the last reply. A run that ends otherwise
than with an answer — a refusal, a limit, an error — ends the conversation
with its status. A run that gives no trace at all breaks the trial when it is
the first; after a reply it ends the conversation with status ``error``, the
turns so far kept, so that a breach made in an earlier turn still fails the
case. Stopped at its timeout, the trial keeps every turn so far and what the
current run printed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...model import Evidence, Event, Status, Trace, Usage
from ...model.fixture import ToolFixture
from ..base import TrialBroken, TrialRequest
from ..conversation import Talk
from .process import Finished, run_cli

if TYPE_CHECKING:
    from .base import CliHost


class HostTalk:
    """One trial's conversation with a host CLI, and what it recorded."""

    def __init__(self, host: CliHost, request: TrialRequest, talk: Talk, *, home: Path,
                 work: Path, env: Mapping[str, str], served: Sequence[str],
                 state: tuple[Path | None, ToolFixture | None]) -> None:
        self.host = host
        self.request = request
        self.talk = talk
        self.home = home
        self.work = work
        self.env = env
        self.state = state
        system = host.system_argv(home, talk.system) if talk.system else []
        #: The first turn's command line; a later turn's resumes its session from it.
        self.argv = [*host.argv(request, "", home, work), *served, *system]
        #: Each finished run's trace, in turn order.
        self.turns: list[Trace] = []
        self.events: list[Event] = []
        self.session: str | None = None
        self.started = time.perf_counter()

    def _t(self) -> float:
        return round(time.perf_counter() - self.started, 6)

    async def run(self) -> Trace:
        """Every turn, until the user is done or a run ends the conversation."""
        talk = self.talk
        message = await talk.next()
        while message is not None:
            if talk.turn > 1 and self.session is None:
                return self._ended("error", f"turn {talk.turn}: {self.host.name} named no "
                                            "session to resume")
            prompt = self.host.first_prompt(self.request, message) if talk.turn == 1 \
                else message
            self._add(talk.opened(), self._t())
            try:
                turn = await self._one(prompt)
            except TrialBroken as broken:
                if not self.turns:  # nothing answered yet: no record to keep
                    raise
                return self._ended("error", f"turn {talk.turn}: {broken}")
            self.turns.append(turn)
            if turn.status != "ok":  # a refusal, a limit or an error ends it in its turn
                return self._ended(turn.status, turn.error, output=turn.output,
                                   settled=turn.settled is True)
            self._add(talk.replied(turn.output), self._t())
            message = await talk.next()
        return self._ended("ok", None, output=self.turns[-1].output if self.turns else None,
                           settled=talk.settled)

    async def _one(self, prompt: str) -> Trace:
        """One run of the CLI: the first turn's command, or the session resumed."""
        host, request = self.host, self.request
        argv = self.argv if self.session is None else host.resume_argv(self.argv, self.session)
        since = host.turn_mark(self.home)
        offset = time.perf_counter() - self.started
        finished = Finished(exit_code=-1)
        try:
            await run_cli(argv, cwd=self.work, env=self.env, stdin=host.stdin(prompt),
                          into=finished)
        except OSError as exc:
            raise TrialBroken(f"cannot run {host.name}: {exc.strerror or exc}") from None
        except asyncio.CancelledError:
            self._keep_partial(finished, prompt, since, offset)
            raise
        trace = host.trace(finished, request, prompt, self.home, since=since)
        self.session = self.session or host.session_of(finished)
        self._add_run(trace.events, offset)
        return trace

    def _keep_partial(self, finished: Finished, prompt: str, since: int,
                      offset: float) -> None:
        """Stopped at the timeout: every turn so far, and what this run printed, read now,
        while the CLI's home still holds its session."""
        from .base import with_fixture

        try:
            cut = self.host.partial_trace(finished, self.request, prompt, self.home,
                                          since=since)
            if cut is not None:
                self._add_run(cut.events, offset)
                self.turns.append(cut)
            trace: Trace | None = self._ended("timeout", None, settled=False)
            trace = self.host.pin_facets(with_fixture(trace, *self.state), self.request)
        except Exception:  # TrialBroken too: no record to keep, the timeout stands
            trace = None
        self.request.partial.keep(lambda: trace)

    def _add(self, event: Event, t: float) -> None:
        event.t = t
        self.events.append(event)

    def _add_run(self, events: Sequence[Event], offset: float) -> None:
        """A run's events, timed from the trial's start, in the current turn."""
        since = len(self.events)
        for event in events:
            if event.t is not None:
                event.t = round(event.t + offset, 6)
            self.events.append(event)
        self.talk.stamp(self.events, since)

    def _ended(self, status: Status, error: str | None, *, output: Any = None,
               settled: bool = False) -> Trace:
        """The conversation's trace: its turns' facts together, ended as said."""
        turns = self.turns
        last = turns[-1] if turns else None
        return Trace(
            output=output, status=status, error=error, events=list(self.events),
            usage=_usage(turns, cumulative=self.host.cumulative_usage), steps=_steps(turns),
            settled=settled, exit_code=last.exit_code if last is not None else None,
            duration_s=time.perf_counter() - self.started,
            stdout="\n".join(f"[turn {n}] {t.stdout}" for n, t in enumerate(turns, 1)
                             if t.stdout),
            facets=self.host.merged_facets([t.facets for t in turns]) if turns
            else dict(self.host.facets),
            evidence=_weakest(turns, self.host.evidence))


def _usage(turns: Sequence[Trace], *, cumulative: bool) -> Usage:
    """What the conversation spent: the sum of its runs', or, where each run reports the
    whole session's, the last report. A figure one run did not report is unreported."""
    if not turns:
        return Usage()
    if cumulative:
        reported = [t.usage for t in turns if t.usage.tokens is not None]
        return reported[-1] if reported else turns[-1].usage
    figures: dict[str, Any] = {}
    for figure in ("input_tokens", "output_tokens", "cost_usd"):
        values = [getattr(t.usage, figure) for t in turns]
        figures[figure] = None if None in values else sum(values)
    return Usage(**figures)


def _steps(turns: Sequence[Trace]) -> int | None:
    """Model calls over every run; unknown when one run's are."""
    counts = [t.steps for t in turns]
    return sum(c for c in counts if c is not None) if counts and None not in counts else None


def _weakest(turns: Sequence[Trace], claim: Mapping[str, Evidence]) -> dict[str, Evidence]:
    """Per fact, the weakest evidence any run gave: a sum is as strong as its weakest part."""
    if not turns:
        return dict(claim)
    facts = {fact for turn in turns for fact in turn.evidence}
    return {fact: min((t.evidence.get(fact, Evidence.UNAVAILABLE) for t in turns),
                      key=lambda e: e.rank) for fact in facts}

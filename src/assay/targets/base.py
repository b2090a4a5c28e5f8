"""The one small protocol every target implements (SPEC §4)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..model import Case, Evidence, Suite, Trace
from ..model.fixture import ToolFixture
from ..model.invocation import invocation_facet


class Partial:
    """What a trial has recorded so far, for the battery to keep if it times out.

    A hang must not erase what happened before it: a forbidden call made
    before the agent stopped answering still fails the case (SPEC §5). A
    target hands ``keep`` a function that builds a trace from its record as
    it stands; when the battery stops the trial at its timeout it calls
    ``trace()`` once and grades what comes back. A target that keeps
    nothing leaves the trial broken ("timed out … before any output").
    """

    def __init__(self) -> None:
        self._build: Callable[[], Trace | None] | None = None

    def keep(self, build: Callable[[], Trace | None]) -> None:
        """Say how to build the trace so far (the latest call wins)."""
        self._build = build

    def trace(self) -> Trace | None:
        """The trace so far, or None when the target kept nothing."""
        return self._build() if self._build is not None else None

    def drop(self) -> None:
        """The trial is over: let go of the record (the battery calls it).

        A target's builder closes over the request that holds this: a
        reference cycle per trial, which only the cyclic collector would
        free, and a battery holds that collector off (``engine.runs``).
        """
        self._build = None


@dataclass(frozen=True)
class TrialRequest:
    """Everything a target needs to run one trial of one case.

    ``partial`` is where the target keeps what the trial recorded so far
    (see ``Partial``); each request has its own.
    """

    case: Case
    n: int
    timeout_s: float
    fixture: Path | None = None
    tools: ToolFixture | None = None
    call: dict[str, Any] | None = None
    #: The trial's own copy of the case's workspace (SPEC §14), staged by the engine:
    #: the agent works in it, and what it leaves there is graded.
    workspace: Path | None = None
    partial: Partial = field(default_factory=Partial, compare=False, repr=False)
    #: The user of a conversation (SPEC §16) the engine plays (a simulated user); None:
    #: the case's scripted ``turns``, if it has any (``conversation.conversation``).
    user: Any = field(default=None, compare=False, repr=False)


#: Tools whose calls are questions to a person when a suite names none (SPEC §15).
ASK_TOOLS = ("ask_user", "ask_human")


@dataclass(frozen=True)
class TargetOptions:
    """How targets are built: where relative names resolve, how many run at once, servers."""

    base_dir: Path = field(default_factory=Path.cwd)
    concurrency: int = 8
    #: ``--base-url``: the OpenAI-compatible server of ``openai:`` targets.
    base_url: str | None = None
    #: The suite's ``call:``, when known before ``start()``: an MCP target checks at
    #: start that the server offers ``call.tool`` (else it checks at the first trial).
    call: dict[str, Any] | None = None
    #: ``--agent-cache``: the model calls assay makes for the agent (``openai:``) are
    #: kept and served again (``agent_cache.py``); other targets make none to keep.
    agent_cache: bool = False
    #: ``--upstream-openai`` …: where an ``exec:`` agent's model calls go through the
    #: recording proxy, by API (``openai``, ``anthropic``, ``gemini``); unnamed, the
    #: environment's base URL or the API's own (SPEC §15).
    upstreams: tuple[tuple[str, str], ...] = ()
    #: ``--otel``: a ``python:`` agent's in-process OpenTelemetry spans are collected per
    #: trial (``otel_live.py``); off, nothing of OpenTelemetry is installed.
    otel: bool = False
    #: Tools whose calls are questions to a person (SPEC §15 ``ask_tools``).
    ask_tools: tuple[str, ...] = ASK_TOOLS


def target_options(suite: Suite, base_dir: Path, **given: Any) -> TargetOptions:
    """The options a suite's own keys decide (``call``, ``ask_tools``), with ``given``."""
    asks = tuple(suite.ask_tools) if suite.ask_tools is not None else ASK_TOOLS
    return TargetOptions(base_dir=base_dir, call=suite.call, ask_tools=asks, **given)


class TrialBroken(Exception):
    """The trial never produced a trace worth grading; the message says why."""


class Target(Protocol):
    """An agent under test.

    ``start`` raises ``HarnessFailure`` when the agent cannot be reached at
    all (reported apart from the agent's failures); ``run`` returns a Trace or
    raises ``TrialBroken``; timeouts are the engine's job, and what the trial
    recorded before one is kept through ``request.partial``.
    """

    uri: str
    #: Per kind of fact (SPEC §4): observed, inferred or unavailable.
    evidence: dict[str, Evidence]
    facets: dict[str, str]

    async def start(self) -> None:
        """Get ready; raise HarnessFailure if the agent cannot be reached."""

    async def run(self, request: TrialRequest) -> Trace:
        """Run one trial and return what it recorded."""

    async def close(self) -> None:
        """Release what ``start`` took."""

    def identity(self) -> dict[str, str]:
        """What makes this agent this version (``targets.identity``); complete after ``start``."""

    def digest(self) -> str:
        """``sha256:…`` naming this version of the agent: the digest of ``identity()``."""


class LaneTarget(Target, Protocol):
    """A target that can also run a trial whole in the calling thread.

    A battery's lane (``engine.lane``) runs quick trials in its own threads,
    agent call and grading together, and hands them to the event loop in
    batches: no trip through the loop per trial. ``sync_lane`` (known once
    ``start`` ran) says whether this target can; ``run_sync`` is ``run`` for a
    single input, done in the calling thread, with the same trace and the
    same ``TrialBroken``s. Its hang is cut from outside, at the trial's
    timeout, from ``request.partial`` as for ``run``.
    """

    sync_lane: bool

    def run_sync(self, request: TrialRequest) -> Trace:
        """Run one trial of a single input here, in this thread."""


def case_facets(case: Case, harness: str, *, unpinnable: str | None = None) -> dict[str, str]:
    """The facets a case adds to its trace: its ``invocation``, and pins not honoured.

    A target that runs a case's ``model``/``effort`` pin records the model and
    effort it ran as its ``model``/``effort`` facets itself; one that cannot
    (a Python agent picks its own model) passes ``unpinnable``, the reason,
    and the pin is kept as ``model_pin``/``effort_pin`` with that note, so a
    reader of the trace sees the case asked for something that did not happen.
    """
    facets: dict[str, str] = {}
    invoked = invocation_facet(case.invocation)
    if invoked is not None:
        facets["invocation"] = invoked
    if unpinnable is not None:
        for pin, value in (("model", case.model_for(harness)),
                           ("effort", case.effort_for(harness))):
            if value is not None:
                facets[f"{pin}_pin"] = f"{value} (not honoured: {unpinnable})"
    return facets


def evidence(**given: str) -> dict[str, Evidence]:
    """An evidence map: every fact unavailable unless named."""
    from ..model import FACTS

    return {fact: Evidence(given.get(fact, "unavailable")) for fact in FACTS}


async def ensure_reachable(target_uri: str, url: str, timeout_s: float = 10.0) -> None:
    """Open and close a TCP connection to ``url``'s host; refused is a harness failure.

    A server that is not there when a run starts is the harness's problem, not
    the agent's (SPEC §4), so it is reported apart and nothing is run.
    """
    import asyncio
    from urllib.parse import urlsplit

    from ..errors import HarnessFailure

    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or (443 if parts.scheme in ("https", "mcp+https") else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        writer.close()
        await writer.wait_closed()
    except (OSError, TimeoutError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise HarnessFailure(f"target {target_uri}: cannot connect to {host}:{port}: "
                             f"{reason}") from None


def parsed_json(text: Any) -> Any:
    """``text`` parsed as JSON when it is a JSON string; anything else as it is.

    What a recorder gives as a string may be JSON (tool arguments and
    results in a host's log, a span's attributes) or plain text.
    """
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested past what the parser takes: text too
        return text

"""The recording proxy as an ``exec:`` target's observer: a route per trial, read after it.

``exec:``'s seam (``targets/exec.Observer``) starts this with the target and
asks it to watch each trial: the trial's process gets the route's variables
(base URLs, stand-in keys, the OTLP receiver and ``assay.trial``), and when
the trial ends its exchanges are read (``fold.read_exchanges``) and its
spans' tool executions merged in (``observed.with_wire``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ...errors import HarnessFailure
from ...model import Evidence, Trace
from .fold import read_exchanges
from .observed import WIRE_FACTS, evidence_claim, with_wire
from .proxy import RecordingProxy, Route, Upstream

if TYPE_CHECKING:
    from ..prices import PriceTable


class ProxyWatch:
    """One trial's route."""

    def __init__(self, route: Route, ask_tools: Collection[str], prices: PriceTable | None,
                 resource_attributes: str | None) -> None:
        self.route = route
        self._ask_tools = ask_tools
        self._prices = prices
        self.env: Mapping[str, str] = route.environment(resource_attributes)

    def seen(self, trace: Trace) -> Trace:
        """The trace with the route's exchanges and spans read into it; never raises."""
        from ..otel import executed_tools

        exchanges = self.route.close()
        try:
            facts = read_exchanges(exchanges, ask_tools=self._ask_tools, prices=self._prices)
            ran = executed_tools(self.route.spans)
            if not facts.model_calls and not ran:
                # Nothing came through: the program made no model call, or made it some
                # other way. Either way nothing was seen, and none is not "observed".
                unseen = {fact: Evidence.UNAVAILABLE for fact in WIRE_FACTS}
                return trace.model_copy(update={"evidence": {**trace.evidence, **unseen}})
            return with_wire(trace, facts, ran, self._ask_tools)
        except Exception as error:  # a reader's bug must not cost the trial its record
            note = f"the recorded model traffic could not be read ({type(error).__name__})"
            return trace.model_copy(update={"facets": {**trace.facets, "wire": note}})

    def end(self) -> None:
        """Close the route: a request after the trial is refused."""
        self.route.close()


class ProxyObserver:
    """Runs the battery's recording proxy for an ``exec:`` target (SPEC §15)."""

    def __init__(self, upstreams: Mapping[str, Upstream], ask_tools: Collection[str],
                 prices: PriceTable | None = None) -> None:
        self.proxy = RecordingProxy(upstreams)
        self._ask_tools = tuple(ask_tools)
        self._prices = prices
        self.evidence: Mapping[str, Evidence] = evidence_claim()

    async def start(self) -> None:
        """Listen on a loopback port; a port that cannot be had is a harness failure."""
        try:
            await asyncio.to_thread(self.proxy.start)
        except OSError as error:
            raise HarnessFailure(f"cannot start the recording proxy on loopback: {error}"
                                 ) from None

    def watch(self, trial: Any) -> ProxyWatch:
        """A route for ``trial`` (an ``exec.ExecTrial``), timed from the trial's start: the
        exchanges' times and the trial's own (a conversation's turns) are on one clock."""
        return ProxyWatch(self.proxy.open_route(trial.started), self._ask_tools, self._prices,
                          os.environ.get("OTEL_RESOURCE_ATTRIBUTES"))

    async def close(self) -> None:
        """Stop the proxy."""
        await asyncio.to_thread(self.proxy.close)

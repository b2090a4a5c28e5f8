"""A tau2-bench domain's tools as the handlers of a stateful tool fixture (SPEC §14).

``assay import tau2 DOMAIN`` writes a fixture whose tools name these
handlers: ``assay.imports.tau2_tools:airline.book_reservation`` is
``handler(arguments, state)``, and it runs tau2's own tool on tau2's own
database, so an agent sees what a tau2 agent would see (the same results,
the same errors, arguments passed through unvalidated as tau2 does).

**The state is an overlay**: ``{collection: {key: record}}`` holding only
the top-level records (airline's flights, users and reservations; retail's
products, users and orders) that differ from the database the tau2 wheel
ships; a record that is gone is ``null``. The whole database is the shipped
one with the overlay laid over it, and the overlay is a function of the
database, so "the database the agent left equals the one the gold actions
leave" — tau2's database check — is "the overlay equals the gold overlay",
a ``state: {equals: …}`` of a few kilobytes instead of megabytes.

Cost is what shapes the rest (docs/decisions/0079-tau2-import.md):

- the shipped database is read once per process (airline's 7 MB file takes
  a quarter of a second) and never changed;
- a trial's database is *layered* over it: each collection is a ``Layer``
  that hands a tool its own deep copy of a record the first time the tool
  looks it up by key, and lets read tools iterate the shipped records
  without copying them (tau2's tools only ever change a record they looked
  up by key), so making a trial's environment costs next to nothing;
- one live environment is kept per trial (keyed by the trial's state
  object, used again only while the state is exactly what the last call
  left), so a call costs the tool's own work;
- the overlay is recomputed only after a write tool, from the records the
  trial has copied.

tau2 is imported on the first call, never when a suite loads, and only its
domain modules (no litellm: half a second, not four).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, get_args

#: The domains whose tools are served here: every task of theirs starts from the shipped
#: database and is scored on it (telecom's tasks start from actions of their own).
DOMAINS = ("airline", "retail")

#: How many trials' environments are kept at once; an older one is made again if needed.
LIVE_ENVIRONMENTS = 256

Handler = Callable[[Any, Any], Any]


def quiet_import() -> None:
    """Set what must be set before anything imports tau2: litellm's price map is read from
    the package, not fetched (there may be no network), and tau2's loguru logging, at
    DEBUG on stderr by default, is off."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loguru import logger

    logger.disable("tau2")


@dataclass
class Domain:
    """What the handlers need of one tau2 domain: the shipped database, read once, and how
    to build an environment over a database."""

    name: str
    database: Any  # the shipped database (a tau2 ``DB`` model); never changed
    db_class: Any
    record_classes: dict[str, Any]
    make_environment: Callable[..., Any]
    #: The shipped records as JSON, made the first time a record is compared.
    shipped_json: dict[tuple[str, str], Any] = field(default_factory=dict)

    def shipped(self, collection: str, key: str) -> Any:
        """A shipped record as JSON (made once: many trials compare the same records)."""
        found = self.shipped_json.get((collection, key))
        if found is None:
            record = getattr(self.database, collection)[key]
            found = self.shipped_json[(collection, key)] = record.model_dump(
                mode="json", warnings=False)
        return found


_domains: dict[str, Domain] = {}
_loading = threading.Lock()


def domain(name: str) -> Domain:
    """The tau2 domain ``name``, its shipped database loaded on first use."""
    found = _domains.get(name)
    if found is not None:
        return found
    with _loading:
        if name not in _domains:
            _domains[name] = _load(name)
        return _domains[name]


def _load(name: str) -> Domain:
    if name not in DOMAINS:
        raise ValueError(f"tau2 domain {name!r} is not served here (only "
                         f"{', '.join(DOMAINS)})")
    quiet_import()
    if name == "airline":
        from tau2.domains.airline.data_model import FlightDB as Db
        from tau2.domains.airline.environment import get_environment
        from tau2.domains.airline.utils import AIRLINE_DB_PATH as path
    else:
        from tau2.domains.retail.data_model import RetailDB as Db
        from tau2.domains.retail.environment import get_environment
        from tau2.domains.retail.utils import RETAIL_DB_PATH as path
    records = {collection: get_args(info.annotation)[1]
               for collection, info in Db.model_fields.items()}
    return Domain(name, Db.load(str(path)), Db, records, get_environment)


class Layer(MutableMapping[str, Any]):
    """One collection of a trial's database, laid over the shipped one.

    Looking a record up by key gives the trial's own copy (made then, kept
    after); iterating gives the trial's copy where it has one and the
    shipped record otherwise, uncopied — tau2's read tools search this way
    and change nothing they find. ``own`` and ``gone`` are what the trial
    changed or might have: the overlay is computed from them alone.
    """

    def __init__(self, shipped: dict[str, Any], own: dict[str, Any] | None = None) -> None:
        self.shipped = shipped
        self.own: dict[str, Any] = own or {}
        self.gone: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        mine = self.own.get(key)
        if mine is not None:
            return mine
        if key in self.gone:
            raise KeyError(key)
        mine = self.own[key] = self.shipped[key].model_copy(deep=True)
        return mine

    def __setitem__(self, key: str, value: Any) -> None:
        self.gone.discard(key)
        self.own[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.own.pop(key, None)
        self.gone.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self.own or (key in self.shipped and key not in self.gone)

    def __iter__(self) -> Iterator[str]:
        for key in self.shipped:
            if key not in self.gone:
                yield key
        for key in self.own:
            if key not in self.shipped:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _seen(self, key: str) -> Any:
        mine = self.own.get(key)
        return mine if mine is not None else self.shipped[key]

    def values(self) -> Any:  # a list of records, uncopied: see the class
        return [self._seen(key) for key in self]

    def items(self) -> Any:
        return [(key, self._seen(key)) for key in self]


@dataclass
class Live:
    """One trial's tau2 environment and what its state held when a call last left it."""

    environment: Any
    layers: dict[str, Layer]
    state: dict[str, Any]
    left: dict[str, Any]


def environment(name: str, overlay: Any) -> Live:
    """A tau2 environment over the shipped database with ``overlay`` laid over it."""
    found = domain(name)
    if not isinstance(overlay, dict):
        raise ValueError("the tau2 tool fixture's state must be an overlay "
                         "{collection: {key: record}}")
    layers: dict[str, Layer] = {}
    for collection, record_class in found.record_classes.items():
        changed = overlay.get(collection) or {}
        if not isinstance(changed, dict):
            raise ValueError(f"the overlay's {collection} must be a mapping of records")
        layer = layers[collection] = Layer(getattr(found.database, collection))
        for key, record in changed.items():
            if record is None:
                layer.gone.add(key)
            else:
                layer.own[key] = record_class.model_validate(record)
    unknown = sorted(set(overlay) - set(found.record_classes))
    if unknown:
        raise ValueError(f"the overlay names no collection of {name}'s database: "
                         f"{', '.join(map(str, unknown))}")
    db = found.db_class.model_construct(**layers)
    return Live(found.make_environment(db=db), layers, {}, {})


def overlay_of(name: str, layers: dict[str, Layer]) -> dict[str, Any]:
    """The records of a trial's database that differ from the shipped ones (gone: null),
    collections and keys in sorted order."""
    found = domain(name)
    out: dict[str, Any] = {}
    for collection in sorted(layers):
        layer = layers[collection]
        diff: dict[str, Any] = {}
        for key, record in layer.own.items():
            now = record.model_dump(mode="json", warnings=False)
            if key not in layer.shipped or now != found.shipped(collection, key):
                diff[key] = now
        for key in layer.gone:
            if key in layer.shipped:
                diff[key] = None
        if diff:
            out[collection] = dict(sorted(diff.items()))
    return out


_live: OrderedDict[int, Live] = OrderedDict()
_live_lock = threading.Lock()


def _environment_for(name: str, state: dict[str, Any]) -> Live:
    """The trial's live environment: the one the last call on this very state object left,
    while the state is still what that call left in it; else one made from the state."""
    with _live_lock:
        live = _live.get(id(state))
        if live is not None and live.state is state and live.left == state:
            _live.move_to_end(id(state))
            return live
    live = environment(name, state)
    live.state, live.left = state, copy.deepcopy(state)
    with _live_lock:
        _live[id(state)] = live  # holding the state keeps its id from being reused
        while len(_live) > LIVE_ENVIRONMENTS:
            _live.popitem(last=False)
    return live


def call(name: str, tool: str, arguments: Any, state: Any) -> Any:
    """Run tau2's ``tool`` of domain ``name`` for the assistant, on the database ``state``
    (the overlay) stands for; a write leaves its changes in ``state``.

    Returns what a tau2 agent is shown: a string as it is, anything else as the
    JSON tau2 makes of it. A tool that fails raises, as in tau2 (where the
    agent is told ``Error: …``), and what it changed before it failed is kept,
    as tau2 keeps it.
    """
    if not isinstance(state, dict):
        raise ValueError("the tau2 tool fixture's state must be a mapping (an overlay)")
    if not isinstance(arguments, dict):
        raise TypeError(f"{tool}: arguments must be an object")
    live = _environment_for(name, state)
    tools = live.environment.tools
    if not tools.has_tool(tool):
        raise ValueError(f"Tool '{tool}' not found.")
    if tool == "calculate":
        _bounded_expression(arguments)
    from tau2.environment.toolkit import ToolType

    writes = tools.tool_type(tool) == ToolType.WRITE
    try:
        result = live.environment.make_tool_call(tool, requestor="assistant", **arguments)
        live.environment.sync_tools()
    finally:
        if writes:
            now = overlay_of(name, live.layers)
            state.clear()
            state.update(now)
            live.left = copy.deepcopy(now)
    return _shown(result)


def _bounded_expression(arguments: dict[str, Any]) -> None:
    """``calculate`` evaluates its expression with Python, which would spend minutes on
    ``9**9**9``; the tool promises ``+ - * /`` only, so ``**`` is refused as the tool
    refuses any other character it does not promise."""
    expression = arguments.get("expression")
    if isinstance(expression, str) and "**" in expression:
        raise ValueError("Invalid characters in expression")


def _shown(result: Any) -> Any:
    """A tool's result as a tau2 agent reads it (``Environment.to_json_str``), as JSON."""
    if isinstance(result, str):
        return result
    from tau2.environment.environment import Environment

    return json.loads(Environment.to_json_str(result))


def gold_overlay(name: str, actions: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """The overlay after ``actions`` — (requestor, tool, arguments) — on the shipped database,
    as tau2's evaluator makes its gold database: each run in turn, one that fails
    skipped (what it changed before failing kept)."""
    live = environment(name, {})
    for requestor, tool, arguments in actions:
        # tau2 logs a failing gold action and goes on: so does this
        with contextlib.suppress(Exception):
            live.environment.make_tool_call(tool, requestor=requestor, **arguments)
    return overlay_of(name, live.layers)


class _Tools:
    """The handlers of one domain, by tool name: ``airline.book_reservation``."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._made: dict[str, Handler] = {}

    def __getattr__(self, tool: str) -> Handler:
        if tool.startswith("_"):
            raise AttributeError(tool)
        made = self._made.get(tool)
        if made is None:
            name = self._name

            def handler(arguments: Any, state: Any) -> Any:
                return call(name, tool, arguments, state)

            handler.__name__ = handler.__qualname__ = tool
            handler.__doc__ = f"tau2's {name} tool {tool}, on the fixture's state."
            made = self._made[tool] = handler
        return made


airline = _Tools("airline")
retail = _Tools("retail")

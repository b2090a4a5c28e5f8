"""The house has no circles: every import in src/assay runs down the layers, and no
module imports one that imports it back (DESIGN.md, docs/decisions/0057-one-house.md).

Every import counts — at the top of a module, inside a function (made where it is
used, to keep start-up light) or under ``TYPE_CHECKING``: each says the importer
needs the imported module's ideas, and a type reached for from below is a circle
all the same. A new room must be placed in ``LAYERS`` before it can import anything.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: The rooms of src/assay, top first. A room imports only rooms in layers below its
#: own, never one beside it or above it. A room is a package (``engine``) or a
#: top-level module (``cli``); ``assay`` is the package's own ``__init__``.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("assay", "__main__", "pytest_plugin"),           # the public surface, the entry points
    ("cli",),                                         # the command group
    ("commands",),                                    # the command line: parse, call, exit
    ("web", "queue"),                                 # the workbench; the job-queue executor
    ("engine",),                                      # a run's whole life, the battery
    ("sampling", "drafting"),                         # online evaluation; drafting cases
    ("review",),                                      # people reviewing
    ("reports",),                                     # renderers of one report
    ("analysis",),                                    # compare, gate, drift, replay, registry
    ("store",),                                       # the ledger, the run record, reviews
    ("suites", "imports", "starter", "expect"),       # where cases come from
    ("checks",),                                      # one module per family of assertion
    ("judging",),                                     # opinions: templates, answers, models
    ("targets", "grading", "workspaces"),             # agents as traces; folding; trial folders
    ("model",),                                       # the vocabulary as typed data
    ("settings", "webhooks", "importing", "install_hints", "mcp_uri", "canonical",
     "version", "documents"),                                      # small leaves every room may use
    ("errors",),
)


def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for path in (SRC / "assay").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        found[".".join(parts)] = (path, package)
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of ours ``name`` falls in (a name imported from a module is in it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """Every module of ours ``module`` imports, with the line: top level, lazy or typing."""
    path, package = MODULES[module]
    here = module.split(".") if package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module.
            names = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in MODULES else stem
                     for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name) if name.split(".")[0] == "assay" else None
            if target is not None and target != module:
                yield target, node.lineno


GRAPH = {module: sorted(set(_imports(module))) for module in MODULES}


def room(module: str) -> str:
    """The room a module lives in: ``assay.engine.runs`` → ``engine``; ``assay`` → ``assay``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


LAYER_OF = {name: depth for depth, names in enumerate(LAYERS) for name in names}


def circles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        # Iterative: a deep import chain must not hit the recursion limit.
        work = [(node, iter(graph[node]))]
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        while work:
            current, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                target = step[0]
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                elif target in on_stack:
                    low[current] = min(low[current], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[current])
            if low[current] == index[current]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == current:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def upward(graph: dict[str, list[tuple[str, int]]], importer: str) -> list[str]:
    """Each import from a module of room ``importer`` into a room not below it, located."""
    found = []
    for module, targets in graph.items():
        if room(module) != importer:
            continue
        for target, line in targets:
            other = room(target)
            if other != importer and LAYER_OF[other] <= LAYER_OF[importer]:
                found.append(f"{module.replace('.', '/')}.py:{line} imports {target} "
                             f"({other} is not below {importer})")
    return found


def test_the_graph_is_read() -> None:
    # A reader that found nothing would pass every rule below: each kind of import is seen.
    assert len(MODULES) > 200
    runs = {target for target, _ in GRAPH["assay.engine.runs"]}
    assert "assay.errors" in runs  # at the top of the module
    assert "assay.targets" in runs  # inside a function
    record = {target for target, _ in GRAPH["assay.store.runs.record"]}
    assert "assay.store.database" in record  # under TYPE_CHECKING only
    store = {target for target, _ in GRAPH["assay.store"]}
    assert "assay.store.ledger.chain" in store  # relative, from a package's __init__


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert circles(GRAPH) == []


def test_circles_are_found() -> None:
    # The finder itself, on a made-up graph: one circle of three, one of two, a tail.
    graph = {"a": [("b", 1)], "b": [("c", 1)], "c": [("a", 1), ("d", 1)],
             "d": [("e", 1)], "e": [("d", 1)], "f": [("a", 1)]}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_every_room_has_a_layer() -> None:
    rooms = {room(module) for module in MODULES}
    unplaced = sorted(rooms - set(LAYER_OF))
    assert unplaced == [], f"place these rooms in LAYERS: {unplaced}"
    gone = sorted(set(LAYER_OF) - rooms)
    assert gone == [], f"LAYERS names rooms that no longer exist: {gone}"


@pytest.mark.parametrize("importer", sorted({room(m) for m in MODULES}))
def test_imports_run_down_the_layers(importer: str) -> None:
    assert upward(GRAPH, importer) == []


def test_an_arrow_up_or_across_is_caught() -> None:
    graph = {"assay.store.registry": [("assay.analysis.registry", 26), ("assay.model", 27)],
             "assay.web.live": [("assay.queue.submit", 9)],
             "assay.engine.runs": [("assay.store.database", 5)]}
    assert upward(graph, "store") == [
        "assay/store/registry.py:26 imports assay.analysis.registry "
        "(analysis is not below store)"]
    assert upward(graph, "web") == [
        "assay/web/live.py:9 imports assay.queue.submit (queue is not below web)"]
    assert upward(graph, "engine") == []

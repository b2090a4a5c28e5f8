"""``assay promote``: a stored trace becomes a draft case that asserts what that trial did
(SPEC §10) — its status, each tool it called (``calls``), and the tools it was offered
but did not call (``never_calls``) when the run's fixture says which those were.

Pure but for reading the case's fixture again (``offered_tools``): a trace records the
calls an agent made, not the tools it was offered, and a run keeps no list of them.
What it does keep is the case's ``fixture`` path (in its stored suite), the file the
case was read from (beside each assertion) and the fixture's digest (the case's
``fixture`` facet in the report). So the fixture is read again from where the run read
it, and believed only if its bytes still have the digest the run recorded. Otherwise
the tools are unknown and the reason is given: a draft then holds no ``never_calls``
rather than one built from a list the run never had. Nothing here reads the store or
prints; ``commands/promote`` does, and hands plain data in. The choices are in
docs/decisions/0041-drafts.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.suite import MAX_CASE_ID

if TYPE_CHECKING:
    from ..model import Trace

from ..canonical import file_digest
from ..errors import AssayError
from .case_yaml import comment_lines, yaml_text

#: What a promoted case's id ends with: it never clashes with the case it came from.
PROMOTED = "-promoted"
#: The case fields a promoted case keeps from the case it came from (what the agent is
#: given and how it runs); its assertions are the trace's, never the old ones.
KEPT = ("input", "fixture", "timeout_s", "model", "effort", "invocation")



@dataclass(frozen=True)
class ToolsOffered:
    """Which tools the agent could call in the trial, as far as the run tells.

    ``names`` None: not known, and ``why`` says why (no ``never_calls`` can be
    drafted then); else the names, ``why`` saying where they were read.
    """

    names: tuple[str, ...] | None
    why: str


@dataclass(frozen=True)
class Promotion:
    """Where a promoted case came from: the run, the case as it ran, the trial's trace."""

    run_id: str
    case: Mapping[str, Any]
    n: int
    outcome: str
    trace: Trace
    offered: ToolsOffered
    hidden: bool = False
    #: The file the case was read from, as the run saw it (None: not recorded).
    source_file: str | None = None


def promoted_id(case_id: str) -> str:
    """``<case>-promoted``, the case's id cut where needed to stay within ``MAX_CASE_ID``."""
    return case_id[: MAX_CASE_ID - len(PROMOTED)] + PROMOTED


def glob_literal(name: str) -> str:
    """A tool name as a glob that matches only itself (``*``, ``?`` and ``[`` bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def tools_called(trace: Trace) -> list[str]:
    """The tools a trace called, each once, in the order of its first call."""
    names = (event.name for event in trace.events if event.kind == "tool_call" and event.name)
    return list(dict.fromkeys(names))


def promoted_case(promotion: Promotion) -> dict[str, Any]:
    """The draft case: the input and settings that ran, and what the trial did as assertions."""
    case = promotion.case
    draft: dict[str, Any] = {"id": promoted_id(str(case["id"]))}
    for key in KEPT:
        if case.get(key) is not None:
            draft[key] = case[key]
    called = tools_called(promotion.trace)
    expect: list[Any] = [{"status": promotion.trace.status}]
    expect += [{"calls": glob_literal(name)} for name in called]
    offered = promotion.offered.names
    if offered is not None:
        idle = [name for name in dict.fromkeys(offered) if name not in called]
        if idle:
            expect.append({"never_calls": [glob_literal(name) for name in idle]})
    draft["expect"] = expect
    return draft


def promoted_text(promotion: Promotion) -> str:
    """The draft as YAML: a one-item list, the form of a suite's ``cases:`` entries,
    under comment lines that say it is a draft, where it came from and what it lacks."""
    case_id = str(promotion.case["id"])
    notes = [
        "DRAFT case made by `assay promote`: read it before it joins a suite.",
        f"from run {promotion.run_id}, case {case_id}, trial {promotion.n} "
        f"(that trial's outcome: {promotion.outcome}).",
        "It asserts what that one trial did: keep what must always hold, loosen what need not,",
        f"then paste it under the suite's cases: (its id ends in {PROMOTED}: it clashes with "
        "no case).",
    ]
    if promotion.case.get("fixture") is not None:
        where = promotion.source_file or "the suite file the case came from"
        notes.append(f"fixture: is relative to the folder of {where}.")
    notes.append(f"Tools: {promotion.offered.why}")
    if promotion.hidden:
        notes += ["This draft holds a HIDDEN case's content: keep it in the private hidden "
                  "folder,", "never in the suite file, a log or a review."]
    return comment_lines(notes) + yaml_text([promoted_case(promotion)])


def case_file(files: dict[str, list[str | None]], case_id: str) -> str | None:
    """The file a case was read from, as the run recorded it (beside its assertions)."""
    return next((f for f in files.get(case_id) or [] if f), None)


def offered_tools(case: dict[str, Any], facets: dict[str, str], source: str | None
                  ) -> ToolsOffered:
    """The tools the case's fixture declares, when it is the very fixture that ran.

    ``source``: the file the case came from (``case_file``), relative to the
    working folder as the run saw it; ``facets``: the case's facets in the
    run's report.
    """
    from ..suites.fixtures import is_tool_fixture, load_tool_fixture

    fixture = case.get("fixture")
    if fixture is None:
        return ToolsOffered(None, "the case has no tool fixture and the run records no list "
                                  "of the tools the agent could call, so no never_calls is "
                                  "drafted.")
    if source is None:
        return ToolsOffered(None, f"the run does not say which file the case came from, so "
                                  f"its fixture {fixture} could not be found: no never_calls "
                                  "is drafted.")
    path = Path(source).parent / str(fixture)
    if not path.exists():
        return ToolsOffered(None, f"its fixture {path} is not there (was the run made from "
                                  "another folder?): no never_calls is drafted.")
    if not is_tool_fixture(path):
        return ToolsOffered(None, f"its fixture {path} is not a tool fixture (a YAML file "
                                  "with tools:): no never_calls is drafted.")
    recorded = facets.get("fixture")
    if recorded is not None and file_digest(path) != recorded:
        return ToolsOffered(None, f"its fixture {path} has changed since the run (its digest "
                                  "is not the one the run recorded), so which tools the agent "
                                  "had is not known: no never_calls is drafted.")
    try:
        parsed = load_tool_fixture(path)
    except AssayError as error:
        return ToolsOffered(None, f"its fixture could not be read ({error}): no never_calls "
                                  "is drafted.")
    names = tuple(tool.name for tool in parsed.tools)
    how = "the same bytes the run recorded" if recorded is not None else \
        "as it reads now: the run recorded no digest to check it against"
    why = f"as declared by its fixture {path} ({how})."
    if parsed.mcp:
        why += (f" The tools of its {len(parsed.mcp)} MCP server(s) are not listed: the run "
                "does not record them, so never_calls does not cover them.")
    return ToolsOffered(names, why)

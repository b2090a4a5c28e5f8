"""Which tools a stored trial's agent could call: its case's tool fixture, as the run saw it.

A trace records the calls an agent made, not the tools it was offered, and
a run keeps no list of them either. What it does keep is the case's
``fixture`` path (in its stored suite), the file the case was read from
(beside each assertion) and the fixture's digest (the case's ``fixture``
facet in the report). So the fixture is read again from where the run read
it, and believed only if its bytes still have the digest the run recorded.
Otherwise the tools are unknown and the reason is given: a draft then holds
no ``never_calls`` rather than one built from a list the run never had.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..canonical import file_digest
from ..errors import AssayError
from .drafts import ToolsOffered


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

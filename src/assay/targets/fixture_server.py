"""A tool fixture served as a real MCP server over stdio, for the host CLIs (SPEC §14).

``claude`` and ``codex`` bring their own tools and take more only as MCP
servers. So that a case's fixture tools reach them too, each trial starts
this module (``python -c … ASSAY_FOLDER FIXTURE BASE STATE_FILE``, ``_BOOT``:
the fixture as loaded, in JSON; the folder its handlers import from)
as an MCP server of the host, built on the official ``mcp`` SDK's low-level
server: it lists the fixture's tools with their own schemas and answers
each call as the ``python:`` and ``openai:`` loops do (``result``,
``results``, a handler, with the trial's copy of the state). A handler that
raises is a tool error the agent sees. After every call it writes the state
to ``STATE_FILE`` (whole, then renamed into place), which the target reads
into the trial's trace once the CLI has exited; a state left unstorable is
written as the reason the trial is broken. Started again in the same trial
(the next turn of a conversation, SPEC §16), it carries on from the state
file as the last one left it.

The host names the calls ``mcp__fixture__NAME``; the target gives them back
their fixture names (``fixture_names``), so one suite checks the same calls
whichever agent ran it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model.fixture import ToolFixture

#: The server's name in the host's configuration: its tools are ``mcp__fixture__NAME``.
SERVER = "fixture"
#: What a call of one of its tools is named in a host's stream.
PREFIX = f"mcp__{SERVER}__"


#: How the server starts: this module of the assay that is running, found by its folder
#: (the command's first argument). A host may start its servers with an environment of
#: its own (Codex passes on only a few variables): a ``PYTHONPATH`` that found this
#: assay would not reach the server, and another assay, or none, would answer.
_BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
         "from assay.targets.fixture_server import main; main(sys.argv[1:])")


def server_command(fixture: ToolFixture, base_dir: Path, folder: Path) -> tuple[list[str], Path]:
    """The command a host starts the fixture's server with (this Python, this module), and
    the file its state will be in; the fixture as loaded is written to ``folder``."""
    given = folder / "fixture.json"
    given.write_text(fixture.model_dump_json(exclude_unset=True), encoding="utf-8")
    state_file = folder / "fixture-state.json"
    package = Path(__file__).resolve().parents[2]  # the folder that holds ``assay``
    return ([sys.executable, "-c", _BOOT, str(package), str(given), str(base_dir),
             str(state_file)], state_file)


def read_final_state(state_file: Path) -> tuple[bool, Any, str | None]:
    """(whether the server wrote a state, the state, why the trial is broken if it is)."""
    try:
        record = json.loads(state_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False, None, None
    except (OSError, ValueError) as exc:
        return False, None, f"the fixture server's state could not be read: {exc}"
    return True, record.get("state"), record.get("broken")


def fixture_names(name: str | None) -> str | None:
    """A host's name for a call of a fixture tool, given back its fixture name."""
    if name is not None and name.startswith(PREFIX):
        return name[len(PREFIX):]
    return name


def _write(state_file: Path, state: Any, broken: str | None) -> None:
    temporary = state_file.with_name(state_file.name + ".tmp")
    temporary.write_text(json.dumps({"state": state, "broken": broken}), encoding="utf-8")
    os.replace(temporary, state_file)


def main(argv: list[str]) -> None:
    """Serve the fixture in ``argv[0]`` (handlers from ``argv[1]``) over stdio; keep its
    state in ``argv[2]``."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from ..model.fixture import ToolFixture
    from ..model.storable import json_copy
    from .agent_tools import FixtureState, json_value

    given, base_dir, state_file = Path(argv[0]), Path(argv[1]), Path(argv[2])
    fixture = ToolFixture.model_validate_json(given.read_text(encoding="utf-8"))
    state = FixtureState(fixture)
    if state.present:
        # A conversation's next turn runs the host again, which starts this server again:
        # it carries on from the state the last one left (SPEC §16), not from the start.
        written, kept, broken = read_final_state(state_file)
        if broken is not None:
            state.broken = broken
        elif written:
            state.value = kept
        _write(state_file, None if state.broken else json_copy(state.value), state.broken)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=tool.name, description=tool.description or tool.name,
                       input_schema=tool.parameters)
            for tool in fixture.tools])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = fixture.tool(params.name)
        if tool is None:
            return _error(f"there is no tool {params.name!r}")
        try:
            result = json_value(state.answer(tool, params.arguments or {}, base_dir),
                                f"the result of tool {tool.name!r}")
            failed = None
        except Exception as exc:  # a failing tool is news for the agent, as it would be live
            result, failed = None, f"{type(exc).__name__}: {exc}"
        if state.present:
            _write(state_file, None if state.broken else json_copy(state.value), state.broken)
        if failed is not None:
            return _error(failed)
        text = result if isinstance(result, str) else json.dumps(result)
        structured = result if isinstance(result, dict) else None
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=structured)

    def _error(why: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=why)],
                                    is_error=True)

    server: Server[Any] = Server(SERVER, version="1", on_list_tools=list_tools,
                                 on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main(sys.argv[1:])

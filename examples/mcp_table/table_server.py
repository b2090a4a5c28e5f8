"""The table-extraction agent of ``examples/extraction`` served as a real MCP server.

One tool, ``extract_table``, built with the SDK's ``MCPServer``; the agent
itself is ``examples/extraction/table_agent.py``, unchanged, so the same
agent is evaluated in-process (``python:``) and over MCP (``mcp+stdio:``).

    python table_server.py                        # stdio (what the suite runs)
    python table_server.py --http 127.0.0.1:8000  # streamable HTTP at /mcp

The document is ``document`` (a file name) inside ``fixture_dir`` (a folder,
default ``.``); relative paths are relative to the server's working folder,
which for ``mcp+stdio:`` is the suite's folder. Or give it inline as
``text``. The answer is ``{columns, rows}`` as structured content.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "extraction"))
from table_agent import extract  # noqa: E402 - the agent lives beside the other example

server = MCPServer("table-extraction", version="1.0.0")


class Table(BaseModel):
    """The first table of a document: its column names and its rows."""

    columns: list[str]
    rows: list[dict[str, str]]


@server.tool()
def extract_table(document: str | None = None, fixture_dir: str = ".",
                  text: str | None = None) -> Table:
    """Extract the first table (CSV or Markdown) of a document."""
    if text is None:
        if not document:
            raise ToolError("give a document (a file name) or the text itself")
        path = Path(fixture_dir) / document
        if not path.is_file():
            raise ToolError(f"no such document: {document}")
        text = path.read_text(encoding="utf-8")
    return Table.model_validate(extract({"text": text}))


def main() -> None:
    """Serve over stdio, or over streamable HTTP with ``--http HOST:PORT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at /mcp")
    args = parser.parse_args()
    if args.http:
        host, _, port = args.http.rpartition(":")
        server.run("streamable-http", host=host or "127.0.0.1", port=int(port))
    else:
        server.run()


if __name__ == "__main__":
    main()

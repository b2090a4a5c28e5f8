"""A tiny stdio MCP server the host CLIs are given in the tests (``--mcp-config``)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("orders")


@server.tool()
def lookup(order: str) -> dict[str, Any]:
    """Look an order up by its number."""
    return {"order": order, "status": "shipped", "total": "42.00"}


@server.tool()
def refund(order: str) -> dict[str, Any]:
    """Refund an order (this one always fails)."""
    raise ValueError(f"order {order} cannot be refunded: already refunded")


if __name__ == "__main__":
    server.run("stdio")

"""A starter MCP server for `assay init --target mcp`: replace it with yours.

assay starts it over stdio (`python starter_server.py`, in this folder) and
calls its tool once per trial with the case's input as the arguments.
"""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("starter-orders", version="1.0.0")

ORDERS = {"A-1": "shipped", "A-2": "lost"}


@server.tool()
def order_status(order: str) -> dict[str, str]:
    """The status of an order, by its number."""
    if not order.strip():
        raise ToolError("give an order number")
    return {"order": order, "status": ORDERS.get(order, "unknown")}


if __name__ == "__main__":
    server.run()

"""The connection's own rules, with a stand-in for the SDK client where a real server
cannot be made to misbehave on cue (a transport that dies under a waiting call)."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from assay.targets.mcp_connection import (
    ConnectFailed,
    Connection,
    ConnectionLost,
    answer_of,
    describe,
)


class HangingClient:
    """Enters like ``mcp.Client``; every call waits forever."""

    server_info = types.SimpleNamespace(name="stand-in", version="0")
    protocol_version = "2026-07-28"

    async def __aenter__(self) -> HangingClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        await asyncio.Event().wait()


def test_a_connection_that_dies_wakes_the_calls_waiting_on_it() -> None:
    async def go() -> tuple[str, bool]:
        connection = Connection(HangingClient)  # type: ignore[arg-type]
        await connection.open(5)
        assert (connection.server_name, connection.protocol_version) == ("stand-in", "2026-07-28")
        waiting = asyncio.ensure_future(connection.call("t", {}))
        await asyncio.sleep(0.05)
        assert connection._task is not None
        connection._task.cancel()  # the owner task ends, as when a transport fails
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(waiting, 2)
        # The cancellation was taken back: the caller's task is not left cancelling.
        me = asyncio.current_task()
        assert me is not None and me.cancelling() == 0
        with pytest.raises(ConnectionLost):
            await connection.call("t", {})
        await connection.close()
        return connection.why_lost(), connection.lost

    reason, lost = asyncio.run(go())
    assert lost and reason == "the server closed the connection"


def test_a_callers_own_cancellation_is_not_taken_for_a_lost_connection() -> None:
    async def go() -> bool:
        connection = Connection(HangingClient)  # type: ignore[arg-type]
        await connection.open(5)
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await connection.call("t", {})
            return connection.lost
        finally:
            await connection.close()

    assert asyncio.run(go()) is False


def test_a_client_that_cannot_enter_is_a_failed_connect() -> None:
    class Refusing(HangingClient):
        async def __aenter__(self) -> HangingClient:
            raise ExceptionGroup("task group", [ConnectionRefusedError("port 9 refused")])

    with pytest.raises(ConnectFailed, match="ConnectionRefusedError: port 9 refused"):
        asyncio.run(Connection(Refusing).open(5))  # type: ignore[arg-type]


def test_a_handshake_that_never_ends_is_a_failed_connect() -> None:
    class Silent(HangingClient):
        async def __aenter__(self) -> HangingClient:
            await asyncio.Event().wait()
            return self

    with pytest.raises(ConnectFailed, match="no answer to the MCP handshake within 0.1s"):
        asyncio.run(Connection(Silent).open(0.1))  # type: ignore[arg-type]


def test_the_output_of_a_result() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    def text(*parts: str) -> list[Any]:
        return [TextContent(type="text", text=p) for p in parts]

    structured = CallToolResult(content=text('{"x": 1}'), structured_content={"x": 2})
    assert answer_of(structured).output == {"x": 2}
    assert answer_of(CallToolResult(content=text("[1, 2]"))).output == [1, 2]
    assert answer_of(CallToolResult(content=text("NaN"))).output == "NaN"
    assert answer_of(CallToolResult(content=text("a", "2"))).output == ["a", 2]
    image = ImageContent(type="image", data="AA==", mime_type="image/png")
    assert answer_of(CallToolResult(content=[image])).output is None
    failed = answer_of(CallToolResult(content=text("boom", "again"), is_error=True))
    assert (failed.is_error, failed.text) == (True, "boom\nagain")
    assert describe(ExceptionGroup("g", [ValueError("inner")])) == "ValueError: inner"

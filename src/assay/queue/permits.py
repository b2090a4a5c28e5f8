"""A limit on trials in flight against one target, held in the database across all workers.

``--target-limit L`` gives a target L permits. A permit is one of L
PostgreSQL advisory locks named by the target's URI and a slot number;
a trial holds one while its agent is called and lets it go after. Each
worker takes its permits on one connection of its own, so a worker that
dies frees them the moment its connection drops, and a worker that is only
paused keeps them, as it may still be calling (docs/decisions/0048-queue.md).
When all L are taken, a trial waits, polling every few tens of milliseconds,
outside its own timeout. Runs that name the same URI share its permits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

#: How long a trial waits between looks for a free permit (seconds, jittered).
POLL_S = (0.02, 0.1)


def target_key(uri: str) -> int:
    """The advisory lock's first key for a target: 32 bits of its URI's SHA-256."""
    return int.from_bytes(hashlib.sha256(uri.encode("utf-8")).digest()[:4], "big", signed=True)


class Permits:
    """This worker's side of every target's permits, on one connection."""

    def __init__(self, conninfo: str, *, rng: random.Random | None = None) -> None:
        self.conninfo = conninfo
        self.rng = rng or random.Random()
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        #: The (key, slot) pairs this worker holds: the same session may take an advisory
        #: lock again, so its own are skipped here, not by the database.
        self._held: set[tuple[int, int]] = set()

    @contextlib.asynccontextmanager
    async def permit(self, uri: str, limit: int) -> AsyncIterator[int]:
        """Hold one of ``uri``'s ``limit`` permits for the block; yields its slot."""
        key = target_key(uri)
        slot = await self._acquire(key, limit)
        try:
            yield slot
        finally:
            await self._release(key, slot)

    async def _acquire(self, key: int, limit: int) -> int:
        while True:
            async with self._lock:
                connection = await self._connect()
                for slot in range(limit):
                    if (key, slot) in self._held:
                        continue
                    cursor = await connection.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                                      (key, slot))
                    row = await cursor.fetchone()
                    if row is not None and row[0]:
                        self._held.add((key, slot))
                        return slot
            await asyncio.sleep(self.rng.uniform(*POLL_S))

    async def _release(self, key: int, slot: int) -> None:
        async with self._lock:
            self._held.discard((key, slot))
            if self._connection is not None and not self._connection.closed:
                await self._connection.execute("SELECT pg_advisory_unlock(%s, %s)", (key, slot))

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if self._connection is None or self._connection.closed:
            import psycopg

            self._connection = await psycopg.AsyncConnection.connect(self.conninfo,
                                                                     autocommit=True)
            self._held.clear()  # a new session holds nothing
        return self._connection

    async def close(self) -> None:
        """Drop the connection (and with it every permit still held)."""
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

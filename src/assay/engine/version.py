"""Take an agent version without running a battery: start the target, read its identity, stop.

``assay agent publish`` must name the version a battery of the same target
records, so the target is made and started exactly as ``engine/runs.py`` makes
and starts it (``make_target``, ``start()``, then ``identity()``:
docs/decisions/0019-agent-version.md) — relative names resolving in the
folder given, as a battery resolves them beside its suite file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Version:
    """A target's version: its URI, its identity (file names and digests) and the digest."""

    uri: str
    identity: dict[str, str]
    digest: str


def take_version(uri: str, base_dir: Path, base_url: str | None = None) -> Version:
    """Start the target ``uri`` names, take its identity, close it.

    A target that cannot start raises the harness's ``HarnessFailure`` (exit
    3); an unknown scheme is a ``UsageError`` (exit 2).
    """
    from ..targets import TargetOptions, make_target
    from ..targets.identity import identity_digest

    target = make_target(uri, TargetOptions(base_dir=base_dir, concurrency=1,
                                            base_url=base_url))

    async def started() -> dict[str, str]:
        await target.start()
        try:
            return target.identity()
        finally:
            await target.close()

    identity = asyncio.run(started())
    return Version(target.uri, identity, identity_digest(identity))

"""What a trial left behind in its workspace: its change set (SPEC §14).

Data only: ``workspaces.changes`` takes it after the agent, the trace will
carry it as an ``observed`` fact, and the outcome checks read it from there
(grading never touches the disk).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .storable import storable_text

Change = Literal["created", "modified", "deleted"]

#: The most bytes of unified diff a change set keeps per trial; past it the diff
#: stops at a file boundary and says so (``diff_truncated``).
DIFF_CAP = 256 * 1024


class FileChange(BaseModel):
    """One path the agent created, modified or deleted, relative to the workspace (``/``).

    ``size`` and ``sha256`` describe the file as the agent left it (as it was,
    for a deleted one). A symbolic link is recorded as a link: ``link`` is where
    it points, never followed, and it has no size or digest. ``binary``: its
    content is not text, so the diff has no lines of it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    change: Change
    size: int | None = None
    sha256: str | None = None
    link: str | None = None
    binary: bool = False


class ChangeSet(BaseModel):
    """Every change in the workspace, sorted by path, and a unified diff of the text ones."""

    model_config = ConfigDict(extra="forbid")

    files: list[FileChange] = Field(default_factory=list)
    diff: str = ""
    #: The diff stopped at ``DIFF_CAP`` bytes: the files after that are listed, not diffed.
    diff_truncated: bool = False

    def paths(self, *changes: Change) -> list[str]:
        """The paths changed in any of these ways (all of them when none is named)."""
        return [f.path for f in self.files if not changes or f.change in changes]

    @classmethod
    def of(cls, files: list[FileChange], diff: str, truncated: bool) -> ChangeSet:
        """A change set whose diff text is made storable (it holds what the agent wrote)."""
        return cls(files=sorted(files, key=lambda f: f.path), diff=storable_text(diff),
                   diff_truncated=truncated)

"""What a trial left behind in its workspace: its change set (SPEC §14).

Data only: ``workspaces.changes`` takes it after the agent, the trace will
carry it as an ``observed`` fact, and the outcome checks read it from there
(grading never touches the disk).
"""

from __future__ import annotations

import re
from functools import lru_cache
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
        """A change set whose diff text is made storable (it holds what the agent wrote).

        Built from fields already validated (each ``FileChange`` was), so not
        validated again: this runs once per trial of every case with a workspace.
        """
        return cls.model_construct(files=sorted(files, key=lambda f: f.path),
                                   diff=storable_text(diff), diff_truncated=truncated)


#: The most bytes of one file a ``file:`` check is given; past it the content is cut
#: and says so (``FileRead.truncated``), and the check grades what was kept.
FILE_CAP = 1024 * 1024
#: The most paths kept per glob of a ``files: {exists, absent}`` rule.
FOUND_CAP = 100
#: The most bytes of a ``command``'s stdout (and of its stderr's tail) the trace keeps.
OUTPUT_CAP = 256 * 1024


class FileRead(BaseModel):
    """A file a ``file:`` check names, as the agent left it: its text (None: not there).

    ``binary``: the bytes were not UTF-8 text (they are kept decoded with
    replacement characters); ``truncated``: only the first ``FILE_CAP`` bytes.
    """

    model_config = ConfigDict(extra="forbid")

    path: str
    exists: bool
    text: str | None = None
    binary: bool = False
    truncated: bool = False
    #: Why it could not be read although it is there (a folder, a link out of the workspace).
    error: str | None = None


class CommandRun(BaseModel):
    """One ``command`` run in the final workspace: exit code, output, or why it did not run.

    ``exit_code`` is None when the command could not start or ran out of time;
    ``error`` then says which, and the check is inconclusive, never failed.
    """

    model_config = ConfigDict(extra="forbid")

    command: str | list[str]
    timeout_s: float
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    duration_s: float = 0.0
    error: str | None = None


class WorkspaceFacts(BaseModel):
    """What the engine saw of a trial's workspace after the agent (SPEC §14, ``observed``).

    The checks ``files``, ``file`` and ``command`` read these and never the disk,
    so a stored trial is graded again exactly as it was.
    """

    model_config = ConfigDict(extra="forbid")

    changes: ChangeSet = Field(default_factory=ChangeSet)
    files: list[FileRead] = Field(default_factory=list)
    commands: list[CommandRun] = Field(default_factory=list)
    #: For each glob of a ``files: {exists, absent}`` rule, the final workspace's paths
    #: it matches (at most ``FOUND_CAP``).
    found: dict[str, list[str]] = Field(default_factory=dict)
    #: Where the workspace is while the trial is graded (a grader may look in it);
    #: never stored: it is gone once the trial has been graded.
    path: str | None = Field(default=None, exclude=True)

    def file(self, path: str) -> FileRead | None:
        """What was read of ``path``, if a check named it."""
        return next((f for f in self.files if f.path == path), None)

    def command(self, command: str | list[str], timeout_s: float) -> CommandRun | None:
        """The run of this command with this timeout, if one was made."""
        return next((c for c in self.commands
                     if c.command == command and c.timeout_s == timeout_s), None)


@lru_cache(maxsize=1024)
def _glob_pattern(glob: str) -> re.Pattern[str]:
    """A workspace glob as a regular expression over ``/``-separated relative paths.

    ``*`` and ``?`` stay within one folder, ``**`` crosses folders (``**/`` may
    match none), ``[abc]`` is a class. A glob also matches everything below
    the folder it names: ``tests`` and ``tests/**`` both cover ``tests/a.py``.
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1:end]
            negated = body.startswith("!")
            body = re.sub(r"([\\\]^])", r"\\\1", body[1:] if negated else body)
            out.append(f"[{'^' if negated else ''}{body}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out).rstrip("/") + "(?:/.*)?")


def glob_matches(glob: str, path: str) -> bool:
    """Whether ``path`` (relative, ``/``-separated) falls under ``glob`` (``_glob_pattern``)."""
    return _glob_pattern(glob.strip("/")).fullmatch(path) is not None


def check_glob(glob: str) -> str | None:
    """What is wrong with a workspace glob (absolute, ``..``, empty), or None."""
    if not glob or not glob.strip("/"):
        return "an empty glob matches nothing"
    if glob.startswith("/"):
        return f"{glob!r} is absolute; globs are relative to the workspace"
    if ".." in glob.split("/"):
        return f"{glob!r} climbs out of the workspace (..)"
    return None

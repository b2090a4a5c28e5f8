"""One trial's workspace: staged from its source, its change set taken, removed, swept.

``stage`` copies the source folder (``copy.copy_tree``) under a root folder and
writes, beside the copy, who owns it (the process id and that process's start
time, so a reused id is not mistaken for the owner). After the agent,
``Workspace.changes`` compares the copy with what was staged:

- a file whose size and modification time (to the nanosecond) are as staged is
  unchanged, and is never read; only what may have changed is hashed, and the
  original is hashed only when the size is the same (a touch that rewrote the
  same bytes is no change);
- created, modified and deleted paths get their size and sha256 (a deleted
  file, as it was); a symbolic link is recorded as a link, never followed;
- text files are diffed (unified, ``a/PATH`` → ``b/PATH``) up to ``DIFF_CAP``
  bytes per trial, after which the diff stops at a file boundary and says so.

``remove`` deletes the copy and its owner file; ``sweep`` deletes the
workspaces of processes that are gone (a run killed with ``kill -9``), so the
next run leaves none behind.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..model.changes import DIFF_CAP, ChangeSet, FileChange
from .copy import copy_tree

#: The owner file's suffix, beside each workspace folder.
OWNER = ".owner"
#: Bytes read of a file to tell text from binary (a NUL in them, or not UTF-8).
SNIFF = 8192


@dataclass(frozen=True)
class _Entry:
    """A path as staged: a file (size, modification time) or a link (its target)."""

    size: int
    mtime_ns: int
    link: str | None = None


def _listing(root: Path) -> dict[str, _Entry]:
    """Every file and link below ``root`` by its path from there (``/``-separated)."""
    found: dict[str, _Entry] = {}
    for here, dirs, names in os.walk(root, followlinks=False):
        for name in [*dirs, *names]:
            path = os.path.join(here, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if stat.S_ISLNK(st.st_mode):
                found[rel] = _Entry(0, 0, os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = _Entry(st.st_size, st.st_mtime_ns)
    return found


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            sha.update(block)
    return "sha256:" + sha.hexdigest()


def _text(path: Path, size: int) -> tuple[list[str] | None, bool]:
    """The file's lines when it is text small enough to diff (else None), and whether it
    is binary: a NUL in its first bytes, or not UTF-8."""
    if size > DIFF_CAP:
        with open(path, "rb") as file:
            return None, b"\0" in file.read(SNIFF)
    data = path.read_bytes()
    if b"\0" in data[:SNIFF]:
        return None, True
    try:
        return data.decode("utf-8").splitlines(keepends=True), False
    except UnicodeDecodeError:
        return None, True


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


@dataclass
class Workspace:
    """A trial's copy of a folder (``path``) and what it held when it was staged."""

    path: Path
    source: Path
    _staged: dict[str, _Entry] = field(repr=False)

    def changes(self, cap: int = DIFF_CAP) -> ChangeSet:
        """What the agent created, modified and deleted here, with a diff of the text."""
        now = _listing(self.path)
        files: list[FileChange] = []
        texts: list[tuple[str, list[str], list[str]]] = []
        for rel in sorted(set(now) | set(self._staged)):
            before, after = self._staged.get(rel), now.get(rel)
            if after is None:
                assert before is not None
                files.append(self._gone(rel, before))
                if before.link is None:
                    lost = _text(self.source / rel, before.size)[0]
                    if lost:
                        texts.append((rel, lost, []))
                continue
            if after.link is not None:
                if before is None or before.link != after.link:
                    files.append(FileChange(path=rel, change="modified" if before else "created",
                                            link=after.link))
                continue
            if before is not None and before.link is None and \
                    (before.size, before.mtime_ns) == (after.size, after.mtime_ns):
                continue  # as staged: never read
            digest = _digest(self.path / rel)
            if before is not None and before.link is None and before.size == after.size \
                    and _digest(self.source / rel) == digest:
                continue  # rewritten with the same bytes
            new, binary = _text(self.path / rel, after.size)
            files.append(FileChange(path=rel, change="modified" if before else "created",
                                    size=after.size, sha256=digest, binary=binary))
            if new is not None:
                was: list[str] | None = []
                if before is not None and before.link is None:
                    was = _text(self.source / rel, before.size)[0]
                if was is not None and (was or new):
                    texts.append((rel, was, new))
        diff, truncated = _diff(texts, cap)
        return ChangeSet.of(files, diff, truncated)

    def _gone(self, rel: str, before: _Entry) -> FileChange:
        if before.link is not None:
            return FileChange(path=rel, change="deleted", link=before.link)
        return FileChange(path=rel, change="deleted", size=before.size,
                          sha256=_digest(self.source / rel))

    def remove(self) -> None:
        """Delete the copy and its owner file (gone already is fine)."""
        shutil.rmtree(self.path, ignore_errors=True)
        Path(str(self.path) + OWNER).unlink(missing_ok=True)


def _diff(texts: list[tuple[str, list[str], list[str]]], cap: int) -> tuple[str, bool]:
    """The unified diffs in path order, whole files only, up to ``cap`` bytes."""
    parts: list[str] = []
    used = 0
    for rel, old, new in texts:
        lines = difflib.unified_diff(old, new, fromfile="/dev/null" if not old and new
                                     else f"a/{rel}", tofile="/dev/null" if old and not new
                                     else f"b/{rel}")
        text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)
        size = len(text.encode("utf-8"))
        if used + size > cap:
            return "".join(parts), True
        parts.append(text)
        used += size
    return "".join(parts), False


def stage(source: Path, root: Path) -> Workspace:
    """A fresh copy of the folder ``source`` under ``root``, owned by this process."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / uuid.uuid4().hex
    pid = os.getpid()
    Path(str(path) + OWNER).write_text(f"{pid} {_start_time(pid) or ''}\n")
    try:
        copy_tree(source, path)
    except BaseException:
        Workspace(path, source, {}).remove()
        raise
    return Workspace(path, source, _listing(path))


def sweep(root: Path) -> list[Path]:
    """Delete the workspaces under ``root`` whose owner process is gone; those deleted.

    An owner is gone when no process has its id, or the process with that id
    started at another time (the id was reused). A workspace of a live process
    is kept, whoever it is.
    """
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for owner in root.glob(f"*{OWNER}"):
        try:
            pid_text, _, started = owner.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        alive = _start_time(pid) is not None and (not started or _start_time(pid) == started)
        if alive:
            continue
        path = Path(str(owner)[: -len(OWNER)])
        Workspace(path, path, {}).remove()
        removed.append(path)
    return removed

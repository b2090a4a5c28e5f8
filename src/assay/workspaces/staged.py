"""One trial's workspace: staged from its source, its change set taken, removed, swept.

``stage`` copies the source folder under a root folder, inside a folder of the
owning process named by its id and start time (so a reused id is not mistaken
for the owner): a source of a few entries in Python, in this process; a larger
one with ``copy.copy_tree``. A ``Source`` lists its folder once for every trial
staged from it: the copy keeps sizes and modification times, so the copy's
listing is the source's. After the agent, ``Workspace.changes`` compares the
copy with what was staged:

- a file whose size and modification time (to the nanosecond) are as staged is
  unchanged, and is never read; only what may have changed is hashed, and the
  original is hashed only when the size is the same (a touch that rewrote the
  same bytes is no change);
- created, modified and deleted paths get their size and sha256 (a deleted
  file, as it was); a symbolic link is recorded as a link, never followed;
- text files are diffed (unified, ``a/PATH`` → ``b/PATH``) up to ``DIFF_CAP``
  bytes per trial, after which the diff stops at a file boundary and says so.

``remove`` deletes the copy; ``sweep`` deletes the workspaces of processes that
are gone (a run killed with ``kill -9``), so the next run leaves none behind.
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
import functools
import hashlib
import itertools
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..model.changes import DIFF_CAP, ChangeSet, FileChange
from .copy import copy_tree, python_copy_tree

#: The owner file's suffix, beside each workspace folder (as an earlier version staged).
OWNER = ".owner"
#: A source of at most this many files, folders and links is copied in this process:
#: starting ``cp`` would cost more than the copy.
SMALL = 64
#: ... and of at most this many bytes (its copy may run on the event loop).
SMALL_BYTES = 1 << 20
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
    return _walk(root)[0]


def _walk(root: Path) -> tuple[dict[str, _Entry], int]:
    """``_listing`` and the number of entries (folders too) below ``root``."""
    found: dict[str, _Entry] = {}
    entries = 0
    cut = len(str(root)) + 1  # a path below root, less "root/": relpath without its cost
    for here, dirs, names in os.walk(root, followlinks=False):
        entries += len(dirs) + len(names)
        for name in [*dirs, *names]:
            path = os.path.join(here, name)
            st = os.lstat(path)
            rel = path[cut:] if os.sep == "/" else path[cut:].replace(os.sep, "/")
            if stat.S_ISLNK(st.st_mode):
                found[rel] = _Entry(0, 0, os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = _Entry(st.st_size, st.st_mtime_ns)
    return found, entries


@dataclass(frozen=True)
class Source:
    """A folder trials are staged from, listed once (a run's sources do not change under it)."""

    path: Path
    listing: dict[str, _Entry] = field(repr=False)
    entries: int

    @classmethod
    def of(cls, path: Path) -> Source:
        """The folder ``path``, listed now."""
        listing, entries = _walk(path)
        return cls(path, listing, entries)

    @functools.cached_property
    def size(self) -> int:
        """The bytes of its files."""
        return sum(entry.size for entry in self.listing.values())

    @property
    def small(self) -> bool:
        """Few enough entries and bytes to copy here rather than start ``cp``."""
        return self.entries <= SMALL and self.size <= SMALL_BYTES


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
    #: Staged from a ``Source.small``: its work is cheap enough to do anywhere.
    small: bool = False

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
        """Delete the copy (gone already is fine)."""
        try:
            os.rmdir(self.path)  # an empty one, as many are: one system call
        except OSError:
            shutil.rmtree(self.path, ignore_errors=True)


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


#: The names of this process's copies.
_numbers = itertools.count(1)
#: This process's folder under each root it staged in (made once).
_owned: dict[Path, Path] = {}


def _owner_folder(root: Path) -> Path:
    """This process's folder under ``root``: ``PID-STARTTIME``, made on first use."""
    pid = os.getpid()
    key = root
    found = _owned.get(key)
    if found is None or not found.name.startswith(f"{pid}-"):
        found = root / f"{pid}-{_start_time(pid) or 'unknown'}"
        found.mkdir(parents=True, exist_ok=True)
        # An earlier version left an owner file beside each copy; the sweep still reads them.
        if not _owned:
            atexit.register(_leave)
        _owned[key] = found
    return found


def _leave() -> None:
    """At exit: this process's folders, if every workspace in them was removed."""
    for folder in _owned.values():
        with contextlib.suppress(OSError):
            folder.rmdir()


def stage(source: Path | Source, root: Path) -> Workspace:
    """A fresh copy of the folder ``source`` under ``root``, owned by this process.

    Given a ``Source``, its listing stands for the copy's (no walk of the copy).
    """
    listed = source if isinstance(source, Source) else None
    folder = listed.path if listed is not None else source
    assert isinstance(folder, Path)
    # Unique within the owner's folder, which no other process writes in.
    path = _owner_folder(root) / f"{next(_numbers):x}"
    try:
        if listed is not None and listed.entries == 0:
            os.mkdir(path)
        elif listed is not None and listed.small:
            python_copy_tree(folder, path)
        else:
            copy_tree(folder, path)
    except BaseException:
        Workspace(path, folder, {}).remove()
        raise
    if listed is not None:
        return Workspace(path, folder, listed.listing, listed.small)
    return Workspace(path, folder, _listing(path))


def sweep(root: Path) -> list[Path]:
    """Delete the workspaces under ``root`` whose owner process is gone; those deleted.

    An owner is gone when no process has its id, or the process with that id
    started at another time (the id was reused). A workspace of a live process
    is kept, whoever it is.
    """
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        pid_text, dash, started = folder.name.partition("-")
        if not dash or not pid_text.isdigit() or not folder.is_dir():
            continue
        pid = int(pid_text)
        now = _start_time(pid)
        if now is not None and (started == "unknown" or now == started):
            continue
        removed.extend(sorted(folder.iterdir()))
        shutil.rmtree(folder, ignore_errors=True)
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

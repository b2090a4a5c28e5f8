"""A cache of model calls on disk: answers appended to logs, found through an index in memory.

Two caches use it, kept apart (SPEC §9): the agent's model calls
(``.assay/cache/agent``, opt-in) and the judges' (``.assay/cache/judge``).
A key is a list of JSON values — for both, the case, the trial index, the
model and the digest of the prompt: the trial index is in the key so that
trial 2 of a case is never served trial 1's answer, which would hide
exactly the variance several trials are run to see.

**Why a log.** The cache used to keep one JSON file per answer, written to
a temporary name and moved into place. Creating a file costs about a
millisecond of system time on the machine assay is benched on, for every
entry, even from a thread of its own: a battery that filled the judge
cache with a thousand answers ran at 1.5x to 1.7x its ideal wall, against
about 1.2x without the cache (``bench/judged.py``, the "filling" row).
Appending a line to a file already open is one ``write``: tens of
microseconds, most of it making the JSON. Reading is cheaper too: one
``pread`` on a file held open, where a file per answer cost an open, a
read and a close.

**The layout.** Each ``CallCache`` that writes appends to a segment of its
own, ``<folder>/<UTC time>-<pid>-<random hex>.log``, made on its first
``put``: two processes never write one file, so no line of one interleaves
with another's. A line is ``<64 hex digits of the key> <the value as
compact JSON>\\n``, written by one ``os.write`` on an ``O_APPEND``
descriptor; JSON escapes a newline inside a string, so a value never
splits a line. The first ``get`` reads every segment once and notes, per
key, where its value lies (no JSON is parsed then); a later line for a key
replaces an earlier one, and segments are read oldest first (by name). A
value is read with ``pread`` and parsed when it is asked for. What this
object writes is added to the index as it is written.

**Reading fails quietly.** A line cut short (a process killed mid-write,
a full disk), a line that does not start with a key, a value that is not
JSON or not an object: each is a miss, and the answer is asked for and
appended again. A key not in the logs is looked up in the layout of
earlier versions, ``<folder>/<key[:2]>/<key>.json`` (``{"key", "value"}``),
which is read and never written. A write that fails is dropped: a cache
never stops a run.

Nothing is ever removed from a log: an answer written twice takes its
space twice, and each process that writes leaves a segment. Clear the
cache by deleting its folder. The folder is ``ASSAY_CACHE_DIR`` when set,
else ``.assay/cache`` in the working folder. What is kept may be a hidden
case's (a judge's answer quotes it): the folder sits beside the store,
which holds the same content, and is never shown anywhere; segments are
made readable by their owner only.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import secrets
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENV_FOLDER = "ASSAY_CACHE_DIR"
FORMAT = "assay.call-cache/1"

#: A line's head: the key and the one space before its value.
_HEAD = re.compile(rb"[0-9a-f]{64} ")
_KEY = re.compile(r"[0-9a-f]{64}")
_OLD_FOLDER = re.compile(r"[0-9a-f]{2}")
_HEAD_LEN = 65
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """Where caches live: ``ASSAY_CACHE_DIR`` or ``.assay/cache``."""
    given = (os.environ if env is None else env).get(ENV_FOLDER)
    return Path(given) if given else Path(".assay") / "cache"


class _Handles:
    """The descriptors a cache holds open: its own segment's, and one per segment read."""

    def __init__(self) -> None:
        self.out: int | None = None
        self.readers: dict[int, int] = {}

    def close(self) -> None:
        out, self.out = self.out, None
        readers, self.readers = list(self.readers.values()), {}
        for fd in ([out] if out is not None else []) + readers:
            try:
                os.close(fd)
            except OSError:
                pass


class CallCache:
    """Answers by key, under one folder (``agent``, ``judge``) of the cache root.

    ``hits``, ``misses`` and ``writes`` count what happened (benches and tests
    read them). ``get`` and ``put`` may run on two threads (the loop's, and
    ``put_later``'s writer). ``close()`` when done; it flushes first.
    """

    def __init__(self, kind: str, root: Path | None = None) -> None:
        self.kind = kind
        self.folder = (root if root is not None else cache_root()) / kind
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._later: queue.SimpleQueue[tuple[str, Mapping[str, Any]] | None] | None = None
        self._writer: threading.Thread | None = None
        # Guards building the index, and a write with its entry in the index: an entry
        # written while the index is built is either read from the segment or added after.
        self._lock = threading.Lock()
        #: key -> (segment number, offset of the value, its length); None until the first get.
        self._index: dict[str, tuple[int, int, int]] | None = None
        self._segments: list[str] = []  # paths, by segment number
        self._numbers: dict[str, int] = {}  # and numbers, by path
        self._old_folders: frozenset[str] = frozenset()  # the earlier layout's <key[:2]>/
        self._out_number = -1  # this object's segment, once made
        self._out_size = 0
        self._handles = _Handles()
        weakref.finalize(self, self._handles.close)

    @staticmethod
    def key(parts: Sequence[Any]) -> str:
        """The hex digest naming ``parts`` (JSON values; sorted keys, compact)."""
        text = json.dumps([FORMAT, *parts], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _path(self, key: str) -> Path:
        """Where the earlier layout kept ``key`` (read, never written)."""
        return self.folder / key[:2] / f"{key}.json"

    # -- reading ----------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The answer kept under ``key``, or None."""
        index = self._index if self._index is not None else self._build()
        where = index.get(key)
        value = self._read(where) if where is not None else self._read_old(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        return value

    def _build(self) -> dict[str, tuple[int, int, int]]:
        with self._lock:
            if self._index is None:
                self._index = self._scan()
            return self._index

    def _scan(self) -> dict[str, tuple[int, int, int]]:
        """Where each key's latest value lies, over every segment in the folder."""
        index: dict[str, tuple[int, int, int]] = {}
        names: list[str] = []
        old: set[str] = set()
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".log"):
                        names.append(entry.name)
                    elif _OLD_FOLDER.fullmatch(entry.name):
                        old.add(entry.name)
        except OSError:
            pass  # no folder yet, or not a folder: nothing kept
        self._old_folders = frozenset(old)
        for name in sorted(names):  # oldest first: the names start with the time made
            path = str(self.folder / name)
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            number = self._numbers.get(path)
            if number is None:
                number = self._numbers[path] = len(self._segments)
                self._segments.append(path)
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                if end - start > _HEAD_LEN and _HEAD.match(data, start):
                    index[data[start:start + 64].decode("ascii")] = (
                        number, start + _HEAD_LEN, end - start - _HEAD_LEN)
                start = end + 1
            # Past the last newline is a line cut short: never read.
        return index

    def _read(self, where: tuple[int, int, int]) -> dict[str, Any] | None:
        number, offset, length = where
        try:
            fd = self._handles.readers.get(number)
            if fd is None:
                fd = os.open(self._segments[number], os.O_RDONLY | _CLOEXEC)
                if self._handles.readers.setdefault(number, fd) != fd:
                    os.close(fd)  # another thread opened it first
                    fd = self._handles.readers[number]
            raw = os.pread(fd, length, offset)
            if len(raw) != length:
                return None
            value = json.loads(raw.decode("utf-8", "surrogatepass"))
        except (OSError, ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    def _read_old(self, key: str) -> dict[str, Any] | None:
        """``key`` in the earlier layout (one file per answer), if that folder was there."""
        if key[:2] not in self._old_folders:
            return None
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or data.get("key") != key \
                or not isinstance(data.get("value"), dict):
            return None
        value: dict[str, Any] = data["value"]
        return value

    # -- writing ----------------------------------------------------------------------

    def put_later(self, key: str, value: Mapping[str, Any]) -> None:
        """``put``, by a thread of the cache's own: the caller's loop does not wait on the disk.

        ``flush`` (or ``close``) waits for what was handed over.
        """
        if self._later is None:
            self._later = queue.SimpleQueue()
            self._writer = threading.Thread(target=self._write_later, name="assay-cache",
                                            daemon=True)
            self._writer.start()
        self._later.put((key, value))

    def _write_later(self) -> None:
        assert self._later is not None
        while (item := self._later.get()) is not None:
            self.put(*item)

    def flush(self) -> None:
        """Wait until every entry handed to ``put_later`` is written (or dropped)."""
        if self._later is not None and self._writer is not None:
            self._later.put(None)
            self._writer.join()
            self._later = self._writer = None

    def close(self) -> None:
        """``flush``, then close the files held open. A later ``put`` starts a new segment."""
        self.flush()
        with self._lock:
            self._handles.close()
            self._out_number = -1
            self._out_size = 0

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Keep ``value`` under ``key`` (quietly nothing if it cannot be written)."""
        try:
            if not _KEY.fullmatch(key):
                return  # not a key of ours: its line could never be found
            text = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False)
            line = f"{key} {text}\n".encode("utf-8", "surrogatepass")
            with self._lock:
                if self._handles.out is None:
                    self._open_segment()
                assert self._handles.out is not None
                offset = self._out_size
                try:
                    written = os.write(self._handles.out, line)
                except OSError:
                    written = -1
                if written != len(line):
                    # Perhaps half a line: nothing is appended after it (it stays the
                    # segment's last, cut short, never read); the next put starts anew.
                    self._drop_segment()
                    return
                self._out_size += written
                self.writes += 1
                if self._index is not None:
                    self._index[key] = (self._out_number, offset + _HEAD_LEN,
                                        len(line) - _HEAD_LEN - 1)
        except (OSError, TypeError, ValueError, RecursionError):
            return  # unwritable here, or not JSON: a miss next time, never a stopped run

    def _open_segment(self) -> None:
        """Make this object's segment (under the lock); OSError if it cannot be made."""
        self.folder.mkdir(parents=True, exist_ok=True)
        now = time.time_ns()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000))
        name = f"{stamp}.{now // 1000 % 1_000_000:06d}Z-{os.getpid()}-{secrets.token_hex(4)}.log"
        path = str(self.folder / name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _CLOEXEC, 0o600)
        self._handles.out = fd
        self._out_number = len(self._segments)
        self._out_size = 0
        self._numbers[path] = len(self._segments)
        self._segments.append(path)

    def _drop_segment(self) -> None:
        fd, self._handles.out = self._handles.out, None
        self._out_number = -1
        self._out_size = 0
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

"""A cache of model calls on disk: one JSON file per answer, named by the digest of its key.

Two caches use it, kept apart (SPEC §9): the agent's model calls
(``.assay/cache/agent``, opt-in) and the judges' (``.assay/cache/judge``).
A key is a list of JSON values — for both, the case, the trial index, the
model and the digest of the prompt: the trial index is in the key so that
trial 2 of a case is never served trial 1's answer, which would hide
exactly the variance several trials are run to see.

The folder is ``ASSAY_CACHE_DIR`` when set, else ``.assay/cache`` in the
working folder. A read that fails (missing, unreadable, not JSON, another
key behind the same file) is a miss; a write that fails is dropped: a cache
never stops a run. Each file is written whole to a temporary name and moved
into place, so a racing reader sees the old answer or the new one, never
half of one. What is kept may be a hidden case's (a judge's answer quotes
it): the folder sits beside the store, which holds the same content, and is
never shown anywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENV_FOLDER = "ASSAY_CACHE_DIR"
FORMAT = "assay.call-cache/1"


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """Where caches live: ``ASSAY_CACHE_DIR`` or ``.assay/cache``."""
    given = (os.environ if env is None else env).get(ENV_FOLDER)
    return Path(given) if given else Path(".assay") / "cache"


class CallCache:
    """Answers by key, under one folder (``agent``, ``judge``) of the cache root.

    ``hits``, ``misses`` and ``writes`` count what happened (benches and tests read them).
    """

    def __init__(self, kind: str, root: Path | None = None) -> None:
        self.kind = kind
        self.folder = (root if root is not None else cache_root()) / kind
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._later: queue.SimpleQueue[tuple[str, Mapping[str, Any]] | None] | None = None
        self._writer: threading.Thread | None = None

    @staticmethod
    def key(parts: Sequence[Any]) -> str:
        """The hex digest naming ``parts`` (JSON values; sorted keys, compact)."""
        text = json.dumps([FORMAT, *parts], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The answer kept under ``key``, or None."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.misses += 1
            return None
        if not isinstance(data, dict) or data.get("key") != key \
                or not isinstance(data.get("value"), dict):
            self.misses += 1
            return None
        self.hits += 1
        value: dict[str, Any] = data["value"]
        return value

    def put_later(self, key: str, value: Mapping[str, Any]) -> None:
        """``put``, by a thread of the cache's own: the caller's loop does not wait on the disk.

        Creating a file and moving it into place costs about a millisecond of
        system time here, for each entry: on the battery's event loop, a
        thousand judged trials spent more time keeping answers than asking
        for them. ``flush`` waits for what was handed over.
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

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Keep ``value`` under ``key`` (quietly nothing if it cannot be written)."""
        try:
            text = json.dumps({"key": key, "value": dict(value)}, ensure_ascii=False,
                              separators=(",", ":"), allow_nan=False)
            target = self._path(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".entry-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
                    fh.write(text)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self.writes += 1
        except (OSError, TypeError, ValueError, RecursionError):
            return  # unwritable here, or not JSON: a miss next time, never a stopped run

"""The writer process: the store's work for ``assay run``, on the machine's other core.

``start_writer`` forks a child before the suites are loaded; the child
imports the database libraries, opens (and migrates) the store and loads the
signing key while the parent parses suites, then serves the recorder's
calls over a pipe: ``register`` and ``seal`` are answered, trial batches are
not (the battery does not wait for them). Each call is one transaction of
``store.runs.record``. The parent imports none of this machinery's libraries.

- A write that fails is reported on the parent's next call (``StoreError``,
  exit 3, naming the run, never row values); the child then refuses the rest.
- The child ignores Ctrl-C: the parent decides, and still seals with what
  finished.
- If the parent dies (``kill -9``), the child still commits every batch it
  received, then sees the pipe close and exits, leaving the run open.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import AssayError, HarnessFailure, UsageError

if TYPE_CHECKING:
    from .trials import Holder, TrialRecord


class WriterError(HarnessFailure):
    """The writer process failed or went away (exit 3)."""


def _rebuild(code: int, message: str) -> AssayError:
    return UsageError(message) if code == UsageError.exit_code else WriterError(message)


def fork_available() -> bool:
    """Whether this platform can fork (the writer needs it; elsewhere recording is in-process)."""
    return "fork" in multiprocessing.get_all_start_methods()


def start_writer(url: str | None) -> ProcessSink:
    """Fork the writer for the store at ``url`` (None: the default store)."""
    if not url:
        # The default store's folder is made here, before the fork, as open_store
        # would: the suites load meanwhile and keep their caches only where
        # ``.assay/`` is, so a first run in a new folder keeps them too instead
        # of racing the writer for it. A folder that cannot be made is the writer's to
        # report, as it always was (``open_store``).
        with contextlib.suppress(OSError):
            Path(".assay").mkdir(exist_ok=True)
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(child, parent, url), name="assay-writer",
                              daemon=True)
    process.start()
    child.close()
    return ProcessSink(process, parent)


class ProcessSink:
    """The parent's end: a ``recorder.Sink`` whose transactions run in the writer process."""

    def __init__(self, process: Any, connection: Connection) -> None:
        self.process = process
        self.connection = connection
        self.closed = False
        #: Batches for the sending thread, in order; made at the first one.
        self._outbox: _Outbox | None = None
        self._sender: threading.Thread | None = None
        #: Why the sending thread stopped sending (the writer went away), raised on the
        #: battery's next call.
        self._lost: AssayError | None = None

    def ready(self) -> None:
        """Wait until the store is open and migrated: a run that cannot be recorded won't start."""
        self._ask(("ready",))

    def register(self, row: dict[str, Any], content: bytes) -> Holder | None:
        """See ``run_record.register_run``."""
        holder: Holder | None = self._ask(("register", row, content))
        return holder

    def write(self, run_id: str, records: list[TrialRecord]) -> None:
        """See ``run_record.write_batch``; not answered, so a failure shows on the next call.

        Sent by a thread of its own: a send waits while the writer is still busy with the
        batch before (the pipe holds a few hundred kilobytes), and the battery should not
        wait with it. Batches can then be small, and the writer works while the battery
        runs instead of at the seal.
        """
        self._failed()
        # As plain tuples: a named tuple is pickled by a call of its class, seven times
        # the cost of its values (1.6 against 0.24 µs a trial); the writer names them again.
        message = ("write", run_id, list(map(tuple, records)))
        if self._outbox is None:  # the sending thread starts with the first batch
            self._outbox = _Outbox()
            self._sender = threading.Thread(target=self._send_all, args=(self._outbox,),
                                            name="assay-record-sender", daemon=True)
            self._sender.start()
        self._outbox.put(message)

    def seal(self, run_id: str, columns: dict[str, Any], content: bytes,
             queue: Sequence[dict[str, Any]] = ()) -> tuple[int, str]:
        """See ``run_record.seal_run``."""
        index, sealed_hash = self._ask(("seal", run_id, columns, content, list(queue)))
        return int(index), str(sealed_hash)

    def close(self) -> None:
        """Wait for every batch to be written (``assay run`` keeps the writer for its next run)."""
        self._ask(("sync",))

    def stop(self) -> None:
        """End the writer process once everything it was given is written."""
        if self.closed:
            return
        self.closed = True
        try:
            self._ask(("stop",))
        finally:
            self.connection.close()
            _join_later(self.process)

    def _send(self, message: tuple[Any, ...]) -> None:
        self._drain()
        try:
            self.connection.send(message)
        except (OSError, EOFError):
            raise WriterError("the store's writer process went away") from None

    def _send_all(self, outbox: _Outbox) -> None:
        """The sending thread: each batch in order, until the outbox is closed (or the
        writer is gone: what is left is dropped, and the next call says so)."""
        while (message := outbox.get()) is not None:
            if self._lost is not None:
                continue
            try:
                self.connection.send(message)
            except BaseException:  # noqa: BLE001 - kept for the battery's next call
                self._lost = WriterError("the store's writer process went away")

    def _drain(self) -> None:
        """Every batch handed to the sending thread is sent (a call's message goes after
        them), or the writer went away."""
        if self._sender is not None and self._outbox is not None:
            self._outbox.close()
            self._sender.join()
            self._outbox = self._sender = None
        self._raise_lost()

    def _raise_lost(self) -> None:
        if self._lost is not None:
            raise self._lost

    def _failed(self) -> None:
        """Raise a failure the writer reported about an unanswered batch."""
        self._raise_lost()
        try:
            while self.connection.poll():
                self._reply(self.connection.recv())
        except (OSError, EOFError):
            raise WriterError("the store's writer process went away") from None

    def _ask(self, message: tuple[Any, ...]) -> Any:
        self._send(message)
        try:
            while True:
                reply = self._reply(self.connection.recv())
                if reply is not _NOTHING:
                    return reply
        except (OSError, EOFError):
            raise WriterError("the store's writer process went away") from None

    @staticmethod
    def _reply(message: tuple[Any, ...]) -> Any:
        if message[0] == "error":
            raise _rebuild(message[1], message[2])
        if message[0] == "done":
            return message[1]
        return _NOTHING


_NOTHING = object()

#: The most trials waiting for the sending thread, and in one batch of those that queued
#: up behind a busy writer: the recorder's own batch, so a battery holds no more of
#: them than when it sent each batch itself.
_QUEUED = 1000


class _Outbox:
    """Batches waiting for the sending thread, those of one run that queued up behind a busy
    writer joined into one.

    A batch costs the writer a transaction and a look at the ledger whatever its
    size: a writer that falls behind gets larger batches and catches up, one that
    keeps up gets them small and soon. ``put`` waits while ``_QUEUED`` trials are
    waiting already (the writer is a whole batch behind): the battery then waits
    for the writer, as it did when it sent each batch itself.
    """

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._waiting: collections.deque[tuple[Any, ...]] = collections.deque()
        self._trials = 0
        self._closed = False

    def put(self, message: tuple[Any, ...]) -> None:
        """Queue a batch (``("write", run_id, records)``), joined to the last if it can be."""
        records = message[2]
        with self._ready:
            while self._trials >= _QUEUED and self._waiting:
                self._ready.wait()
            last = self._waiting[-1] if self._waiting else None
            if last is not None and last[1] == message[1] \
                    and len(last[2]) + len(records) <= _QUEUED:
                last[2].extend(records)  # a list ``ProcessSink.write`` made for the outbox
            else:
                self._waiting.append(message)
            self._trials += len(records)
            self._ready.notify_all()

    def get(self) -> tuple[Any, ...] | None:
        """The oldest batch, once there is one; None once closed and empty."""
        with self._ready:
            while not self._waiting and not self._closed:
                self._ready.wait()
            if not self._waiting:
                return None
            message = self._waiting.popleft()
            self._trials -= len(message[2])
            self._ready.notify_all()
            return message

    def close(self) -> None:
        """No more batches: ``get`` gives None once the rest is taken."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()


#: Writers told to stop (everything they were given is committed) and not waited for yet.
_STOPPING: list[Any] = []
#: Whether ``_join_stopped`` is registered to run at exit (once).
_exit_join = False


def _join_later(process: Any) -> None:
    """Wait for a stopped writer's exit at this process's exit, not now.

    Once the writer has answered ``stop``, everything is committed; what it does
    then is close the store, where SQLite moves the rest of its log into the
    database (a seal's report: a few megabytes at 10,000 cases). The reports are
    written meanwhile. Registered after multiprocessing's own exit handler, which
    would terminate a daemon child still running, so this one runs first.
    """
    global _exit_join
    if not _exit_join:
        atexit.register(_join_stopped)
        _exit_join = True
    # Those that ended are let go (``exitcode`` reaps them): a long-lived process that
    # runs many batteries (the workbench, a test session) keeps no list of them.
    _STOPPING[:] = [waiting for waiting in _STOPPING if waiting.exitcode is None]
    _STOPPING.append(process)


def _join_stopped() -> None:
    while _STOPPING:
        _STOPPING.pop().join(timeout=60)


def _serve(connection: Connection, parents_end: Connection,
           url: str | None) -> None:  # pragma: no cover - child
    """The writer's loop (in the child): one transaction per message, in order."""
    # The fork copied the parent's end of the pipe too: closed, so that the
    # parent's death (its end closing) reaches this end as end-of-file.
    parents_end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    failure: AssayError | None = None
    store = None
    known = None  # the ledger's compact range as the last batch left it (heads.Frontier)
    following = True  # until a batch finds the ledger does not hold (the seal says so then)
    try:
        from ..database import open_store
        from ..ledger.keys import signing_key
        from .record import register_run, seal_run, write_batch
        from .trials import TrialRecord

        key = signing_key(url)
        store = open_store(url)
        store.settle()  # commits leave the log to idle moments from the first batch on
    except AssayError as error:
        failure = error
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            break  # the parent is gone: what was received is written; the run stays open
        kind = message[0]
        if failure is not None:
            if kind != "write":
                connection.send(("error", failure.exit_code, str(failure)))
            if kind == "stop":
                break
            continue
        try:
            if kind == "write":
                # With a key, a head is signed at the seal: follow the ledger meanwhile.
                records = [TrialRecord._make(values) for values in message[2]]
                known = write_batch(store, message[1], records,  # type: ignore[arg-type]
                                    follow=following and key is not None, known=known)
                following = known is not None
                if not connection.poll():  # idle: the log is moved now, not in a later commit
                    store.settle()  # type: ignore[union-attr]
            elif kind == "register":
                holder = register_run(store, message[1], message[2])  # type: ignore[arg-type]
                connection.send(("done", holder))
            elif kind == "seal":
                _, run_id, columns, content, queue = message
                connection.send(("done", seal_run(store, key, run_id, columns, content,  # type: ignore[arg-type]
                                                  known=known, queue=queue)))
            else:  # ready, sync, stop: everything before them is written
                connection.send(("done", None))
                if kind == "stop":
                    break
        except AssayError as error:
            failure = error
            connection.send(("error", error.exit_code, str(error)))
        except Exception as error:  # a bug, not the store: still reported, never raised here
            failure = WriterError(f"the store's writer failed ({type(error).__name__})")
            connection.send(("error", failure.exit_code, str(failure)))
    if store is not None:
        store.close()
    connection.close()

"""Keep an in-process agent's prints out of assay's own output.

A Python agent runs inside assay's process; what it prints would land in the
terminal or CI log, where a hidden case's content must never appear. While a
battery runs, ``sys.stdout``/``sys.stderr`` are replaced by a switch that
sends writes made inside a trial to that trial's buffer (kept in its trace)
and everything else to the real stream.
"""

from __future__ import annotations

import contextvars
import io
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

sink: contextvars.ContextVar[io.StringIO | None] = contextvars.ContextVar(
    "assay_trial_output", default=None
)


class _Switch(io.TextIOBase):
    def __init__(self, real: TextIO) -> None:
        self.real = real

    def write(self, text: str) -> int:
        buffer = sink.get()
        if buffer is not None:
            return buffer.write(text)
        if threading.current_thread() is not threading.main_thread():
            # A thread the agent started itself does not inherit its trial's
            # buffer; what it prints may quote a hidden case, so it is dropped.
            return len(text)
        return self.real.write(text)

    def flush(self) -> None:
        if sink.get() is None:
            self.real.flush()

    def writable(self) -> bool:
        return True

    @property
    def buffer(self) -> _BinarySwitch:
        """``sys.stdout.buffer``: bytes an agent writes there are captured like its text."""
        return _BinarySwitch(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class _BinarySwitch(io.RawIOBase):
    """The byte side of a switch: inside a trial, bytes go to the trial's buffer as text."""

    def __init__(self, text: _Switch) -> None:
        self.text = text

    def write(self, data: Any) -> int:
        data = bytes(data)
        if sink.get() is None and threading.current_thread() is threading.main_thread():
            real = getattr(self.text.real, "buffer", None)
            if real is not None:
                return int(real.write(data))
        self.text.write(data.decode("utf-8", errors="replace"))
        return len(data)

    def flush(self) -> None:
        self.text.flush()

    def writable(self) -> bool:
        return True


_depth = 0


@contextmanager
def captured() -> Iterator[None]:
    """Route trial prints to their buffers for the duration of the block."""
    global _depth
    if _depth == 0:
        sys.stdout = _Switch(sys.stdout)
        sys.stderr = _Switch(sys.stderr)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            if isinstance(sys.stdout, _Switch):
                sys.stdout = sys.stdout.real
            if isinstance(sys.stderr, _Switch):
                sys.stderr = sys.stderr.real


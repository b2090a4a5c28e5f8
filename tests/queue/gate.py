"""A gate the test holds agents at: each agent call connects and waits for one byte.

While the gate is closed, calls pile up connected (the test counts them, so
it knows trials are in flight inside a worker); opening it lets every
waiting call and every later one through. It also counts every call made.
"""

from __future__ import annotations

import socket
import threading

AGENT = """
import os, socket

def agent(input):
    with socket.create_connection(("127.0.0.1", int(os.environ["AGENT_GATE"]))) as gate:
        gate.sendall(input.encode() + b"\\n")
        gate.recv(1)  # until the test lets the trial go on
    if input == "poison":
        os._exit(9)  # takes its worker down with it, every time
    return {"echo": input}
"""


class Gate:
    """The test's end: a listening socket on loopback."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.opened = threading.Event()
        self.lock = threading.Lock()
        self.held: list[socket.socket] = []
        self.calls: list[str] = []
        self.changed = threading.Condition(self.lock)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        name = b""
        while not name.endswith(b"\n"):
            part = connection.recv(100)
            if not part:
                connection.close()
                return
            name += part
        with self.lock:
            self.calls.append(name.decode().strip())
            if not self.opened.is_set():
                self.held.append(connection)
                self.changed.notify_all()
                return
        self._let_go(connection)

    @staticmethod
    def _let_go(connection: socket.socket) -> None:
        try:
            connection.sendall(b"x")
        except OSError:
            pass  # its worker is gone
        connection.close()

    def waiting(self, count: int, timeout: float = 60.0) -> None:
        """Until ``count`` calls are held at the closed gate."""
        with self.lock:
            if not self.changed.wait_for(lambda: len(self.held) >= count, timeout):
                raise AssertionError(f"{len(self.held)} call(s) reached the gate, not {count}")

    def open(self) -> None:
        """Let every held call and every later one through."""
        with self.lock:
            self.opened.set()
            held, self.held = self.held, []
        for connection in held:
            self._let_go(connection)

    def close(self) -> None:
        self.server.close()

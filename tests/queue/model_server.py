"""A loopback OpenAI-compatible model that counts the requests it serves at once.

Each chat completion takes ``delay_s`` and answers ``ok: <the user's message>``;
``peak`` is the most requests it ever had in hand together, ``calls`` how
many it answered. In-process (a thread): the test reads both directly.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ModelServer:
    def __init__(self, delay_s: float = 0.1) -> None:
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.calls = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.now += 1
                    owner.peak = max(owner.peak, owner.now)
                try:
                    time.sleep(owner.delay_s)
                finally:
                    with owner.lock:
                        owner.now -= 1
                        owner.calls += 1
                said = body["messages"][-1]["content"]
                reply = json.dumps({
                    "id": "c1", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "m"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": f"ok: {said}"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name; the models list
                reply = json.dumps({"object": "list", "data": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ModelServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

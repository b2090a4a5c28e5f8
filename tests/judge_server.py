"""A loopback OpenAI-compatible judge whose answers follow markers in the agent's answer.

Used in-process (``JudgeServer`` as a context manager) and as a separate
process (``python tests/judge_server.py [--delay-ms N]``, which prints its
base URL on the first line) by the battery, CLI and bench tests. The reply
to a chat completion is chosen by the first marker found in the prompt:

- ``JUDGE:pass`` / ``JUDGE:fail``: that verdict and a justification;
- ``JUDGE:score=N``: ``N`` as a rubric score;
- ``JUDGE:garbage``: an answer out of form (``Verdict: maybe``);
- ``JUDGE:refuse``: a refusal (the message's ``refusal`` field, no content);
- ``JUDGE:slow``: waits ``slow_s`` (default 30 s) before answering ``pass``;
- ``JUDGE:500``: an HTTP 500 whose body echoes the prompt;
- ``JUDGE:flip``: ``pass`` and ``fail`` in turn (an inconsistent judge);
- ``JUDGE:A`` / ``JUDGE:B`` / ``JUDGE:tie``: pairwise choices, by the text
  shown first or second: a prompt holding ``JUDGE:prefer=X`` answers ``A``
  when the first output shown holds ``X``, ``B`` when the second does, ``tie``
  when neither does; its justification quotes both outputs as shown.

Anything else gets ``pass``. Every answer reports usage (100 prompt, 5
completion tokens) and the model ``judge-model-2025``. ``GET /calls`` answers
the number of completions asked so far.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SERVED_MODEL = "judge-model-2025"
_MARK = re.compile(r"JUDGE:(pass|fail|score=\d+(?:\.\d+)?|garbage|refuse|slow|500|flip|A|B|tie"
                   r"|prefer=\S+)")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client gone at its timeout is expected here


class JudgeServer:
    """The judge on 127.0.0.1, a free port; ``calls`` counts completions, ``prompts`` keeps them."""

    def __init__(self, *, delay_s: float = 0.0, slow_s: float = 30.0) -> None:
        self.delay_s = delay_s
        self.slow_s = slow_s
        self.calls = 0
        self.prompts: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._flip = 0
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> JudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def answer(self, prompt: str) -> tuple[int, dict[str, Any] | bytes]:
        """The status and JSON body (or raw bytes) the judge answers ``prompt`` with."""
        marks = _MARK.findall(prompt)
        mark = marks[0] if marks else "pass"
        text: str | None
        refusal = None
        if mark in ("pass", "fail"):
            text = f"{mark}\nThe answer was read against the criteria."
        elif mark.startswith("score="):
            text = f"{mark.removeprefix('score=')}\nScored against the criterion."
        elif mark == "garbage":
            text = "Verdict: maybe\nhard to say"
        elif mark == "refuse":
            text, refusal = None, "I can't help with grading this."
        elif mark == "slow":
            self._release.wait(self.slow_s)
            text = "pass\nslowly"
        elif mark == "500":
            return 500, json.dumps({"error": {"message": f"failed on: {prompt}"}}).encode()
        elif mark == "flip":
            with self._lock:
                self._flip += 1
                text = "pass\nthis time" if self._flip % 2 else "fail\nthis time"
        elif mark.startswith("prefer="):
            choice = self._prefer(prompt, mark.removeprefix("prefer="))
            # The justification quotes what it read, as real judges do: a hidden case's
            # output then reaches the raw answer, which must stay off every surface.
            text = f"{choice}\nby the marker, having read: {self._shown(prompt)}"
        else:  # A, B, tie
            text = f"{mark}\nas marked"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if refusal is not None:
            message["refusal"] = refusal
        return 200, {
            "id": "c1", "object": "chat.completion", "created": 0, "model": SERVED_MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}}

    @staticmethod
    def _shown(prompt: str) -> str:
        """The two outputs as shown (between the first marker and the end), on one line."""
        shown = prompt.partition("----- OUTPUT A -----")[2].partition("----- END OF OUTPUTS")[0]
        return " ".join(shown.split())[:400]

    @staticmethod
    def _prefer(prompt: str, wanted: str) -> str:
        first, _, second = prompt.partition("----- OUTPUT B -----")
        if wanted in second and wanted not in first.split("----- OUTPUT A -----")[-1]:
            return "B"
        if wanted in first.split("----- OUTPUT A -----")[-1]:
            return "A"
        return "tie"


def _handler(judge: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body go out in two writes: with Nagle's algorithm the
        # second waits for the client's delayed ACK of the first, 40 ms on Linux.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._send(200, json.dumps({"calls": judge.calls}).encode())

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
                prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
            except (ValueError, KeyError, TypeError, AttributeError):
                return self._send(400, b'{"error": {"message": "bad request"}}')
            with judge._lock:
                judge.calls += 1
                judge.prompts.append(prompt)
                judge.bodies.append(body)
                judge.headers.append({k.lower(): v for k, v in self.headers.items()})
            if judge.delay_s:
                time.sleep(judge.delay_s)
            status, payload = judge.answer(prompt)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self._send(status, data)

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


def main() -> None:
    """Serve until killed; the first line printed is the base URL."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    server = JudgeServer(delay_s=args.delay_ms / 1000)
    with server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())

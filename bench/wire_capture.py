"""What in-process wire capture adds to an agent's model call (issue 30, SPEC §15).

    .venv/bin/python bench/wire_capture.py [--calls 2000]

The agent is the real ``openai`` SDK making chat completions one after
another, JSON and streamed (``stream`` true, seven server-sent events read
to ``[DONE]``), against two models:

- ``tests/wire_server.py`` on loopback (an aiohttp server in a process of
  its own), with ``OpenAI`` (httpx2, sync) and ``AsyncOpenAI``;
- an in-process transport (``httpx2.MockTransport``) giving the same
  answers with no network: what is left is the SDK's own work, so the
  hook's cost stands out of the network's noise.

Each call is timed three ways, with the same client:

- **bare**: httpx2 as shipped (the hooks taken off around the call);
- **hooked, no trial**: ``install()`` done, no recorder in the context —
  what assay's own calls and an agent's calls outside a trial pay;
- **recorded**: the call is a trial of its own (``recording()``), its
  exchange kept and checked.

The modes take turns call by call, so a drift in the machine's load falls on
all three alike. Printed per mode: the median and p99 of a call's wall and
the median's excess over bare.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import httpx2  # noqa: E402
import openai  # noqa: E402

from assay.targets.wire.capture import install, recording  # noqa: E402

MODES = ("bare", "hooked, no trial", "recorded")
MESSAGES = [{"role": "user", "content": "one two three four five"}]


@contextmanager
def unhooked() -> Iterator[None]:
    """httpx2 as shipped, for one block: the hooks' originals put back, then the hooks."""
    hooks = {cls: cls.__dict__["_send_single_request"]
             for cls in (httpx2.Client, httpx2.AsyncClient)}
    for cls, hook in hooks.items():
        cls._send_single_request = hook.__wrapped__  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, hook in hooks.items():
            cls._send_single_request = hook  # type: ignore[method-assign]


def mode_context(mode: str) -> Any:
    """Hooks off for ``bare``; for ``recorded`` each call is a trial of its own (below)."""
    return unhooked() if mode == "bare" else nullcontext()


def sync_call(client: openai.OpenAI, mode: str, stream: bool) -> float:
    with mode_context(mode), (recording() if mode == "recorded" else nullcontext()) as recorder:
        start = time.perf_counter()
        if stream:
            for _chunk in client.chat.completions.create(model="m", messages=MESSAGES,
                                                         stream=True):
                pass
        else:
            client.chat.completions.create(model="m", messages=MESSAGES)
        wall = time.perf_counter() - start
    if recorder is not None:
        (exchange,) = recorder.exchanges()
        assert exchange.status == 200 and exchange.response_body, exchange
    return wall


async def async_call(client: openai.AsyncOpenAI, mode: str, stream: bool) -> float:
    with mode_context(mode), (recording() if mode == "recorded" else nullcontext()) as recorder:
        start = time.perf_counter()
        if stream:
            answer = await client.chat.completions.create(model="m", messages=MESSAGES,
                                                          stream=True)
            async for _chunk in answer:
                pass
        else:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        wall = time.perf_counter() - start
    if recorder is not None:
        (exchange,) = recorder.exchanges()
        assert exchange.status == 200 and exchange.response_body, exchange
    return wall


def p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def report(title: str, walls: dict[str, list[float]]) -> None:
    base = statistics.median(walls["bare"])
    print(f"\n{title}")
    print(f"  {'mode':<18} {'median ms':>10} {'p99 ms':>9} {'median over bare':>17}")
    for mode in MODES:
        median = statistics.median(walls[mode])
        print(f"  {mode:<18} {median * 1e3:>10.3f} {p99(walls[mode]) * 1e3:>9.3f} "
              f"{(median - base) * 1e3:>+14.3f} ms")


def sync_series(client: openai.OpenAI, calls: int, label: str) -> None:
    for stream in (False, True):
        for mode in MODES:  # warm: connections, imports, code paths
            for _ in range(30):
                sync_call(client, mode, stream)
        walls: dict[str, list[float]] = {mode: [] for mode in MODES}
        for i in range(calls):
            for j in range(len(MODES)):  # the modes take turns, call by call
                mode = MODES[(i + j) % len(MODES)]
                walls[mode].append(sync_call(client, mode, stream))
        report(f"{label}, {'streamed (SSE)' if stream else 'JSON'}: {calls} calls per mode",
               walls)


async def async_series(client: openai.AsyncOpenAI, calls: int, label: str) -> None:
    for stream in (False, True):
        for mode in MODES:
            for _ in range(30):
                await async_call(client, mode, stream)
        walls: dict[str, list[float]] = {mode: [] for mode in MODES}
        for i in range(calls):
            for j in range(len(MODES)):
                mode = MODES[(i + j) % len(MODES)]
                walls[mode].append(await async_call(client, mode, stream))
        report(f"{label}, {'streamed (SSE)' if stream else 'JSON'}: {calls} calls per mode",
               walls)


def in_process_answers() -> Any:
    """The same answers as the loopback server's, from an in-process transport: no network."""
    text = "echo: one two three four five"
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"content": word + " "}}]}
              for word in text.split()]
    events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    sse = [f"data: {json.dumps(event)}\n\n".encode() for event in events] + [b"data: [DONE]\n\n"]
    whole = json.dumps({
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}).encode()

    def answer(request: httpx2.Request) -> httpx2.Response:
        if b'"stream":true' in request.content:
            return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                                   stream=_Chunks(sse))
        return httpx2.Response(200, headers={"content-type": "application/json"},
                               content=whole)

    return answer


class _Chunks(httpx2.SyncByteStream):
    """A body handed over event by event, as a network stream hands it."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    install()
    print(f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, openai {openai.__version__}, httpx2 {httpx2.__version__}")
    # The server in a process of its own: it does not compete for this one's GIL.
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "wire_server.py")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-bench", max_retries=0)
        sync_series(client, args.calls, "OpenAI (sync), loopback server")

        async def measure_async() -> None:
            aclient = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-bench",
                                         max_retries=0)
            await async_series(aclient, args.calls, "AsyncOpenAI, loopback server")
            await aclient.close()

        asyncio.run(measure_async())
    finally:
        server.terminate()
        server.wait()
    local = openai.OpenAI(base_url="http://model.invalid/v1", api_key="sk-bench", max_retries=0,
                          http_client=httpx2.Client(transport=httpx2.MockTransport(
                              in_process_answers())))
    sync_series(local, args.calls, "OpenAI (sync), in-process transport (the hook's own cost)")


if __name__ == "__main__":
    main()

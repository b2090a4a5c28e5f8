"""Harness overhead per turn of a conversation (issue 31, SPEC §16).

    PYTHONPATH=src nice -n 5 .venv/bin/python bench/conversation_turns.py
        [--conversations 640] [--turns 10] [--concurrency 64] [--repeat 3]
        [--agents async,sync] [--no-store] [--profile FILE] [--json F]

The goal: "harness overhead per turn (everything except the agent's and the
simulator's own latency) ≤ 1 ms median with 64 conversations in flight,
measured with a zero-latency agent and simulator."

The conversations run through the real engine, in this process, as
``assay run`` runs them (``engine.runs.run_suites``: the battery, the
store's writer process, the seal, the judge cache on and filling). The agent
is a ``python:`` function handed the conversation so far that answers
``reply K`` at once — an ``async def`` (it runs on the event loop) and a
plain ``def`` (it runs in assay's agent threads) — and the user is, in turn:

- **scripted**: the case's ``turns:``, ``message 1`` … ``message T``;
- **simulated**: ``user: {instructions: TURNS=T}`` played by
  bench/_user_server.py, a loopback OpenAI-compatible server in a process of
  its own that answers at once (``message K``, then ``###STOP###``): T
  messages and one more call that ends the conversation, T + 1 calls each.

Each case checks ``{turn: T, contains: "reply T"}`` and ``settles: true``,
and every run is checked: every conversation passed, and a simulated run's
report counts T + 1 simulator calls a conversation, none from the cache.

Figures, per kind, the median of ``--repeat`` runs (kinds interleaved, so
that the shared machine's load falls on all alike):

1. **amortised**: (battery wall − time inside the agent − time inside the
   simulator server) / turns, the issue's formula. The battery's wall is
   from the engine's start of the battery to its end (target started, every
   trial run, graded and recorded, the simulator's client closed); the time
   inside the agent is what the agent measures of itself; the time inside
   the server is what the server measures of itself (a request read whole
   to its answer written; ``GET /stats``). With 64 conversations in flight
   the server's time overlaps assay's work, so the figure without it taken
   out — (wall − agent) / turns — is printed beside it: an upper bound.
2. **per turn** (one extra run per kind, instrumented, so the figure
   carries the instrumentation's own cost): the event loop's time is
   attributed to the turn it worked for — each step of the event loop's
   tasks is timed (``asyncio.Handle._run``) and charged to the turn its
   task was on, named by a context variable that the ``python:`` target's
   ``run`` (wrapped here) sets for the trial and an async agent sets for
   each turn. A turn's *own* time runs from the agent's call for it to its
   call for the next turn (or the end of the trial): taking the reply,
   asking the user, sending the next message. *All in*, a turn also carries
   its share of its trial's start and end (the first message, the trace,
   grading, recording: spread over its turns) and of what no task owns
   (socket callbacks, the agent threads' wake-ups: spread over all turns).
   Median and p99 of each. A sync agent's turns cannot be told apart from
   the loop (the agent runs in a thread): its per-turn figure is its
   conversation's time over its turns.

No peer was measured: none installed in this venv holds a conversation
(DeepEval's conversation simulator is not installed here, and nothing is
installed for a bench).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import cProfile
import datetime as dt
import importlib
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: The agent module (generated into the project): answers at once, timing itself.
AGENT_MODULE = '''\
"""The agent of bench/conversation_turns.py (generated): answers each turn at once."""

import contextvars
import time

#: What a step of the event loop is charged to: (case id, turn), when the bench instruments.
TURN = contextvars.ContextVar("bench_turn", default=None)
#: The bench's hook, called with (case id, turn) as each turn begins (None: not measuring).
HOOK = [None]
#: Seconds spent inside the agent, and calls.
SPENT = [0.0, 0]


async def talk(messages):
    began = time.perf_counter()
    turn = sum(1 for m in messages if m["role"] == "user")
    if HOOK[0] is not None:
        HOOK[0]((messages[0]["content"], turn))
    reply = "reply %d" % turn
    SPENT[0] += time.perf_counter() - began
    SPENT[1] += 1
    return reply


def talk_sync(messages):
    began = time.perf_counter()
    turn = sum(1 for m in messages if m["role"] == "user")
    reply = "reply %d" % turn
    SPENT[0] += time.perf_counter() - began
    SPENT[1] += 1
    return reply
'''

AGENT_NAME = "bench_turns_agent"
TARGETS = {"async": f"python:{AGENT_NAME}:talk", "sync": f"python:{AGENT_NAME}:talk_sync"}


class BenchError(RuntimeError):
    """A run that did not do what the bench asked of it."""


def write_project(root: Path, conversations: int, turns: int) -> None:
    """``root/scripted`` and ``root/simulated``, a suite each, and the agent beside them."""
    (root / f"{AGENT_NAME}.py").write_text(AGENT_MODULE)
    said = json.dumps([f"message {k}" for k in range(1, turns + 1)])
    expect = f'[{{turn: {turns}, contains: "reply {turns}"}}, {{settles: true}}]'
    for kind, head, user in (
            ("scripted", "", f"turns: {said}"),
            ("simulated", "user_model: openai:sim-user\n",
             f"user: {{instructions: 'TURNS={turns}', max_turns: {turns}}}")):
        folder = root / kind
        folder.mkdir()
        lines = [f"suite: bench/turns-{kind}@1", f"target: {TARGETS['async']}", head.rstrip(),
                 "cases:"]
        lines += [f"  - {{id: c{i}, input: c{i}, {user}, expect: {expect}}}"
                  for i in range(conversations)]
        (folder / "t.suite.yaml").write_text("\n".join(x for x in lines if x) + "\n")


class UserServer:
    """bench/_user_server.py in a process of its own."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(HERE / "_user_server.py")],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise BenchError("the simulated user's server did not start")

    def stats(self) -> tuple[int, float]:
        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/stats") as answer:
            data = json.loads(answer.read())
        return int(data["calls"]), float(data["busy_s"])

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class _Timing:
    """A ``Watcher`` that times the battery (from its start to its end) and shows nothing."""

    def __init__(self, clock: TurnClock | None = None) -> None:
        self.wall = 0.0
        self.clock = clock

    @contextlib.contextmanager
    def battery(self, label: str, total: int | None) -> Iterator[Callable[[str], None]]:
        began = time.perf_counter()
        if self.clock is not None:
            self.clock.begin()
        try:
            yield lambda outcome: None
        finally:
            self.wall = time.perf_counter() - began
            if self.clock is not None:
                self.clock.end()

    def notice(self, text: str) -> None:
        pass

    def registered(self, run_id: str) -> None:
        pass


class TurnClock:
    """Charges the event loop's time to the turn it worked for.

    Installed for the per-turn runs only. Each step of the loop
    (``Handle._run``) is timed; within a step the time is charged to the
    key its task is on, and a step that changes the key (the ``python:``
    target's ``run``, wrapped here, at a trial's start — turn 0 — and end —
    ``"end"``, which the battery's grading and recording then run under; the
    async agent at each turn) splits there: a conversation whose agent and
    user never wait runs many turns in one step. A step of no task (a
    socket's callback, the agent threads' wake-up) is ``"loose"``. Only the
    battery's time is charged (``active``, set by ``_Timing``): not the
    target's start before it nor the seal after it, which the amortised
    figure leaves out too.
    """

    def __init__(self, var: contextvars.ContextVar[Any], hook: list[Any]) -> None:
        self.var = var
        self.hook = hook
        self.spent: dict[Any, float] = {}
        self.active = [False]
        #: The key being charged, and since when.
        self.now: list[Any] = [None, 0.0]
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        from assay.targets.python import PythonTarget

        spent, var = self.spent, self.var
        handle_run = asyncio.events.Handle._run
        target_run = PythonTarget.run
        clock = time.perf_counter
        now, active = self.now, self.active

        def charge(key: Any) -> None:
            """From here on the time is ``key``'s; what went before, the last key's."""
            at = clock()
            last = now[0]
            spent[last] = spent.get(last, 0.0) + (at - now[1])
            now[0], now[1] = key, at

        def mark(key: Any) -> None:
            var.set(key)
            if active[0]:
                charge(key)

        def timed(handle: asyncio.Handle) -> None:
            if not active[0]:
                handle_run(handle)
                return
            # A task's step is charged to the key its task is on; any other step is loose.
            owner = getattr(handle._callback, "__self__", None)
            now[0] = handle._context.get(var) if isinstance(owner, asyncio.Task) else "loose"
            now[1] = clock()
            handle_run(handle)
            if active[0]:
                charge(None)

        async def run(target: Any, request: Any) -> Any:
            mark((request.case.id, 0))
            try:
                return await target_run(target, request)
            finally:
                mark((request.case.id, "end"))

        asyncio.events.Handle._run = timed
        PythonTarget.run = run
        self.hook[0] = mark

        def undo() -> None:
            asyncio.events.Handle._run = handle_run
            PythonTarget.run = target_run
            self.hook[0] = None

        self._undo.append(undo)

    def begin(self) -> None:
        """The battery starts: its time is charged from here (to no key until a task's)."""
        self.now[0], self.now[1] = None, time.perf_counter()
        self.active[0] = True

    def end(self) -> None:
        """The battery ended: what went since the last charge is no turn's."""
        at = time.perf_counter()
        self.spent[self.now[0]] = self.spent.get(self.now[0], 0.0) + (at - self.now[1])
        self.now[0], self.now[1] = None, at
        self.active[0] = False

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def per_turn(self, conversations: int, turns: int, by_turn: bool) -> dict[str, Any]:
        """Each turn's own and all-in seconds; what no turn owns, and the loop's busy total."""
        spent = dict(self.spent)
        loose = spent.pop("loose", 0.0) + spent.pop(None, 0.0)
        trials: dict[str, dict[Any, float]] = {}
        for key, seconds in spent.items():
            case, part = key
            trials.setdefault(case, {})[part] = seconds
        if len(trials) != conversations:
            raise BenchError(f"turns of {len(trials)} conversations timed, not {conversations}")
        share = loose / (conversations * turns)
        own: list[float] = []
        all_in: list[float] = []
        for parts in trials.values():
            ends = parts.get(0, 0.0) + parts.get("end", 0.0)
            if by_turn:
                mine = [parts.get(k, 0.0) for k in range(1, turns + 1)]
            else:  # the whole trial ran under turn 0: its time over its turns
                mine = [(parts.get(0, 0.0)) / turns] * turns
                ends = parts.get("end", 0.0)
            own += mine
            all_in += [m + ends / turns + share for m in mine]
        ends_total = sum(p.get(0, 0.0) + p.get("end", 0.0) for p in trials.values()) \
            if by_turn else sum(p.get("end", 0.0) for p in trials.values())
        return {"own": own, "all_in": all_in, "loose_s": loose, "ends_s": ends_total,
                "busy_s": loose + sum(spent.values())}


@dataclass
class Kind:
    """One kind of run: a user (scripted or simulated) and an agent (async or sync)."""

    user: str
    agent: str
    walls: list[float] = field(default_factory=list)
    agent_s: list[float] = field(default_factory=list)
    server_s: list[float] = field(default_factory=list)
    turn: dict[str, Any] | None = None
    turn_wall: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.user}, {self.agent} agent"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Bench:
    """The project, the server and what every run needs."""

    def __init__(self, root: Path, args: argparse.Namespace, server: UserServer) -> None:
        self.root = root
        self.args = args
        self.server = server
        self.count = 0
        sys.path.insert(0, str(root))
        self.agent = importlib.import_module(AGENT_NAME)

    def run(self, kind: Kind, clock: TurnClock | None = None) -> tuple[float, float, float]:
        """One checked run: the battery's wall, the agent's time, the server's time."""
        from assay.engine.runs import RunSettings, run_suites
        from assay.judging.panel import JudgeOptions
        from assay.suites import discover

        args = self.args
        self.count += 1
        work = self.root / f"run-{self.count}"
        work.mkdir()
        judges = JudgeOptions(base_url=self.server.url, cache=True, cache_root=work / "cache",
                              env={})
        settings = RunSettings(concurrency=args.concurrency, judges=judges)
        watcher = _Timing(clock)
        calls_before, busy_before = self.server.stats()
        self.agent.SPENT[:] = [0.0, 0]
        if clock is not None:
            clock.install()
        try:
            results = run_suites(lambda: discover([self.root / kind.user]), [TARGETS[kind.agent]],
                                 settings, db=None if args.no_store
                                 else f"sqlite:///{work / 'assay.db'}",
                                 store=not args.no_store, watcher=watcher)
        finally:
            if clock is not None:
                clock.uninstall()
        calls, busy = self.server.stats()
        self.check(kind, results, calls - calls_before)
        return watcher.wall, self.agent.SPENT[0], busy - busy_before

    def check(self, kind: Kind, results: list[Any], calls: int) -> None:
        n, turns = self.args.conversations, self.args.turns
        [result] = results
        if result.report is None:
            raise BenchError(f"{kind.name}: no report ({result.harness_failure})")
        counts = result.report.counts["public"]
        if (counts.total, counts.passed) != (n, n):
            raise BenchError(f"{kind.name}: {counts.passed} of {counts.total} passed, not {n}")
        if self.agent.SPENT[1] != n * turns:
            raise BenchError(f"{kind.name}: the agent answered {self.agent.SPENT[1]} turns, "
                             f"not {n * turns}")
        cost = result.report.cost
        want = n * (turns + 1) if kind.user == "simulated" else 0
        asked = cost.simulator_calls or 0
        if (asked, calls, cost.simulator_cached or 0) != (want, want, 0):
            raise BenchError(f"{kind.name}: {asked} simulator calls counted, {calls} served, "
                             f"{cost.simulator_cached} cached; {want} expected")
        if not self.args.no_store and not result.report.seal:
            raise BenchError(f"{kind.name}: the run was not sealed")


def machine() -> str:
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info
                    if line.startswith("model name")), "")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {len(os.sched_getaffinity(0))} "
            f"cores ({cpu or platform.machine()}); Python {platform.python_version()}; "
            f"load average {load}; nice {os.nice(0)}")


def profile(bench: Bench, kind: Kind, path: Path) -> None:
    """One extra run of ``kind`` under cProfile: the functions with the most own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        bench.run(kind)
    finally:
        profiler.disable()
    profiler.dump_stats(str(path))
    print(f"\nprofile of one {kind.name} run (raw: {path}), by own time:")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conversations", type=int, default=640)
    ap.add_argument("--turns", type=int, default=10, help="turns a conversation (default 10)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="runs per kind (median; default 3)")
    ap.add_argument("--agents", default="async,sync", help="async, sync or both (default)")
    ap.add_argument("--no-store", action="store_true", help="run as --no-store does")
    ap.add_argument("--profile", metavar="FILE", help="also profile one simulated run")
    ap.add_argument("--json", dest="json_out", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.conversations < 1 or args.turns < 1:
        ap.error("--repeat, --conversations and --turns are at least 1")
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    kinds = [Kind(user, agent) for agent in agents for user in ("scripted", "simulated")]
    n, turns = args.conversations, args.turns
    total = n * turns
    print(f"conversation turns: {n:,} conversations x {turns} turns, concurrency "
          f"{args.concurrency}, store {'off' if args.no_store else 'on'}")
    print(f"  machine: {machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="assay-bench-turns-") as tmp:
        root = Path(tmp)
        write_project(root, n, turns)
        server = UserServer()
        here = Path.cwd()
        os.chdir(root)  # the store's key and anything relative go to the scratch folder
        try:
            bench = Bench(root, args, server)
            print("... warm-up (untimed): one run of each kind", flush=True)
            for kind in kinds:
                bench.run(kind)
            for k in range(args.repeat):
                for kind in kinds:
                    print(f"... [{k + 1}/{args.repeat}] {kind.name}", flush=True)
                    wall, agent_s, server_s = bench.run(kind)
                    kind.walls.append(wall)
                    kind.agent_s.append(agent_s)
                    kind.server_s.append(server_s)
            for kind in kinds:
                print(f"... per turn (instrumented): {kind.name}", flush=True)
                clock = TurnClock(bench.agent.TURN, bench.agent.HOOK)
                kind.turn_wall, _, _ = bench.run(kind, clock)
                kind.turn = clock.per_turn(n, turns, by_turn=kind.agent == "async")
            if args.profile:
                profile(bench, next(k for k in kinds if k.user == "simulated"),
                        Path(here / args.profile))
        finally:
            os.chdir(here)
            server.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{'amortised (median of ' + str(args.repeat) + ')':34s} {'wall s':>7s} "
          f"{'turns/s':>8s} {'agent s':>8s} {'server s':>8s} {'ms/turn':>8s} "
          f"{'(w-a)/t':>8s}")
    figures: list[dict[str, Any]] = []
    goals: list[tuple[str, bool, str]] = []
    for kind in kinds:
        wall = statistics.median(kind.walls)
        agent_s = statistics.median(kind.agent_s)
        server_s = statistics.median(kind.server_s)
        per = [(w - a - s) / total * 1e3 for w, a, s in
               zip(kind.walls, kind.agent_s, kind.server_s, strict=True)]
        upper = [(w - a) / total * 1e3 for w, a in zip(kind.walls, kind.agent_s, strict=True)]
        print(f"{kind.name:34s} {wall:7.2f} {total / wall:8,.0f} {agent_s:8.3f} "
              f"{server_s:8.3f} {statistics.median(per):8.3f} {statistics.median(upper):8.3f}"
              f"   walls {' '.join(f'{w:.2f}' for w in kind.walls)}")
        figure: dict[str, Any] = {
            "kind": kind.name, "wall_s": kind.walls, "agent_s": kind.agent_s,
            "server_s": kind.server_s, "ms_per_turn": statistics.median(per),
            "ms_per_turn_upper": statistics.median(upper)}
        figures.append(figure)
    print(f"\n{'per turn, instrumented (ms)':34s} {'own med':>8s} {'own p99':>8s} "
          f"{'all med':>8s} {'all p99':>8s}  loop busy / wall; ends, loose per turn")
    for kind, figure in zip(kinds, figures, strict=True):
        assert kind.turn is not None
        own, all_in = kind.turn["own"], kind.turn["all_in"]
        median, p99 = statistics.median(all_in) * 1e3, quantile(all_in, 0.99) * 1e3
        print(f"{kind.name:34s} {statistics.median(own) * 1e3:8.3f} "
              f"{quantile(own, 0.99) * 1e3:8.3f} {median:8.3f} {p99:8.3f}  "
              f"{kind.turn['busy_s']:.2f} / {kind.turn_wall:.2f} s; "
              f"{kind.turn['ends_s'] / total * 1e3:.3f}, "
              f"{kind.turn['loose_s'] / total * 1e3:.3f}")
        figure.update(turn_median_ms=median, turn_p99_ms=p99,
                      own_median_ms=statistics.median(own) * 1e3,
                      own_p99_ms=quantile(own, 0.99) * 1e3, instrumented_wall_s=kind.turn_wall,
                      loop_busy_s=kind.turn["busy_s"])
        goals.append((f"{kind.name}: median harness time per turn <= 1 ms", median <= 1.0,
                      f"{median:.3f} ms (amortised {figure['ms_per_turn']:.3f} ms)"))
    print("\ngoals (a shared 2-core machine: another test run and engineer on it)")
    for text, ok, what in goals:
        print(f"  [{'met ' if ok else 'MISS'}] {text}: {what}")
    print(f"peak RSS of this process: {rss:.0f} MiB (every run above, one process)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "machine": machine(), "conversations": n, "turns": turns,
            "concurrency": args.concurrency, "store": not args.no_store,
            "figures": figures, "peak_rss_mib": rss,
            "goals": [{"goal": t, "met": ok, "detail": d} for t, ok, d in goals]}, indent=2)
            + "\n")
    return 0 if all(ok for _, ok, _ in goals) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"\nbench failed: {exc}", file=sys.stderr)
        sys.exit(3)

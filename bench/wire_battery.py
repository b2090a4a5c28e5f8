"""What in-process wire capture adds to a whole battery of a framework agent (issue 30, SPEC §15).

    .venv/bin/python bench/wire_battery.py [--agent pydantic-ai] [--cases 1000] [--repeat 5]

The goal: wire capture adds at most 5% to a battery of 1,000 trials of a
framework agent against the loopback model. bench/wire_capture.py measures
one call; this measures what a user waits for.

The agent is one of the real framework agents of ``tests/frameworks/agents``
(copied unchanged into the project), or a plain ``openai`` SDK tool loop
written here, run as ``python:`` by ``assay run DIR --json r.json
--concurrency 64`` in a fresh process and a fresh project folder (store and
ledger on, as a user runs it). Its model is ``tests/model_server.py``, in a
process of its own (so it does not share the run's GIL), scripted per case
to ask for ``lookup`` once and then answer: two model calls a trial.

Each run is made twice, interleaved (on, off, off, on, …, so a drift in the
machine's load falls on both alike):

- **on**: ``assay run`` as shipped — ``python:`` installs wire capture and
  every trial's exchanges are recorded, read and merged into its trace;
- **off**: the same command in a process where
  ``assay.targets.wire.capture.install`` was replaced by a no-op before the
  run: no client is hooked, nothing is recorded, nothing is read.

Every case's checks (``contains``, ``within_steps``) pass either way, so both
modes grade, report and store the same verdicts; what differs is what the
wire gave. Every run is checked: every case passed, and every case has the
served model as its ``model`` facet with capture on (a fact only the wire
gives) and none with it off (proof the capture really was off).

Printed per mode: the median of the battery's own wall (the report's
``finished_at − started_at``), trials/s, the median of the whole process's
wall (start-up, imports, store and report included) and of its CPU time
(user + system: less moved by other work on the machine than a wall), all
runs listed; then the overhead of on over off.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _measure import run_process  # noqa: E402

AGENTS = ROOT / "tests" / "frameworks" / "agents"

#: The ``python:`` target of each agent the bench can run.
TARGETS = {
    "pydantic-ai": "python:pydantic_ai_agent:agent",
    "openai-agents-chat": "python:agents_sdk_agent:chat_agent",
    "openai-agents": "python:agents_sdk_agent:agent",
    "langgraph": "python:langgraph_agent:agent",
    "anthropic": "python:anthropic_agent:agent",
    "openai-loop": "python:openai_loop:agent",
}

#: A plain ``openai`` SDK tool loop, as a user without a framework writes one.
OPENAI_LOOP = '''\
"""A tool loop on the openai SDK alone (bench/wire_battery.py, generated)."""

import json

import shop_tools
from openai import OpenAI

client = OpenAI()
TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look an order up by its id.",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"}},
                   "required": ["order"]}}}]
FUNCTIONS = {"lookup": shop_tools.lookup}


def agent(input):
    messages = [{"role": "user", "content": input}]
    while True:
        answer = client.chat.completions.create(model="gpt-4.1", messages=messages,
                                                tools=TOOLS)
        message = answer.choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = FUNCTIONS[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
'''

#: Runs ``assay`` in this process; with ``off`` first, wire capture is never installed.
DRIVER = """
import sys
if sys.argv[1] == "off":
    import assay.targets.wire.capture as capture
    capture.install = lambda: None
from assay.cli import main
sys.argv = ["assay", *sys.argv[2:]]
sys.exit(main())
"""

SCRIPT = json.dumps([{"call": "lookup", "args": {"order": "A-1"}}, {"say": "A-1 has shipped."}])


def write_project(folder: Path, agent: str, cases: int) -> None:
    shutil.copytree(AGENTS, folder / "evals", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "evals" / "openai_loop.py").write_text(OPENAI_LOOP)
    lines = [f"suite: bench/wire@1\ntarget: {TARGETS[agent]}\ncases:"]
    for i in range(cases):
        lines.append(f"  - id: c{i}\n    input: 'Where is order A-1? ({i}) SCRIPT:{SCRIPT}'\n"
                     f"    expect:\n      - contains: shipped\n      - within_steps: 2")
    (folder / "evals" / "bench.suite.yaml").write_text("\n".join(lines) + "\n")


def start_model() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "model_server.py")],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    base = process.stdout.readline().strip()
    if not base.startswith("http"):
        process.kill()
        raise SystemExit(f"the model server did not start: {base!r}")
    return process, base.rstrip("/")


def in_run_seconds(report: dict[str, Any]) -> float:
    start = dt.datetime.fromisoformat(str(report["started_at"]).replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(str(report["finished_at"]).replace("Z", "+00:00"))
    return (end - start).total_seconds()


def check(report: dict[str, Any], mode: str, cases: int) -> None:
    """Every case ran; what it saw is what the mode says (on: the wire's facts; off: none)."""
    seen = report["cases"]
    if len(seen) != cases:
        raise SystemExit(f"{mode}: {len(seen)} cases reported, {cases} run")
    for case in seen:
        model = case["facets"].get("model")
        if case["outcome"] != "pass" or (model == "served-model-1") != (mode == "on"):
            raise SystemExit(f"{mode}: case {case['id']} is not as the mode says: "
                             f"{case['outcome']}, model {model!r}")


def one_run(agent: str, cases: int, mode: str, env: dict[str, str], keep: Path | None
            ) -> tuple[float, float, float]:
    """(battery s, process s, process CPU s) of one fresh ``assay run``, checked."""
    with tempfile.TemporaryDirectory(prefix="wire-battery-") as scratch:
        folder = Path(scratch)
        write_project(folder, agent, cases)
        done = run_process([sys.executable, "-c", DRIVER, mode, "run", "evals", "--json",
                            "r.json", "--concurrency", "64"], cwd=folder, env=env,
                           timeout_s=1800)
        if done.returncode not in (0, 1) or not (folder / "r.json").exists():
            raise SystemExit(f"{mode}: assay run exited {done.returncode}:\n{done.tail()}")
        report = json.loads((folder / "r.json").read_text())
        if keep is not None:
            shutil.copy(folder / "r.json", keep / f"{mode}.json")
        check(report, mode, cases)
        return in_run_seconds(report), done.wall_s, float(done.extra["cpu_s"])  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", choices=sorted(TARGETS), default="pydantic-ai")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="runs per mode")
    parser.add_argument("--keep", type=Path, help="a folder to copy the last reports into")
    args = parser.parse_args(argv)
    model, base = start_model()
    env = {**os.environ, "OPENAI_BASE_URL": base + "/v1", "OPENAI_API_KEY": "sk-bench",
           "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-bench",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    found: dict[str, list[tuple[float, float, float]]] = {"on": [], "off": []}
    try:
        print(f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC · {platform.node()} · "
              f"{len(os.sched_getaffinity(0))} CPUs · Python {platform.python_version()} · "
              f"{args.agent} ({TARGETS[args.agent]}) · {args.cases} trials, 2 model calls "
              f"each, concurrency 64 · load {os.getloadavg()[0]:.2f}", flush=True)
        one_run(args.agent, min(50, args.cases), "on", env, None)  # warm: caches, bytecode
        for i in range(args.repeat):
            for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
                battery, wall, cpu = one_run(args.agent, args.cases, mode, env, args.keep)
                found[mode].append((battery, wall, cpu))
                print(f"  run {i + 1} {mode:<3}  battery {battery:7.2f} s  process "
                      f"{wall:7.2f} s  cpu {cpu:7.2f} s  load {os.getloadavg()[0]:.2f}",
                      flush=True)
    finally:
        model.kill()
        model.wait()
    print(f"\n{'mode':<5} {'battery (median)':>17} {'trials/s':>9} {'process (median)':>17} "
          f"{'cpu (median)':>13}")
    medians = {}
    for mode in ("off", "on"):
        battery = statistics.median(b for b, _, _ in found[mode])
        wall = statistics.median(w for _, w, _ in found[mode])
        cpu = statistics.median(c for _, _, c in found[mode])
        medians[mode] = (battery, wall, cpu)
        print(f"{mode:<5} {battery:>15.2f} s {args.cases / battery:>9.1f} {wall:>15.2f} s "
              f"{cpu:>11.2f} s")
    (b_on, w_on, c_on), (b_off, w_off, c_off) = medians["on"], medians["off"]
    print(f"overhead: battery {100 * (b_on / b_off - 1):+.1f}%, process "
          f"{100 * (w_on / w_off - 1):+.1f}%, cpu {100 * (c_on / c_off - 1):+.1f}% (goal: "
          f"battery ≤ +5%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

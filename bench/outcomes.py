"""What a workspace costs a battery (issue 28, SPEC §14).

    .venv/bin/python bench/outcomes.py [--cases 1000] [--repeat 3] [--concurrency 8]

Three suites of ``--cases`` cases, one trial each, against the same no-latency
``python:`` agent, run as a user runs them (``assay run --no-store``, a fresh
process each, interpreter start and imports included):

1. no workspace;
2. ``workspace:`` an empty folder: each trial stages a copy, takes its change
   set and removes it — the issue's goal is ≤ 10% more wall than (1). The
   copies go where assay puts them by default (``/dev/shm`` when they fit,
   else the temporary folder), so ``ASSAY_WORKSPACES`` is left unset;
3. ``workspace:`` a small project (20 files) and a ``files`` check, for scale.

Printed: the median wall of ``--repeat`` runs of each, trials/s, peak RSS, and
the overhead of (2) and (3) over (1). Every run must exit 0 with all cases
passed, and leave no workspace behind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import run_process  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"

AGENT = """
def agent(prompt, tools):
    if tools.workspace is not None and prompt.endswith("write"):
        (tools.workspace / "out.txt").write_text(prompt)
    return prompt
"""


def write_suite(folder: Path, name: str, cases: int, workspace: str | None,
                files_check: bool) -> None:
    folder.mkdir(parents=True)
    (folder / "bench_agent.py").write_text(AGENT)
    lines = [f"suite: bench/{name}@1", "target: python:bench_agent:agent"]
    if workspace is not None:
        lines.append(f"workspace: {workspace}")
    lines.append("cases:")
    for i in range(cases):
        prompt = f"c{i} write" if files_check else f"c{i}"
        expect = "[{contains: c}, {files: {created: [out.txt]}}]" if files_check \
            else "[{contains: c}]"
        lines.append(f"  - {{id: c{i}, input: {prompt!r}, expect: {expect}}}")
    (folder / "s.suite.yaml").write_text("\n".join(lines) + "\n")


#: Where assay stages workspaces unless told otherwise: memory when they fit, else disk.
ROOTS = (Path("/dev/shm/assay-workspaces"), Path(tempfile.gettempdir()) / "assay-workspaces")


def left_behind() -> set[Path]:
    """Every workspace copy under the default roots (their owners' folders' contents)."""
    return {copy for root in ROOTS if root.is_dir() for owner in root.iterdir()
            if owner.is_dir() for copy in owner.iterdir()}


def run(folder: Path, out: Path, concurrency: int) -> tuple[float, float]:
    before = left_behind()
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_WORKSPACES"}
    done = run_process([str(PYTHON), "-m", "assay", "run", str(folder), "--no-store",
                        "--json", str(out), "--concurrency", str(concurrency)], env=env)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.tail()}")
    report = json.loads(out.read_text())
    passed = report["counts"]["public"]["passed"]
    if passed != report["counts"]["public"]["total"]:
        raise SystemExit(f"not every case passed: {report['counts']}")
    if left_behind() - before:
        raise SystemExit(f"workspaces left behind: {sorted(left_behind() - before)[:3]}")
    return done.wall_s, done.peak_rss_mib


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-outcomes-") as scratch:
        root = Path(scratch)
        (root / "empty").mkdir()
        project = root / "project"
        for i in range(20):
            (project / f"pkg{i % 4}").mkdir(parents=True, exist_ok=True)
            (project / f"pkg{i % 4}" / f"mod{i}.py").write_text(f"value = {i}\n" * 40)
        kinds = {
            "no workspace": (None, False),
            "empty workspace": ("../empty", False),
            "20-file workspace + files check": ("../project", True),
        }
        walls: dict[str, list[float]] = {}
        peaks: dict[str, float] = {}
        for n, (workspace, files_check) in enumerate(kinds.values()):
            folder = root / f"suite{n}"
            write_suite(folder, f"s{n}", options.cases, workspace, files_check)
        # Interleaved, so that a slow moment of the machine falls on every kind alike.
        for _ in range(options.repeat):
            for n, label in enumerate(kinds):
                wall, peak = run(root / f"suite{n}", root / f"out{n}.json",
                                 options.concurrency)
                walls.setdefault(label, []).append(wall)
                peaks[label] = max(peaks.get(label, 0.0), peak)
        print(f"machine: {platform.machine()} · {os.cpu_count()} cores · "
              f"Python {platform.python_version()} · temp {tempfile.gettempdir()}")
        print(f"{options.cases} cases × 1 trial, concurrency {options.concurrency}, "
              f"median of {options.repeat} fresh processes")
        base = statistics.median(walls["no workspace"])
        for label, values in walls.items():
            wall = statistics.median(values)
            extra = "" if label == "no workspace" else \
                f"  ({(wall / base - 1) * 100:+.1f}% over no workspace)"
            print(f"  {label:34s} {wall:6.2f} s  {options.cases / wall:7.0f} trials/s  "
                  f"peak {peaks[label]:.0f} MiB{extra}")
        overhead = statistics.median(walls["empty workspace"]) / base - 1
        verdict = "met" if overhead <= 0.10 else "NOT met"
        print(f"goal: an empty workspace costs ≤ 10% more wall: {overhead * 100:+.1f}% "
              f"({verdict})")


if __name__ == "__main__":
    main()

"""Staging a workspace and taking its change set (issue 28, SPEC §14).

    .venv/bin/python bench/workspaces.py [--files 5000] [--mb 50] [--repeat 5]

A folder of N files (``--files``) totalling ``--mb`` megabytes, in 50 folders, is
listed once (``workspaces.staged.Source``, as a battery does), then staged under a
scratch root (``workspaces.stage``), an "agent" edits three files,
creates one and deletes one, and the change set is taken (``Workspace.changes``);
then the copy is removed. Printed: the file system and whether it clones
copy-on-write, the median of ``--repeat`` stage + change-set walls for one trial,
and the wall of 16 trials staged and diffed at once (16 threads), against the
issue's goals (≤ 150 ms for one, ≤ 2 s for 16).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from assay.workspaces import stage  # noqa: E402
from assay.workspaces.copy import clones  # noqa: E402
from assay.workspaces.staged import Source  # noqa: E402


def make_source(root: Path, files: int, megabytes: int) -> Path:
    size = megabytes * 1024 * 1024 // files
    for i in range(files):
        folder = root / f"pkg{i % 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        line = f"line of module {i}\n".encode()
        (folder / f"mod{i}.py").write_bytes((line * (size // len(line) + 1))[:size])
    return root


def one_trial(source: Source, scratch: Path) -> float:
    start = time.perf_counter()
    ws = stage(source, scratch)
    (ws.path / "pkg00" / "mod0.py").write_text("def fixed():\n    return 1\n")
    (ws.path / "pkg01" / "mod1.py").write_bytes(b"changed\n")
    (ws.path / "pkg02" / "mod2.py").write_text("x = 2\n")
    (ws.path / "pkg03" / "new.py").write_text("created = True\n")
    (ws.path / "pkg04" / "mod4.py").unlink()
    changes = ws.changes()
    wall = time.perf_counter() - start
    assert len(changes.files) == 5, changes.files
    ws.remove()
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", type=Path, default=None,
                        help="where the workspaces go (default: the system's temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-ws-") as folder, \
            tempfile.TemporaryDirectory(prefix="assay-bench-ws-", dir=args.root) as workspaces:
        base = Path(folder)
        # Listed once, as a battery lists each source once for all its trials.
        source = Source.of(make_source(base / "source", args.files, args.mb))
        scratch = Path(workspaces)
        fs = subprocess.run(["stat", "-f", "-c", "%T", str(scratch)], capture_output=True,
                            text=True).stdout.strip()
        print(f"{platform.node()} · {os.cpu_count()} cores · {fs} · copy-on-write clone: "
              f"{'yes' if clones(scratch) else 'no (kernel copy)'}")
        one_trial(source, scratch)  # warm: the source in the page cache
        walls = [one_trial(source, scratch) for _ in range(args.repeat)]
        print(f"one trial, {args.files:,} files, {args.mb} MB: stage + change set median "
              f"{statistics.median(walls) * 1000:.0f} ms (of {args.repeat}: "
              f"{', '.join(f'{w * 1000:.0f}' for w in walls)}) · goal ≤ 150 ms")
        start = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda _: one_trial(source, scratch), range(16)))
        print(f"16 trials at once: {time.perf_counter() - start:.2f} s · goal ≤ 2 s")
        left = [copy for owner in scratch.iterdir() for copy in owner.iterdir()]
        assert not left, "a workspace was left behind"


if __name__ == "__main__":
    main()

"""A trial's workspace on the real file system: staged, changed by an "agent" (this test,
writing as one would), its change set taken, removed, and swept after a killed owner."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from assay.model.changes import DIFF_CAP
from assay.workspaces import stage, sweep
from assay.workspaces.copy import copy_tree, python_copy_tree
from assay.workspaces.staged import OWNER


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shop" / "total.py").write_text("def total(xs):\n    return 42\n")
    (root / "tests" / "test_total.py").write_text("from shop.total import total\n")
    (root / "README").write_text("a shop\n")
    (root / "logo.png").write_bytes(b"\x89PNG\0\0binary")
    (root / "empty").mkdir()
    os.symlink("/etc/hostname", root / "outside")
    os.symlink("shop/total.py", root / "alias.py")
    return root


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str]]:
    found: dict[str, tuple[str, bytes | str]] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[rel] = ("link", os.readlink(path))
        elif path.is_file():
            found[rel] = ("file", path.read_bytes())
        else:
            found[rel] = ("dir", "")
    return found


def test_a_copy_holds_the_same_files_links_and_times_and_nothing_links_back(
        source: Path, tmp_path: Path) -> None:
    before = snapshot(source)
    ws = stage(source, tmp_path / "root")
    assert snapshot(ws.path) == before
    staged = ws.path / "shop" / "total.py"
    assert staged.stat().st_mtime_ns == (source / "shop" / "total.py").stat().st_mtime_ns
    assert staged.stat().st_ino != (source / "shop" / "total.py").stat().st_ino
    assert staged.stat().st_nlink == 1  # never a hard link to the original
    # The agent writes everywhere it can, through the links too: the original holds.
    staged.write_text("changed\n")
    (ws.path / "alias.py").write_text("through the link\n")
    (ws.path / "README").unlink()
    assert snapshot(source) == before
    assert os.readlink(ws.path / "outside") == "/etc/hostname"  # kept as a link


@pytest.mark.parametrize("copy", [copy_tree, python_copy_tree])
def test_both_ways_of_copying_give_the_same_copy(source: Path, tmp_path: Path,
                                                 copy: object) -> None:
    target = tmp_path / "copy"
    copy(source, target)  # type: ignore[operator]
    assert snapshot(target) == snapshot(source)
    for rel in ("shop/total.py", "logo.png", "shop"):
        mine, theirs = (target / rel).lstat(), (source / rel).lstat()
        assert (mine.st_mtime_ns, mine.st_mode) == (theirs.st_mtime_ns, theirs.st_mode)
        assert mine.st_ino != theirs.st_ino
    assert (target / "outside").is_symlink() and (target / "alias.py").is_symlink()


def test_nothing_changed_is_an_empty_change_set_without_reading_a_file(
        source: Path, tmp_path: Path) -> None:
    ws = stage(source, tmp_path / "root")
    # Untouched files are told by size and time, never read: were they hashed against
    # the source, this edit behind the workspace's back (same size, same time) would show.
    original = source / "shop" / "total.py"
    st = original.stat()
    original.write_text("def total(xs):\n    return 24\n")
    os.utime(original, ns=(st.st_atime_ns, st.st_mtime_ns))
    changes = ws.changes()
    assert (changes.files, changes.diff, changes.diff_truncated) == ([], "", False)


def test_created_modified_deleted_with_sizes_digests_and_a_diff(
        source: Path, tmp_path: Path) -> None:
    ws = stage(source, tmp_path / "root")
    fixed = b"def total(xs):\n    return sum(xs)\n"
    (ws.path / "shop" / "total.py").write_bytes(fixed)
    (ws.path / "NOTES.md").write_text("fixed the total\n")
    (ws.path / "README").unlink()
    (ws.path / "logo.png").write_bytes(b"\x89PNG\0\0other")
    (ws.path / "outside").unlink()
    os.symlink("/etc/passwd", ws.path / "outside")
    changes = ws.changes()
    rows = {f.path: (f.change, f.size, f.sha256, f.link, f.binary) for f in changes.files}
    assert rows == {
        "NOTES.md": ("created", 16, sha(b"fixed the total\n"), None, False),
        "README": ("deleted", 7, sha(b"a shop\n"), None, False),
        "logo.png": ("modified", 11, sha(b"\x89PNG\0\0other"), None, True),
        "outside": ("modified", None, None, "/etc/passwd", False),
        "shop/total.py": ("modified", len(fixed), sha(fixed), None, False),
    }
    assert [f.path for f in changes.files] == sorted(rows)
    assert changes.paths("deleted") == ["README"]
    diff = changes.diff
    assert "--- /dev/null\n+++ b/NOTES.md\n" in diff and "+fixed the total\n" in diff
    assert "--- a/README\n+++ /dev/null\n" in diff and "-a shop\n" in diff
    assert "--- a/shop/total.py\n+++ b/shop/total.py\n" in diff
    assert "-    return 42\n+    return sum(xs)\n" in diff
    assert "PNG" not in diff  # binary: digest only


def test_a_file_rewritten_with_the_same_bytes_is_no_change(
        source: Path, tmp_path: Path) -> None:
    ws = stage(source, tmp_path / "root")
    path = ws.path / "shop" / "total.py"
    path.write_bytes(path.read_bytes())  # a new mtime, the same content
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert ws.changes().files == []


def test_the_diff_stops_at_a_file_boundary_past_its_cap(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    ws = stage(src, tmp_path / "root")
    line = "x" * 99 + "\n"
    for name in ("a.txt", "b.txt", "c.txt"):
        (ws.path / name).write_text(line * 1000)  # 100 kB each: two fit in 256 KiB
    changes = ws.changes()
    assert changes.diff_truncated
    assert "+++ b/a.txt" in changes.diff and "+++ b/b.txt" in changes.diff
    assert "+++ b/c.txt" not in changes.diff
    assert len(changes.diff.encode()) <= DIFF_CAP
    assert changes.paths("created") == ["a.txt", "b.txt", "c.txt"]  # listed all the same


def test_remove_leaves_nothing(source: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    ws = stage(source, root)
    (ws.path / "tests").chmod(0o500)  # an agent may leave a folder read-only
    ws.remove()
    assert not ws.path.exists() or not any(ws.path.iterdir())
    assert not Path(str(ws.path) + OWNER).exists()


def test_the_workspaces_of_a_killed_process_are_swept_and_a_live_ones_kept(
        source: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    code = ("import sys, pathlib\nfrom assay.workspaces import stage\n"
            f"ws = stage(pathlib.Path({str(source)!r}), pathlib.Path({str(root)!r}))\n"
            "print(ws.path, flush=True)\nsys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    theirs = Path(child.stdout.readline().strip())
    mine = stage(source, root)
    assert sweep(root) == []  # both owners alive
    child.kill()
    child.wait()
    assert sweep(root) == [theirs]
    assert not theirs.exists() and mine.path.exists()
    mine.remove()


def test_the_python_copy_of_many_files_uses_its_pool_and_misses_none(tmp_path: Path) -> None:
    source = tmp_path / "many"
    for i in range(150):  # past the count where the copy goes to its thread pool
        (source / f"d{i % 7}").mkdir(parents=True, exist_ok=True)
        (source / f"d{i % 7}" / f"f{i}.txt").write_text(f"file {i}\n" * (i + 1))
    python_copy_tree(source, tmp_path / "copy")
    assert snapshot(tmp_path / "copy") == snapshot(source)


def test_a_copy_to_another_file_system_has_every_byte(tmp_path: Path) -> None:
    """From the disk to memory (/dev/shm) the kernel's copy within one file system is
    refused; the copy goes on with sendfile, and no file is short."""
    memory = Path("/dev/shm")
    if not memory.is_dir():
        pytest.skip("no /dev/shm on this machine")
    source = tmp_path / "src"
    for i in range(12):
        (source / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (source / f"d{i % 3}" / f"f{i}.bin").write_bytes(os.urandom(1000 * i + 7))
    target = Path(tempfile.mkdtemp(dir=memory)) / "copy"
    try:
        python_copy_tree(source, target)
        assert snapshot(target) == snapshot(source)
    finally:
        shutil.rmtree(target.parent)

"""Copy a folder for one trial: cheap, faithful, and never linked to the original.

Each regular file is cloned with the ``FICLONE`` ioctl where the file system
supports copy-on-write (btrfs, XFS, bcachefs, overlayfs on them): the copy shares
blocks until either side writes, so it costs no data. Elsewhere the kernel copies
(``copy_file_range``, through ``shutil.copyfile``). Files are copied from a small
thread pool — a folder of thousands of small files is bound by system calls, not
bytes — and keep their modification times to the nanosecond, which is what lets
``staged`` tell an untouched file without reading it. A symbolic link is copied as
a link (its target text as it was), never followed: a link out of the folder stays
a link. A hard link is never made: an agent writing through one would change the
original.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: ``FICLONE`` from linux/fs.h: clone a whole file, copy-on-write.
FICLONE = 0x40049409
#: Threads copying files at once.
COPY_THREADS = 8
#: ``cp`` processes copying one folder at once, at most (one per core).
COPY_PROCESSES = 4


class _Cloning:
    """Whether copy-on-write clones work here: tried until the first refusal, then not."""

    def __init__(self) -> None:
        self.works = True
        #: ``copy_file_range`` copies between these two file systems (False after EXDEV).
        self.in_kernel = True

    def copy(self, source: str, target: str, st: os.stat_result) -> None:
        """Copy one regular file: one open each side, a clone or the kernel's copy."""
        fin = os.open(source, os.O_RDONLY)
        try:
            fout = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                if not (self.works and self._clone(fin, fout)):
                    self.in_kernel = _kernel_copy(fin, fout, st.st_size, self.in_kernel)
                os.fchmod(fout, stat.S_IMODE(st.st_mode))
                os.utime(fout, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(fout)
        finally:
            os.close(fin)

    def _clone(self, fin: int, fout: int) -> bool:
        try:
            import fcntl

            fcntl.ioctl(fout, FICLONE, fin)
        except (ImportError, OSError):
            self.works = False  # another file system would not clone either: stop asking
            return False
        return True


def _kernel_copy(fin: int, fout: int, size: int, in_kernel: bool = True) -> bool:
    """The bytes copied by the kernel: ``copy_file_range`` (within one file system, and
    across on newer kernels), else ``sendfile``, else read and write. Returns whether
    ``copy_file_range`` may be tried for the next file (not after it was refused)."""
    left = size
    if in_kernel:
        try:
            while left > 0:
                done = os.copy_file_range(fin, fout, left)
                if done == 0:
                    break
                left -= done
        except (AttributeError, OSError):
            in_kernel = False
            left = size
            os.lseek(fin, 0, os.SEEK_SET)
            os.lseek(fout, 0, os.SEEK_SET)
            os.ftruncate(fout, 0)
    if not in_kernel:
        try:
            offset = 0
            while offset < size:
                done = os.sendfile(fout, fin, offset, size - offset)
                if done == 0:
                    break
                offset += done
            left = size - offset
        except (AttributeError, OSError):
            os.lseek(fin, 0, os.SEEK_SET)
            os.lseek(fout, 0, os.SEEK_SET)
            os.ftruncate(fout, 0)
            with open(fin, "rb", closefd=False) as src, open(fout, "wb", closefd=False) as dst:
                shutil.copyfileobj(src, dst)
            return in_kernel
        os.lseek(fin, size - left, os.SEEK_SET)
        os.lseek(fout, size - left, os.SEEK_SET)
    if left > 0:  # the file grew while it was copied: the rest, plainly
        with open(fin, "rb", closefd=False) as src, open(fout, "ab", closefd=False) as dst:
            shutil.copyfileobj(src, dst)
    return in_kernel


def clones(folder: Path) -> bool:
    """Whether the file system of ``folder`` clones files copy-on-write (a probe file)."""
    probe = folder / ".assay-clone-probe"
    probe.write_bytes(b"x" * 4096)
    try:
        cloning = _Cloning()
        cloning.copy(str(probe), str(probe) + ".copy", os.stat(probe))
        return cloning.works
    finally:
        probe.unlink()
        Path(str(probe) + ".copy").unlink(missing_ok=True)


def copy_tree(source: Path, target: Path) -> None:
    """Copy the folder ``source`` to ``target`` (which must not exist): files, folders and
    links as they are, modification times kept.

    GNU ``cp -a --reflink=auto`` does it where there is one (Linux): the same rules,
    a clone where the file system can, and four times quicker than Python's own loop
    on a folder of 5,000 small files (docs/performance.md). Elsewhere, or if it fails,
    ``python_copy_tree``.
    """
    cp = shutil.which("cp") if sys.platform.startswith("linux") else None
    if cp is not None:
        if _parallel_cp(cp, source, target):
            return
        shutil.rmtree(target, ignore_errors=True)
    python_copy_tree(source, target)


def _parallel_cp(cp: str, source: Path, target: Path) -> bool:
    """``cp -a`` of the folder's entries, split between one ``cp`` per core: a copy of
    thousands of small files is bound by system calls, which processes make side by
    side. The folder itself then takes the source's mode and times. False: a ``cp``
    failed (the caller removes what was made and copies in Python)."""
    names = sorted(os.listdir(source))
    parts = max(1, min(os.cpu_count() or 1, COPY_PROCESSES, len(names)))
    if parts == 1:
        done = subprocess.run([cp, "-a", "--reflink=auto", "--no-target-directory",
                               str(source), str(target)], capture_output=True, check=False)
        return done.returncode == 0
    target.mkdir()
    groups = [names[i::parts] for i in range(parts)]
    running = [subprocess.Popen([cp, "-a", "--reflink=auto", "--target-directory",
                                 str(target), "--", *(str(source / n) for n in group)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for group in groups]
    if any([process.wait() != 0 for process in running]):  # every one waited for
        return False
    st = os.stat(source)
    os.chmod(target, stat.S_IMODE(st.st_mode))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    return True


def python_copy_tree(source: Path, target: Path) -> None:
    """``copy_tree`` in Python: the same result, where there is no GNU ``cp``."""
    target.mkdir(parents=True)
    files: list[tuple[str, str, os.stat_result]] = []
    folders: list[tuple[str, os.stat_result]] = []
    for here, dirs, names in os.walk(source, followlinks=False):
        rel = os.path.relpath(here, source)
        out = target if rel == "." else target / rel
        for name in [*dirs, *names]:
            path = os.path.join(here, name)
            st = os.lstat(path)
            dest = str(out / name)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(path), dest)
            elif stat.S_ISDIR(st.st_mode):
                os.mkdir(dest)
                folders.append((dest, st))
            elif stat.S_ISREG(st.st_mode):
                files.append((path, dest, st))
            # Sockets, pipes and devices are not an agent's files: not copied.
        # A link to a folder is listed in dirs; os.walk does not descend into it.
    cloning = _Cloning()
    if len(files) < 64:
        for source_file, dest, st in files:
            cloning.copy(source_file, dest, st)
    else:
        with ThreadPoolExecutor(COPY_THREADS) as pool:
            for done in pool.map(lambda item: cloning.copy(*item), files):
                del done
    # Folders last: creating their entries above moved their times.
    for dest, st in reversed(folders):
        os.chmod(dest, stat.S_IMODE(st.st_mode))
        os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))

"""A trial's workspace around its agent: staged before, its outcome facts collected after.

SPEC §14, DESIGN "Where the newer parts go": the engine stages a fresh copy
of the case's folder for each trial (``workspaces.stage``), the target runs
the agent in it, and, after the agent and before grading, the engine
collects into the trace what the outcome checks will read: the change set,
the text of every file a ``file:`` check names, the paths a ``files: {exists,
absent}`` rule asks about, and each ``command``'s run. Commands run here,
in the final workspace, with the isolation a host agent has (a throwaway
home, no provider keys, their own process group, killed at their timeout).
Checks then grade those facts and never touch the disk.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..model import Case
from ..model.changes import (
    FILE_CAP,
    FOUND_CAP,
    OUTPUT_CAP,
    CommandRun,
    FileRead,
    WorkspaceFacts,
    glob_matches,
)
from ..model.storable import storable_text
from ..targets.hosts.process import Finished, child_environment, run_cli, throwaway_home
from ..workspaces import Workspace, stage, sweep
from ..workspaces.staged import Source

#: Where trials' workspaces are staged (``ASSAY_WORKSPACES`` moves it).
ROOT_ENV = "ASSAY_WORKSPACES"
#: The memory-backed folder workspaces go to when they fit (Linux).
SHM = Path("/dev/shm")
#: A source goes to memory when its copies in flight take at most this share of it.
SHM_SHARE = 0.25


def workspaces_root() -> Path:
    """The folder trials' workspaces are staged under on disk: ``$ASSAY_WORKSPACES`` or
    the temporary folder's ``assay-workspaces``."""
    given = os.environ.get(ROOT_ENV)
    return Path(given) if given else Path(tempfile.gettempdir()) / "assay-workspaces"


def memory_root(needed: int) -> Path | None:
    """``/dev/shm/assay-workspaces`` when ``needed`` bytes fit in a quarter of what it has
    free and programs may run from it (not ``noexec``); None otherwise, or when
    ``$ASSAY_WORKSPACES`` names the place.

    Creating and removing a folder costs a tenth of a millisecond or more on a
    disk (a journal entry each) and a few microseconds in memory: for a battery
    of small workspaces that is most of what a workspace costs
    (docs/performance.md).
    """
    if os.environ.get(ROOT_ENV) or not SHM.is_dir():
        return None
    try:
        found = os.statvfs(SHM)
    except OSError:
        return None
    if found.f_flag & os.ST_NOEXEC or found.f_flag & os.ST_RDONLY:
        return None
    if needed > found.f_bavail * found.f_frsize * SHM_SHARE:
        return None
    return SHM / "assay-workspaces"


#: The roots this process swept already: a killed run's leftovers go at the first stage.
_swept: set[Path] = set()


class Staging:
    """A battery's workspaces: each source folder listed once, each trial's copy staged.

    A small source (``Source.small``: a few files) is copied, its change set
    taken and its copy removed right here, on the event loop: a thread's
    round trip would cost more than the work. A larger one goes to a thread.
    The first stage in a process sweeps away the copies of runs that were
    killed (their owner process is gone).
    """

    def __init__(self, concurrency: int = 8) -> None:
        self.concurrency = concurrency
        self._sources: dict[Path, tuple[Source, Path]] = {}

    async def stage(self, folder: Path) -> Workspace:
        """A fresh copy of ``folder`` for one trial."""
        found = self._sources.get(folder)
        if found is None:
            found = self._sources[folder] = await asyncio.to_thread(self._first, folder)
        source, root = found
        if source.small:
            return stage(source, root)
        return await asyncio.to_thread(stage, source, root)

    def _first(self, folder: Path) -> tuple[Source, Path]:
        """The source listed, and where its copies go: memory when they fit, else disk."""
        source = Source.of(folder)
        root = memory_root(source.size * self.concurrency) or workspaces_root()
        for place in {root, workspaces_root()}:
            if place not in _swept:
                _swept.add(place)
                sweep(place)
        return source, root


async def collect(workspace: Workspace, case: Case, inline: bool = False) -> WorkspaceFacts:
    """The outcome facts of one trial: change set, files named, globs asked, commands run.

    The change set and the files are taken first, as the agent left them: a
    command run afterwards (``pytest`` writing its cache) changes nothing
    that is graded. ``inline``: a small workspace's are taken on this thread.
    """
    reads, globs, commands = _asked(case)
    if inline:
        facts = _facts_on_disk(workspace, reads, globs)
    else:
        facts = await asyncio.to_thread(_facts_on_disk, workspace, reads, globs)
    facts.path = str(workspace.path)
    for command, timeout_s in commands:
        facts.commands.append(await run_command(command, timeout_s, workspace.path))
    return facts


def _asked(case: Case) -> tuple[list[str], list[str], list[tuple[str | list[str], float]]]:
    """What the case's outcome checks will read: file paths, globs to look for, commands."""
    reads: list[str] = []
    globs: list[str] = []
    commands: list[tuple[str | list[str], float]] = []
    for assertion in case.expect:
        arg = assertion.arg
        if not isinstance(arg, dict):
            continue
        if assertion.check == "file" and arg["file"] not in reads:
            reads.append(arg["file"])
        elif assertion.check == "files":
            globs.extend(g for key in ("exists", "absent") for g in arg.get(key, ())
                         if g not in globs)
        elif assertion.check == "command":
            run = (arg["command"], arg["timeout_s"])
            if run not in commands:
                commands.append(run)
    return reads, globs, commands


def _facts_on_disk(workspace: Workspace, reads: list[str], globs: list[str]) -> WorkspaceFacts:
    # Our own facts, each part validated as it was made: not validated again.
    facts = WorkspaceFacts.model_construct(
        changes=workspace.changes(), files=[read_file(workspace.path, rel) for rel in reads],
        commands=[], found={})
    if globs:
        found: dict[str, list[str]] = {glob: [] for glob in globs}
        for rel in _paths(workspace.path):
            for glob in globs:
                if len(found[glob]) < FOUND_CAP and glob_matches(glob, rel):
                    found[glob].append(rel)
        facts.found = found
    return facts


def _paths(root: Path) -> list[str]:
    """Every file, folder and link below ``root``, relative, sorted; links not followed."""
    paths: list[str] = []
    cut = len(str(root)) + 1
    for here, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted([*dirs, *names]):
            paths.append(os.path.join(here, name)[cut:].replace(os.sep, "/"))
    return paths


def read_file(root: Path, rel: str) -> FileRead:
    """A file as the agent left it, up to ``FILE_CAP`` bytes; a link out of ``root`` is not read."""
    path = root / rel
    try:
        st = os.lstat(path)
    except OSError:
        return FileRead(path=rel, exists=False)
    real = os.path.realpath(path)
    if os.path.commonpath([real, os.path.realpath(root)]) != os.path.realpath(root):
        return FileRead(path=rel, exists=True, error="a link that points out of the workspace "
                                                     "(not followed)")
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(path)
        except OSError:
            return FileRead(path=rel, exists=False, error="a link to nothing")
    if not stat.S_ISREG(st.st_mode):
        return FileRead(path=rel, exists=True, error="not a file (a folder or a device)")
    try:
        with open(real, "rb") as file:
            data = file.read(FILE_CAP + 1)
    except OSError as exc:
        return FileRead(path=rel, exists=True, error=f"could not be read: {exc.strerror}")
    truncated = len(data) > FILE_CAP
    data = data[:FILE_CAP]
    try:
        text, binary = data.decode("utf-8"), b"\0" in data
    except UnicodeDecodeError:
        # Cut mid-character at the cap is still text; otherwise it is binary.
        text, binary = data.decode("utf-8", "replace"), not truncated
    return FileRead(path=rel, exists=True, text=storable_text(text), binary=binary,
                    truncated=truncated)


async def run_command(command: str | list[str], timeout_s: float, workspace: Path) -> CommandRun:
    """Run one ``command`` in the final workspace, isolated as a host agent is.

    It cannot start, or runs out of time: the run says so in ``error`` with no
    exit code (the check is then inconclusive). Its process group is killed
    at the end either way.
    """
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    finished = Finished(exit_code=-1)
    with throwaway_home("assay-command-") as home:
        env = child_environment(os.environ, home, {"ASSAY_WORKSPACE": str(workspace)})
        try:
            async with asyncio.timeout(timeout_s):
                await run_cli(argv, cwd=workspace, env=env, into=finished)
        except TimeoutError:
            return _ran(command, timeout_s, finished, None,
                        f"ran out of time after {timeout_s:g}s")
        except OSError as exc:
            return CommandRun(command=command, timeout_s=timeout_s,
                              error=f"could not start: {exc.strerror or exc}")
    return _ran(command, timeout_s, finished, finished.exit_code, None)


def _ran(command: str | list[str], timeout_s: float, finished: Finished,
         exit_code: int | None, error: str | None) -> CommandRun:
    stdout = "\n".join(line for _, line in finished.lines)
    cut = len(stdout) > OUTPUT_CAP
    return CommandRun(command=command, timeout_s=timeout_s, exit_code=exit_code,
                      stdout=storable_text(stdout[:OUTPUT_CAP]), stdout_truncated=cut,
                      stderr=storable_text(finished.stderr[-OUTPUT_CAP:]),
                      duration_s=round(finished.duration_s, 3), error=error)


def keep(workspace: Workspace, where: Path) -> None:
    """Move a trial's final workspace to ``where`` for a person to open (``--keep-workspaces``)."""
    where.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(where, ignore_errors=True)
    shutil.move(str(workspace.path), str(where))


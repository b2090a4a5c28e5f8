"""Run a documentation page: write its files, run its commands, check their output.

A page is Markdown. Its fenced blocks are of three kinds, and no other:

- a block whose info string names a file (```` ```yaml file=evals/x.suite.yaml ````)
  is that file's whole content, written below the page's folder (a later
  block naming the same file replaces it: a page can show an edit);
- one with ``excerpt=PATH`` is a part of a file already there, word for word;
- a ``console`` block holds commands, each a line starting ``$ `` (a line
  ending in ``\\`` continues it), and below each what it prints. The shown
  lines must appear in what it printed (standard output then standard error),
  in order, other lines allowed between them; runs of spaces count as one,
  ``…`` stands for any text, a line that is only ``…`` for any lines, and
  ``{NAME}`` (capitals) for one word, kept as ``$NAME`` for later commands
  and shown lines.
  A command exits 0 unless it ends with a comment ``# exit N``; one ending in
  `` &`` keeps running in the background (until the page ends) once the lines
  shown below it have appeared. ``export NAME=VALUE`` and ``cd DIR`` carry over.

Commands run with bash in a folder of their own, with the ``assay`` of the
interpreter running the tests first on PATH, a ``HOME`` of their own, no
``ASSAY_*``, ``OPENAI_*`` or ``ANTHROPIC_*`` variables from outside, and a
120-column terminal.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
EXIT = re.compile(r"\s+#\s*exit (\d+)\b.*$")
CAPTURE = re.compile(r"\\\{([A-Z][A-Z0-9_]*)\\\}")
TIMEOUT = 180.0


@dataclass
class File:
    path: str
    text: str


@dataclass
class Excerpt:
    path: str
    text: str


@dataclass
class Command:
    line: str
    code: int = 0
    shown: list[str] = field(default_factory=list)
    background: bool = False


Step = File | Excerpt | Command


def steps(text: str) -> list[Step]:
    """The page's blocks, in order, as files to write and commands to run."""
    found: list[Step] = []
    for info, body in BLOCK.findall(text):
        words = info.split()
        attrs = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if "file" in attrs:
            found.append(File(attrs["file"], body))
        elif "excerpt" in attrs:
            found.append(Excerpt(attrs["excerpt"], body))
        elif words[:1] == ["console"]:
            found.extend(_commands(body))
        else:
            raise AssertionError(f"a ```{info} block is neither a console nor a file=: "
                                 f"{body[:60]!r}")
    return found


def _commands(body: str) -> list[Command]:
    out: list[Command] = []
    pending = ""
    for raw in body.splitlines():
        if pending:
            pending += "\n" + raw
        elif raw.startswith("$ "):
            pending = raw[2:]
        else:
            if raw.strip():
                if not out:
                    raise AssertionError(f"output before any command: {raw!r}")
                out[-1].shown.append(raw)
            continue
        if pending.endswith("\\"):
            continue
        line, pending = pending, ""
        code = 0
        if m := EXIT.search(line):
            code, line = int(m.group(1)), line[: m.start()]
        line = re.sub(r"\s+#[^'\"\n]*$", "", line).rstrip()
        background = line.endswith(" &")
        out.append(Command(line.removesuffix("&").rstrip(), code, [], background))
    return out


def _norm(line: str) -> str:
    return " ".join(line.split())


def _pattern(shown: str) -> re.Pattern[str]:
    text = re.escape(_norm(shown)).replace("…", ".*?")
    return re.compile(CAPTURE.sub(lambda m: f"(?P<{m.group(1)}>\\S+?)", text))


def match(shown: list[str], printed: str,
          known: dict[str, str] | None = None) -> dict[str, str] | str:
    """The captures if every shown line appears in order, else what is missing."""
    lines = [_norm(x) for x in printed.splitlines()]
    at, captured = 0, {}
    for want in shown:
        for name, value in (known or {}).items():
            want = want.replace(f"${name}", value)
        if _norm(want) == "…":
            continue
        pattern = _pattern(want)
        while at < len(lines) and not (m := pattern.fullmatch(lines[at])):
            at += 1
        if at == len(lines):
            return f"not printed (in this order): {want!r}"
        captured.update(m.groupdict())
        at += 1
    return captured


class Page:
    """One page's folder, its environment and its background processes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root
        home = root / ".home"
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ASSAY_", "PYTEST_", "OPENAI_", "ANTHROPIC_"))}
        env.update(HOME=str(home), COLUMNS="120", NO_COLOR="1", TERM="dumb",
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
        self.env = env
        self.background: list[subprocess.Popen[str]] = []
        self.captured: dict[str, str] = {}

    def run(self, text: str) -> None:
        try:
            for step in steps(text):
                if isinstance(step, File):
                    path = self.root / step.path
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(step.text, encoding="utf-8")
                elif isinstance(step, Excerpt):
                    whole = (self.root / step.path).read_text(encoding="utf-8")
                    assert step.text in whole, f"not word for word in {step.path}:\n{step.text}"
                else:
                    self._command(step)
        finally:
            self.close()

    def _command(self, cmd: Command) -> None:
        words = shlex.split(cmd.line) if not cmd.line.startswith("export ") else []
        if cmd.line.startswith("export "):
            name, _, value = cmd.line[len("export "):].partition("=")
            known = {**self.env, "PWD": str(self.cwd)}
            self.env[name] = re.sub(r"\$(\w+)|\$\{(\w+)\}",
                                    lambda m: known.get(m[1] or m[2], m[0]), value.strip("'\""))
            return
        if words[:1] == ["cd"]:
            self.cwd = (self.cwd / words[1]).resolve()
            return
        if cmd.background:
            self._start(cmd)
            return
        done = subprocess.run(["bash", "-c", cmd.line], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)
        printed = done.stdout + done.stderr
        assert done.returncode == cmd.code, (
            f"$ {cmd.line}\nexited {done.returncode}, the page says {cmd.code}\n{printed}")
        self._check(cmd, printed)

    def _check(self, cmd: Command, printed: str) -> None:
        got = match(cmd.shown, printed, self.captured)
        assert not isinstance(got, str), f"$ {cmd.line}\n{got}\nit printed:\n{printed}"
        self.env.update(got)
        self.captured.update(got)

    def _start(self, cmd: Command) -> None:
        proc = subprocess.Popen(["bash", "-c", f"exec {cmd.line}"], cwd=self.cwd,
                                env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        self.background.append(proc)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        printed = ""
        while isinstance(match(cmd.shown, printed, self.captured), str):
            try:
                line = lines.get(timeout=TIMEOUT)
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"$ {cmd.line} &\n{match(cmd.shown, printed, self.captured)}\n"
                                     f"it printed:\n{printed}")
            printed += line
        self._check(cmd, printed)

    def close(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.background.clear()

"""Where an MCP server is: ``mcp+stdio:COMMAND ARGS…`` or ``mcp+http(s)://HOST:PORT/PATH``.

Shared by the MCP target (the URI names the server under test) and tool
fixtures (``mcp:`` names servers whose tools a model is offered). Pure
parsing, plus finding the command; no SDK here.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

#: How an MCP server URI may start.
SCHEMES = ("mcp+stdio:", "mcp+http://", "mcp+https://")


@dataclass(frozen=True)
class McpAddress:
    """A stdio server's command and arguments (``argv``), or an HTTP server's ``url``."""

    argv: tuple[str, ...] = ()
    url: str = ""

    @property
    def stdio(self) -> bool:
        """True for a server started as a subprocess."""
        return bool(self.argv)


def parse_mcp_uri(uri: str) -> McpAddress:
    """The address ``uri`` names; ``ValueError`` says what is wrong with it."""
    if uri.startswith("mcp+stdio:"):
        try:
            argv = shlex.split(uri.removeprefix("mcp+stdio:"))
        except ValueError as exc:
            raise ValueError(f"cannot parse the command: {exc}") from None
        if not argv:
            raise ValueError("give the command that starts the server, "
                             "e.g. mcp+stdio:python server.py")
        return McpAddress(argv=tuple(argv))
    if not uri.startswith(SCHEMES):
        raise ValueError(f"an MCP server is {' / '.join(s + '…' for s in SCHEMES)}, "
                         f"not {uri!r}")
    url = uri.removeprefix("mcp+")
    if not urlsplit(url).hostname:
        raise ValueError("give the server's URL, e.g. mcp+http://127.0.0.1:8000/mcp")
    return McpAddress(url=url)


def resolve_command(argv: tuple[str, ...], base_dir: Path) -> list[str]:
    """The command to run: a path (relative to ``base_dir``) or a name on ``PATH``.

    ``ValueError`` when it is neither an executable file nor found on ``PATH``.
    """
    command, *args = argv
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ValueError(f"{path} is not an executable file")
        return [str(path), *args]
    if shutil.which(command) is None:
        raise ValueError(f"command {command!r} not found on PATH")
    return [command, *args]

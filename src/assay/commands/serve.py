"""`assay serve`: the workbench on a local web page (SPEC §11)."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import AssayError, HarnessFailure, UsageError
from .common import fail


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on. Anything but loopback needs --token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port to listen on (0: any free port; the address is printed).")
@click.option("--db", envvar="ASSAY_DB", metavar="URL",
              help="The store to show: a SQLAlchemy URL (default: $ASSAY_DB, else "
                   ".assay/assay.db in this folder).")
@click.option("--token", envvar="ASSAY_SERVE_TOKEN", metavar="TOKEN",
              help="Require this token of every request (a bearer header, or the cookie the "
                   "printed link sets). Needed to listen on anything but loopback; "
                   "`--token new` makes one up (default: $ASSAY_SERVE_TOKEN).")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR",
              help="The private hidden cases runs started from the page use "
                   "(default: $ASSAY_HIDDEN_DIR). Pages still show them only as holdout-N.")
def serve(paths: tuple[Path, ...], host: str, port: int, db: str | None, token: str | None,
          hidden_dir: Path | None) -> None:
    """Serve the workbench: a local page over the store, and its JSON twin.

    Runs, a run filling in live (with cancel), a trial's trace and verdicts,
    compare, trends, the review queue and the ledger, each page also as JSON
    under /api/; suites found under PATHS (default: evals/) can be started
    from it. Listens
    on 127.0.0.1 unless --host says otherwise, which needs --token. Stop it
    with Ctrl-C. Exit 2 on bad usage, 3 if the store or the port cannot be opened.
    """
    try:
        _serve(paths, host, port, db, token, hidden_dir)
    except AssayError as error:
        fail(error)


def _serve(paths: tuple[Path, ...], host: str, port: int, db: str | None, token: str | None,
           hidden_dir: Path | None) -> None:
    from ..install_hints import extra

    if token == "new":
        token = secrets.token_urlsafe(24)
    if token is not None and len(token) < 16:
        raise UsageError("--token must be at least 16 characters (or `new` to make one up)")
    if not _loopback(host) and token is None:
        raise UsageError(f"--host {host} is not loopback: give --token so that only people "
                         "holding it can see the store (--token new makes one up)")
    try:
        import uvicorn

        from ..web import Workbench, create_app
    except ImportError as error:
        raise HarnessFailure(extra("web", error.name or "fastapi")) from None
    bench = Workbench(db=db, paths=paths, hidden_dir=hidden_dir, token=token)
    if not _loopback(host):
        bench.hosts = bench.hosts | {host.lower()}
    bench.open()  # a store that cannot open stops here, before the port is taken
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # Listening before the address is printed: a client that connects at once
        # waits in the backlog until the server's loop accepts it.
        sock.listen(2048)
    except OSError as error:
        raise HarnessFailure(f"cannot listen on {host}:{port}: {error.strerror}") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    click.echo(f"assay workbench on {url}" + (f"login?token={token}" if token else ""))
    click.echo("Ctrl-C stops it.", err=True)
    sys.stdout.flush()
    app = create_app(bench)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=2)
    server = _server(config, bench)
    try:
        server.run(sockets=[sock])
    finally:
        if bench.live is not None:
            bench.live.stop_all()
        if bench.store is not None:
            bench.store.close()


def _server(config: Any, bench: Any) -> Any:
    """uvicorn's server, which ends the workbench's live parts as it stops.

    On Ctrl-C (or SIGTERM) the live progress streams end at once, rather
    than holding the server for its graceful timeout, and every run started
    from the page is interrupted and waited for until it is sealed, before
    uvicorn hands the signal back (``web.children``). A second Ctrl-C stops
    them at once, resumable.
    """
    import asyncio

    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            live = bench.live
            if live is not None:
                live.close()
            await super().shutdown(sockets)
            if live is not None:
                await asyncio.to_thread(live.stop_all, hurry=lambda: self.force_exit)

    return Server(config)

"""A throwaway PostgreSQL cluster on loopback for the queue benches.

Shared by bench/job_queue.py and bench/memory.py. Debian's binaries, started
as tests/postgres.py starts its cluster (fsync off, trust on loopback); each
measurement takes a fresh database from ``database()``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path


class Postgres:
    """A throwaway cluster (as tests/postgres.py starts one)."""

    def __init__(self) -> None:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if not found:
            raise SystemExit("PostgreSQL binaries not found: apt-get install -y postgresql")
        self.bin = found[-1].parent
        self.root = Path(tempfile.mkdtemp(prefix="assay-bench-pg-"))
        self.data = self.root / "data"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._owner([self.bin / "initdb", "-D", self.data, "-U", "postgres", "-E", "UTF8",
                     "--no-sync", "-A", "trust"])
        (self.data / "pg_hba.conf").write_text("local all all trust\n"
                                               "host all all 127.0.0.1/32 trust\n")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                   f"-c unix_socket_directories={self.root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._owner([self.bin / "pg_ctl", "-D", self.data, "-l", self.root / "log", "-o",
                     options, "-W", "start"])
        deadline = time.monotonic() + 60
        while subprocess.run([self.bin / "pg_isready", "-q", "-h", "127.0.0.1", "-p",
                              str(self.port)], check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit("PostgreSQL did not start")
            time.sleep(0.05)
        self.base = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def _owner(self, args: list[object]) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(prefix + [str(a) for a in args], check=True, capture_output=True)

    def database(self) -> str:
        import psycopg

        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
                             autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return f"{self.base}/{name}"

    def stop(self) -> None:
        self._owner([self.bin / "pg_ctl", "-D", self.data, "-m", "immediate", "stop"])
        shutil.rmtree(self.root, ignore_errors=True)

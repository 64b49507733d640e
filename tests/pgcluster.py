"""A throwaway PostgreSQL for the store's tests: Debian's binaries, never the machine's own
service. One initdb per test process (a template data directory); each test gets a copy of
it, started with its own port and socket directory, and stopped and removed after, so the
process guard (tests/process_guard.py) sees nothing of it left. The superuser has a password
over TCP (scram-sha-256, for the credential tests) and none over its own socket.

Tests use the fixtures by importing them: ``from pgcluster import pg, pg_template``.
Skipped, saying why, only where the binaries are missing (scripts/bootstrap installs them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

PG_ROOT = Path("/usr/lib/postgresql")
PASSWORD = "s3cret-pg-word"  # the superuser's, in the throwaway cluster only
USER = "postgres"
SETTINGS = {  # a test cluster: nothing to keep across a crash, so no fsync
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory; None where none is."""
    found = sorted(PG_ROOT.glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def _as_owner(argv: list[str | Path]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the postgres user."""
    argv = [str(a) for a in argv]
    return ["runuser", "-u", USER, "--", *argv] if os.geteuid() == 0 else argv


def _owned_tempdir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(path, USER, USER)
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Cluster:
    """A running throwaway cluster."""

    port: int
    socket_dir: Path
    bin_dir: Path
    data: Path
    log: Path

    def stop(self) -> None:
        """Stopped as an administrator would (its clients are disconnected)."""
        self._pg_ctl("stop", "-m", "fast")

    def start(self) -> None:
        """Started again, on the same port and socket."""
        self._pg_ctl("start", "-l", str(self.log), "-o", _options(self.port, self.socket_dir))

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            _as_owner([self.bin_dir / "pg_ctl", *args, "-D", self.data, "-w"]),
            check=True,
            capture_output=True,
        )

    def url(self, database: str = "postgres", password: str | None = PASSWORD) -> str:
        """A TCP URL (scram-sha-256: the password counts); without one, libpq looks in
        PGPASSWORD and PGPASSFILE."""
        secret = f":{password}" if password is not None else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        with psycopg.connect(host=str(self.socket_dir), port=self.port, user=USER) as conn:
            conn.autocommit = True
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[Path]:
    """One initdb per test process: the data directory each test's cluster copies."""
    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip(f"PostgreSQL is not installed (no {PG_ROOT}/*/bin/initdb): scripts/bootstrap")
    base = _owned_tempdir("fleetperf-pg-template-")
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, USER, USER)
    try:
        subprocess.run(
            _as_owner(
                [
                    bin_dir / "initdb",
                    "-D",
                    base / "data",
                    "-U",
                    USER,
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--no-sync",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "--locale-provider=icu",  # text sorts as people read it ("a" < "B")
                    "--icu-locale=en-US",  # unless a column says otherwise
                ]
            ),
            check=True,
            capture_output=True,
            text=True,
        )
        yield base / "data"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg(pg_template: Path) -> Iterator[Cluster]:
    """A cluster of this test's own, running; stopped and removed after."""
    bin_dir = pg_bin()
    assert bin_dir is not None
    base = _owned_tempdir("fleetperf-pg-")
    data, socket_dir, log = base / "data", base / "sock", base / "log"
    try:
        subprocess.run(["cp", "-a", pg_template, data], check=True)
        socket_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(socket_dir, USER, USER)
        cluster = _start(bin_dir, data, socket_dir, log)
        try:
            yield cluster
        finally:
            subprocess.run(
                _as_owner([bin_dir / "pg_ctl", "stop", "-D", data, "-m", "immediate", "-w"]),
                check=False,
                capture_output=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _start(bin_dir: Path, data: Path, socket_dir: Path, log: Path) -> Cluster:
    """Started on a free port (another may take it between the probe and the start: retry)."""
    for _ in range(3):
        port = _free_port()
        options = _options(port, socket_dir)
        started = subprocess.run(
            _as_owner([bin_dir / "pg_ctl", "start", "-D", data, "-l", log, "-w", "-o", options]),
            check=False,
            capture_output=True,
            text=True,
        )
        if started.returncode == 0:
            return Cluster(port, socket_dir, bin_dir, data, log)
    log_text = log.read_text() if log.exists() else ""
    raise RuntimeError(f"pg_ctl start failed: {started.stdout}{started.stderr}{log_text}")


def _options(port: int, socket_dir: Path) -> str:
    """The postgres server's options: its port, socket directory and SETTINGS."""
    options = [f"-p {port}", f"-k {socket_dir}"]
    return " ".join(options + [f"-c {name}={value}" for name, value in SETTINGS.items()])

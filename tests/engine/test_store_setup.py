"""docs/store.md's "Making the PostgreSQL database" (issue 41 point 12), run as written
against a throwaway PostgreSQL 15: the role and the database its commands make, the
password from a 0600 password file, the store from the settings file, then `fleetperf
results` opens it (making its tables) and a second controller's command reads the same."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import psycopg
from conftest import REPO
from pgcluster import USER, Cluster, pg, pg_template  # noqa: F401 (fixtures)

SECTION = "## Making the PostgreSQL database"


def _blocks() -> list[list[str]]:
    text = (REPO / "docs" / "store.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [b.strip().splitlines() for b in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_the_documented_steps_make_a_store_fleetperf_opens(
    tmp_path: Path,
    pg: Cluster,  # noqa: F811
) -> None:
    server, controller = _blocks()
    admin = ["-h", str(pg.socket_dir), "-p", str(pg.port), "-U", USER]
    for line in server:
        argv = shlex.split(line)
        assert argv[:3] == ["sudo", "-u", "postgres"], line
        if argv[3] == "psql":  # \password prompts on a terminal: the same, as SQL
            assert argv[4:] == ["-c", "\\password fleet"]
            with psycopg.connect(host=str(pg.socket_dir), port=pg.port, user=USER) as conn:
                conn.execute("ALTER ROLE fleet PASSWORD 'fleet-pw'")
            continue
        done = subprocess.run(
            [str(pg.bin_dir / argv[3]), *admin, *argv[4:]], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr

    # The controller's side: the password file's line, the settings file, the command.
    assert controller[0].startswith("(umask 077 && ${EDITOR:-nano} ~/.pgpass)")
    line = controller[0].split("# add the line ", 1)[1].strip()
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(
        line.replace("db:5432", f"127.0.0.1:{pg.port}").replace("PASSWORD", "fleet-pw") + "\n"
    )
    pgpass.chmod(0o600)
    url = re.search(r"echo (postgresql://\S+) >", controller[1]).group(1)
    settings = tmp_path / "config" / "fleetperf" / "store"
    settings.parent.mkdir(parents=True)
    settings.write_text(url.replace("@db/", f"@127.0.0.1:{pg.port}/") + "\n")
    env = {
        **os.environ,
        "PGPASSFILE": str(pgpass),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "FLEETPERF_RESULTS": str(tmp_path / "results"),
    }
    env.pop("FLEETPERF_STORE", None)
    env.pop("PGPASSWORD", None)
    argv = shlex.split(controller[2])
    assert argv[0] == "fleetperf"
    for _ in range(2):  # the first open makes the tables; the second finds them
        out = subprocess.run(
            [sys.executable, "-m", "tui.cli", *argv[1:]],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout == "no runs in the store\n"
    with psycopg.connect(host=str(pg.socket_dir), port=pg.port, user=USER, dbname="fleetperf") as c:
        owners = c.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
        assert owners.fetchall() == [("fleet",)]
    assert not (tmp_path / "results" / "fleetperf.sqlite").exists()

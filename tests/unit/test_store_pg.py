"""The results store on a real PostgreSQL (tests/pgcluster.py): credentials, refusals that
name the database without its password, several controllers opening one database at once,
and the database going away and coming back. The behaviour both backends share is tested
on both in tests/unit/test_store.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from pgcluster import PASSWORD, USER, Cluster, pg, pg_template  # noqa: F401 (fixtures)
from seed_records import seed001_records

from tui.results.interrupted import mark_interrupted
from tui.results.store import ResultStore, StoreError


def test_a_wrong_password_is_one_line_without_the_password(pg: Cluster) -> None:  # noqa: F811
    pg.create_database("fleetperf")
    url = pg.url("fleetperf", password="not-the-w0rd")
    with pytest.raises(StoreError) as refused:
        ResultStore(url)
    message = str(refused.value)
    assert "\n" not in message and "not-the-w0rd" not in message
    shown = f"postgresql+psycopg://{USER}:***@127.0.0.1:{pg.port}/fleetperf"
    assert message.startswith(f"{shown}: cannot open the results store (")
    assert "password authentication failed" in message


def test_an_unreachable_database_is_one_line(pg: Cluster) -> None:  # noqa: F811
    pg.stop()
    started = time.monotonic()
    with pytest.raises(StoreError) as refused:
        ResultStore(pg.url())
    assert time.monotonic() - started < 10
    message = str(refused.value)
    assert "\n" not in message and PASSWORD not in message
    assert "Connection refused" in message and f"127.0.0.1:{pg.port}/postgres:" in message


def test_the_password_from_pgpassword_or_a_password_file(
    pg: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = pg.create_database("fleetperf").replace(f":{PASSWORD}@", "@")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(StoreError, match="password"):
        ResultStore(url)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with ResultStore(url) as store:
        store.add(seed001_records()[0])
    monkeypatch.delenv("PGPASSWORD")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg.port}:fleetperf:{USER}:{PASSWORD}\n")
    passfile.chmod(0o600)  # libpq ignores a password file others can read
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with ResultStore(url) as store:
        assert [r.run_id for r in store.list()] == ["r1"]


def test_url_forms_and_the_masked_repr(pg: Cluster, tmp_path: Path) -> None:  # noqa: F811
    url = pg.create_database("fleetperf")
    for form in (url, url.replace("postgresql:", "postgres:"), url.replace(":", "+psycopg:", 1)):
        with ResultStore(form) as store:
            assert store.path is None
            assert repr(store) == (
                f"ResultStore('postgresql+psycopg://{USER}:***@127.0.0.1:{pg.port}/fleetperf')"
            )
    file = tmp_path / "a" / "fleetperf.sqlite"
    with ResultStore(f"sqlite:///{file}") as store:
        assert store.path == file and store.where == str(file) and file.is_file()
    for bad, why in (
        ("mysql://u:pw@h/db", "a store is a SQLite file"),
        ("postgresql+psycopg2://u:pw@h/db", "a store is a SQLite file"),
        ("sqlite://", "needs a file"),
        ("postgresql://u:pw@h:notaport/db", "not a store URL"),
    ):
        with pytest.raises(StoreError, match=why) as refused:
            ResultStore(bad)
        assert ":pw@" not in str(refused.value) and "\n" not in str(refused.value)


_OPENER = """
import sys, time
from tui.results.store import ResultStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # together, unless loaded
ResultStore(sys.argv[1]).close()
"""


@pytest.mark.slow  # controllers in processes of their own, racing
def test_controllers_creating_one_database_at_once_all_get_it(pg: Cluster) -> None:  # noqa: F811
    # Each makes the schema in its own transaction; the others wait for the first one's
    # (an advisory lock) and then find it made.
    url = pg.create_database("fleetperf")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    start = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, url, str(start)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, "".join(errors)
    with ResultStore(url) as store:
        assert store.list() == []


def test_a_restarted_database_is_written_again(pg: Cluster) -> None:  # noqa: F811
    first, second = seed001_records()[:2]
    url = pg.create_database("fleetperf")
    with ResultStore(url) as store:
        store.add(first)
        pg.stop()
        with pytest.raises(StoreError) as refused:  # down: one line, the record not stored
            store.add(second)
        assert str(refused.value).startswith("postgresql+psycopg://postgres:***@")
        assert "\n" not in str(refused.value) and PASSWORD not in str(refused.value)
        pg.start()
        store.add(second)  # the pool's dead connections are replaced
        assert store.list() == [first, second]


# A controller: writes its run 'running' under its own lease, says which, and lives until
# its stdin closes (or it is killed).
_CONTROLLER = """
import json, sys
from seed_records import seed001_records
from tui.executors.base import new_run_id
from tui.results.store import ResultStore
from tui.results.interrupted import controller_id
run = seed001_records()[0].model_copy(update={
    "run_id": new_run_id("distilbert-pytorch"), "status": "running", "finished": None,
    "controller": controller_id()})
with ResultStore(sys.argv[1]) as store:
    store.add(run)
    print(json.dumps(run.run_id), flush=True)
    sys.stdin.read()
"""


def test_a_killed_controllers_run_is_interrupted_and_a_live_ones_is_not(
    pg: Cluster,  # noqa: F811
) -> None:
    url = pg.create_database("fleetperf")
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-c", _CONTROLLER, url]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    with (
        subprocess.Popen(argv, env=env, **pipes) as killed,
        subprocess.Popen(argv, env=env, **pipes) as live,
    ):
        killed_run, live_run = (json.loads(p.stdout.readline()) for p in (killed, live))
        killed.kill()  # its connection dies with it, mid-session
        killed.wait()
        with ResultStore(url) as store:
            assert [r.run_id for r in mark_interrupted(store)] == [killed_run]
            assert store.get(killed_run).status == "interrupted"
            assert store.get(live_run).status == "running"
            assert mark_interrupted(store) == []  # judged once
        live.communicate("", timeout=60)
    assert live.returncode == 0
